// Built into tencache-worker only in the AddressSanitizer build (TENCACHE_ASAN).
// Open MPI leaks by design in MPI_Init and MPI_Finalize (its components, the
// libevent progress thread), and through its frame-pointer-less libraries the
// fast unwinder sees one or two frames of each allocation, too few for a
// suppression to tell them from a leak of ours; the full unwinder makes the
// worker four times slower. So LeakSanitizer stays off in the MPI worker only:
// the trainer, cache and store run leak-checked in the in-process worker tests,
// and ASan's other checks stay on here. ASAN_OPTIONS still overrides this.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
