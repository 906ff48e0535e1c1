#!/usr/bin/env bash
# Configures and builds tencache into build/ (RelWithDebInfo). The worker is
# required, so a missing libtorch or MPI fails here rather than leaving its tests
# out. Extra arguments go to CMake and win, e.g. scripts/build.sh -DTENCACHE_WORKER=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DTENCACHE_WORKER=ON "$@" >build.configure.log 2>&1 || { cat build.configure.log; exit 1; }
grep -E '^-- tencache:' build.configure.log || true
cmake --build build -j"$(nproc)"
