#!/usr/bin/env bash
# A newcomer's first command: install what is missing, build, plan the small
# example job, then train it on two MPI ranks of this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/launcher/tencache-launch plan configs/examples/quickstart.yaml
echo
as_root=""
if [ "$(id -u)" -eq 0 ]; then as_root="--allow-run-as-root"; fi
mpirun $as_root --oversubscribe -n 2 build/worker/tencache-worker \
  --job configs/examples/quickstart.yaml --metrics build/quickstart-metrics.jsonl
echo "Per-step metrics: build/quickstart-metrics.jsonl"
