#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: first the cache
# manager's tests built again under ThreadSanitizer, then the whole suite, then
# the whole suite built again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# -Werror in all three builds: a new warning fails CI (scripts/quickstart.sh
# builds without it, so a newcomer's different compiler still builds).
# -g1 (line tables) instead of the build type's -g: with the libtorch headers full debug
# information is 40 % of a worker file's compile time, and CI reads no variables.
scripts/build.sh -DTENCACHE_WERROR=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"

echo "== ThreadSanitizer build of cachemgr (${SECONDS} s so far) =="
cmake -S . -B build-tsan -DTENCACHE_TSAN=ON -DTENCACHE_WERROR=ON -DTENCACHE_WORKER=OFF -DTENCACHE_CUDA=OFF \
  -DTENCACHE_BUILD_BENCH=OFF >build-tsan.configure.log 2>&1 || { cat build-tsan.configure.log; exit 1; }
cmake --build build-tsan -j"$(nproc)" --target cachemgr_all_tests
# setarch -R: TSan needs a memory layout that address randomisation can break.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" setarch "$(uname -m)" -R \
  ctest --test-dir build-tsan -R "^cachemgr_" --output-on-failure -j"$(nproc)"

echo "== Test suite (${SECONDS} s so far) =="
ctest --test-dir build --output-on-failure -j"$(nproc)"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build of the whole suite (${SECONDS} s so far) =="
# Every program the tests start (tencache-launch, tencache-worker under mpirun,
# tencache-sim) is the sanitized one of build-asan. LeakSanitizer is on, except in
# tencache-worker, where Open MPI's own leaks cannot be told apart (worker/asan_options.cc).
# Left out, for CI's hour (all of them run in the suite above): the multinode cases
# (7 minutes more under ASan), and the two cases that stop a whole run with a signal
# (kill-and-resume, SIGTERM, three Ctrl-Cs; 2-3 minutes each under ASan, against 20-40 s without).
# Sanitized all the same: the MPI worker in worker_mpi_test, the launcher's runner and
# a killed rank in launcher_launch_run_test, resuming in worker_checkpoint_test.
# Warnings are not errors here: under -fsanitize=address gcc 12 reports
# -Wmaybe-uninitialized inside libstdc++'s <regex> (std::function in a moved
# _State), which the same code without the sanitizer does not; the main and TSan
# builds above keep -Werror.
export ASAN_OPTIONS="check_initialization_order=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cmake -S . -B build-asan -DTENCACHE_ASAN=ON -DTENCACHE_WERROR=OFF -DTENCACHE_WORKER=ON -DTENCACHE_CUDA=OFF \
  -DTENCACHE_BUILD_BENCH=OFF >build-asan.configure.log 2>&1 || { cat build-asan.configure.log; exit 1; }
cmake --build build-asan -j"$(nproc)"
echo "== The suite under AddressSanitizer + UndefinedBehaviorSanitizer (${SECONDS} s so far) =="
ctest --test-dir build-asan -E "^multinode_|^launcher_kill_resume_test\\.|SigtermStopsEveryRank|AnInterruptLeavesWholeMetrics" --output-on-failure -j"$(nproc)"
echo "== All passed in ${SECONDS} s =="
