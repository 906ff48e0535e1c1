#!/usr/bin/env bash
# A newcomer's first command: install what is missing, build, then
# `tencache-launch configs/examples/quickstart.yaml`: plan the small example job
# (this machine measured beside the cloud instance types), train it on this
# machine's MPI ranks with the plan's budgets, and report measured against
# predicted cost. Extra arguments go to tencache-launch (e.g. --steps 20).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DTENCACHE_WERROR=OFF  # warnings stay warnings here; CI's build (scripts/test.sh) has -Werror
exec build/launcher/tencache-launch configs/examples/quickstart.yaml "$@"
