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
  libcli11-dev gnuplot-nox
)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "install-deps: ${#packages[@]} packages present"
