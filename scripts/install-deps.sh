#!/usr/bin/env bash
# Installs every Debian package tencache builds, tests and benchmarks with.
# Idempotent; uses sudo when not run as root.
set -euo pipefail
packages=(
  cmake g++ make pkg-config
  libyaml-cpp-dev nlohmann-json3-dev liburing-dev
  libgtest-dev libgmock-dev
  libopenmpi-dev openmpi-bin
  libtorch-dev libopenblas0-pthread
  fio
  sentencepiece  # spm_train, spm_encode: the scale ladder's tokenised corpus (bench/scale_ladder.sh)
  libcli11-dev gnuplot-nox
  iproute2 util-linux  # ip, tc, unshare, nsenter: the multi-node tests (tests/multinode)
  clang libclang-rt-dev  # libFuzzer and the sanitizers' runtimes: the fuzz targets (tests/fuzz, bench/fuzz)
)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "install-deps: ${#packages[@]} packages present"

# The Kubernetes manifest validator's npm packages (tests/k8s), from the committed
# lock: installed when missing, or again when the lock is newer than the install.
k8s_tests="$(cd "$(dirname "$0")/.." && pwd)/tests/k8s"
if ! command -v npm >/dev/null; then
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if [ ! -d "$k8s_tests/node_modules" ] || [ "$k8s_tests/package-lock.json" -nt "$k8s_tests/node_modules/.package-lock.json" ]; then
  npm ci --prefix "$k8s_tests" --no-audit --no-fund --loglevel=error >/dev/null
fi
echo "install-deps: node $(node --version), tests/k8s npm packages present"
# kubectl is not a Debian package; our machines have it. Without it only the
# kustomize test (k8s_kustomize_base) skips.
if ! command -v kubectl >/dev/null; then
  echo "install-deps: kubectl not found; k8s_kustomize_base will skip. Install it from" \
       "https://kubernetes.io/docs/tasks/tools/install-kubectl-linux/ (1.27 or newer)"
fi
