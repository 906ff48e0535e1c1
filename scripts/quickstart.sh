#!/usr/bin/env bash
# A newcomer's first command: install what is missing, build, and run the main
# job on the small example (the planner, until the worker lands).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/launcher/tencache-launch plan configs/examples/quickstart.yaml
