#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: first the cache
# manager's tests built again under ThreadSanitizer, then the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh

echo "== ThreadSanitizer build of cachemgr =="
cmake -S . -B build-tsan -DTENCACHE_TSAN=ON -DTENCACHE_WORKER=OFF -DTENCACHE_CUDA=OFF \
  -DTENCACHE_BUILD_BENCH=OFF >build-tsan.configure.log 2>&1 || { cat build-tsan.configure.log; exit 1; }
cmake --build build-tsan -j"$(nproc)" --target cachemgr_all_tests
# setarch -R: TSan needs a memory layout that address randomisation can break.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" setarch "$(uname -m)" -R \
  ctest --test-dir build-tsan -R "^cachemgr_" --output-on-failure -j"$(nproc)"

echo "== Test suite =="
ctest --test-dir build --output-on-failure -j"$(nproc)"
