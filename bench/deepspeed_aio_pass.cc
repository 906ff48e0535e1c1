// deepspeed-aio-pass: one sequential O_DIRECT pass over a file through
// DeepSpeed's own libaio engine (csrc/aio/common, do_aio_operation_overlap: the
// path its aio handle takes with overlap_events on, its default), so that
// `tencache-bench nvme --deepspeed-aio` can put the engine ZeRO-Infinity users
// would otherwise run beside NvmeTier and fio on the same file.
//
// Not part of the tencache build: bench/deepspeed_aio.sh compiles it with
// DeepSpeed's sources in a scratch folder outside the repository. Nothing of
// DeepSpeed is copied here; this file only calls its API.
//
// Usage: deepspeed-aio-pass FILE BYTES BLOCK DEPTH read|write [huge]
// `huge` gives the buffer the memory tencache's host arena uses (2 MiB-aligned,
// advised MADV_HUGEPAGE), to tell the engine's share from the memory's; without
// it the buffer is plain 4 KiB pages, as DeepSpeed allocates on its own.
// Prints one line: `gbps <GB/s>`, timed as DeepSpeed times it (first submit to
// last completion of one BYTES-long transfer; the file's open and the buffer's
// allocation and first touch are outside the timing). Exit 2 on bad arguments,
// 1 on an I/O failure.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "deepspeed_aio_common.h"

int main(int argc, char** argv) {
  if ((argc != 6 && argc != 7) || (std::strcmp(argv[5], "read") != 0 && std::strcmp(argv[5], "write") != 0) ||
      (argc == 7 && std::strcmp(argv[6], "huge") != 0)) {
    std::fprintf(stderr, "usage: %s FILE BYTES BLOCK DEPTH read|write [huge]\n", argv[0]);
    return 2;
  }
  const bool huge = argc == 7;
  const char* file = argv[1];
  const long long bytes = std::atoll(argv[2]);
  const int block = std::atoi(argv[3]);
  const int depth = std::atoi(argv[4]);
  const bool read_op = std::strcmp(argv[5], "read") == 0;
  if (bytes <= 0 || block <= 0 || block % 4096 != 0 || depth <= 0 || bytes % block != 0) {
    std::fprintf(stderr, "%s: BYTES a positive multiple of BLOCK, BLOCK a multiple of 4096, DEPTH > 0\n", argv[0]);
    return 2;
  }
  void* buf = nullptr;
  if (posix_memalign(&buf, huge ? (2 << 20) : 4096, static_cast<size_t>(bytes)) != 0) {
    std::fprintf(stderr, "%s: cannot allocate %lld bytes\n", argv[0], bytes);
    return 1;
  }
  if (huge && madvise(buf, static_cast<size_t>(bytes), MADV_HUGEPAGE) != 0) {  // as the host arena: best effort
    std::fprintf(stderr, "%s: note: madvise(MADV_HUGEPAGE) refused, 4 KiB pages\n", argv[0]);
  }
  std::memset(buf, 0x5a, static_cast<size_t>(bytes));  // first touch outside the timing, as a pinned tensor
  const int fd = open_file(file, read_op);
  if (fd < 0) return 1;
  // DeepSpeed's defaults apart from block and depth: submit in blocks, overlap events, no mlock.
  deepspeed_aio_config_t config(block, depth, /*single_submit=*/false, /*overlap_events=*/true,
                                /*lock_memory=*/false);
  std::unique_ptr<aio_context> ctxt(new aio_context(block, depth));
  std::unique_ptr<io_xfer_ctxt> xfer(new io_xfer_ctxt(fd, 0, 0, bytes, buf));
  deepspeed_aio_perf_t perf{};
  do_aio_operation_overlap(read_op, ctxt, xfer, &config, &perf);
  close(fd);
  std::free(buf);
  std::printf("gbps %.6f\n", perf._e2e_rate_GB);
  return 0;
}
