#!/usr/bin/env bash
# The planner's predicted step time for this machine against the measured
# median, side by side: the quickstart (every shard resident) and an I/O-bound
# variant whose budgets force NVMe traffic every step, in ROUNDS rounds whose
# order alternates. Each round measures this machine again (--reprobe) on the
# quickstart, so that the probe's own noise is in the spread. Prints one line
# per run and the median and range of the errors; run it on a quiet machine.
#   bench/launch_prediction.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-4}
steps=${2:-40}
launch=build/launcher/tencache-launch
out=$(mktemp -d /tmp/tencache-prediction.XXXXXX)
job=configs/examples/quickstart.yaml
io=(--set cache.device_budget=1MiB --set cache.host_budget=3MiB)
run() {  # name, round, extra args...
  local name=$1 round=$2; shift 2
  "$launch" "$job" --steps "$steps" --out "$out/$name-$round" "$@" >"$out/$name-$round.log" 2>&1 ||
    { echo "$name round $round failed: see $out/$name-$round.log"; exit 1; }
  python3 - "$out/$name-$round/report.json" "$name" "$round" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m, p = r["measured"], r["predicted"]
print(f"{sys.argv[2]:10s} round {sys.argv[3]}  measured {m['step_time_s']*1e3:7.1f} ms  predicted "
      f"{p['step_time_s']*1e3:7.1f} ms  error {r['prediction_error']*100:+6.1f} %  "
      f"NVMe read {m['bytes_nvme_read']/2**20:5.2f} MiB/step")
PY
}
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then
    run quickstart "$round" --reprobe; run io-bound "$round" "${io[@]}"
  else
    run io-bound "$round" "${io[@]}" --reprobe; run quickstart "$round"
  fi
done | tee "$out/summary.txt"
python3 - "$out/summary.txt" <<'PY'
import re, statistics, sys
errs = {}
for line in open(sys.argv[1]):
    name = line.split()[0]
    errs.setdefault(name, []).append(float(re.search(r"error\s+([+-][\d.]+)", line).group(1)))
for name, e in errs.items():
    print(f"{name}: median error {statistics.median(e):+.1f} %, range {min(e):+.1f} .. {max(e):+.1f} % over {len(e)} rounds")
PY
echo "Run folders: $out"
