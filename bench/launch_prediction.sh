#!/usr/bin/env bash
# The planner's predicted step time for this machine against the measured
# median, side by side: the quickstart (every shard resident) and an I/O-bound
# variant whose budgets force NVMe traffic every step, in ROUNDS rounds whose
# order alternates. Each round measures this machine again (--reprobe) on the
# quickstart, so that the probe's own noise is in the spread. Prints one line
# per run and the median and range of the errors, and writes
# $RESULTS_DIR/launch_prediction.json (default bench/results) from the runs'
# report.json through bench/results_file.py; the run folders are in a
# temporary folder, removed at exit. Run it on a quiet machine.
#   [RESULTS_DIR=DIR] bench/launch_prediction.sh [ROUNDS] [STEPS]
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] bench/launch_prediction.sh [ROUNDS] [STEPS]"
source "$(dirname "$0")/lib.sh"
bench_results_dir
[[ $# -le 2 ]] || { echo "$usage" >&2; exit 2; }
rounds=${1:-4}
steps=${2:-40}
bench_positive_ints bench/launch_prediction.sh "$usage" "$rounds" "$steps"
cd "$(dirname "$0")/.."
launch=build/launcher/tencache-launch
bench_executables bench/launch_prediction.sh "$launch"
out=$(mktemp -d /tmp/tencache-prediction.XXXXXX)
trap 'rm -rf "$out"' EXIT
job=configs/examples/quickstart.yaml
io=(--set cache.device_budget=1MiB --set cache.host_budget=3MiB)
run() {  # name, round, extra args...
  local name=$1 round=$2; shift 2
  "$launch" "$job" --steps "$steps" --out "$out/$name-$round" "$@" >"$out/$name-$round.log" 2>&1 ||
    { echo "$name round $round failed:" >&2; tail -n 30 "$out/$name-$round.log" >&2; exit 1; }
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
python3 - "$out" "$rounds" "$steps" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
import results_file as rf
out, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = {"quickstart": "quickstart", "io-bound": "I/O-bound"}
reports = {n: [json.load(open(f"{out}/{n}-{r}/report.json")) for r in range(1, rounds + 1)] for n in names}
errs = {n: [r["prediction_error"] * 100 for r in reports[n]] for n in names}
for n, e in errs.items():
    print(f"{n}: median error {statistics.median(e):+.1f} %, range {min(e):+.1f} .. {max(e):+.1f} % over {len(e)} rounds")
q = reports["quickstart"][0]["run"]
read = {n: statistics.median(r["measured"].get("bytes_nvme_read", 0) for r in reports[n]) / 2**20 for n in names}
budgets = f"device {q['budgets']['device'] / 2**20:.2f} MiB, host {q['budgets']['host'] / 2**20:.2f} MiB per rank"
resident = (f"every shard resident: {budgets}, no NVMe" if read["quickstart"] == 0 else
            f"{budgets}, {read['quickstart']:.2f} MiB read from NVMe a step")
about = [
    f"Each round runs `tencache-launch configs/examples/quickstart.yaml --steps {steps}` ({q['ranks']} ranks, "
    f"{q['dtype']}, {resident}) and an I/O-bound variant (`--set "
    "cache.device_budget=1MiB --set cache.host_budget=3MiB`: part of the optimizer state on the NVMe tier, "
    f"{read['io-bound']:.2f} MiB read a step), alternating which goes first, and measures the machine again "
    "(`--reprobe`) at the start of every round, so that the probe's own noise is in the spread. Measured: the median "
    "step after two warm-up steps (report.json `measured.step_time_s`); predicted: this machine's candidate for the "
    "resolved job (`predicted.step_time_s`); error = (predicted - measured) / measured."]
def cell(e):
    return f"{statistics.median(e):+.1f} % ({min(e):+.1f} .. {max(e):+.1f})"
ms = {n: [r["measured"]["step_time_s"] * 1e3 for r in reports[n]] for n in names}
rf.write(
    "launch_prediction",
    commands=[f"bench/launch_prediction.sh {rounds} {steps}"],
    rounds=f"one run of {rf.plural(rounds, 'round')}; median error over the rounds (range).",
    about=about,
    tables=[{"columns": ["run", "quickstart: median error (range)", "I/O-bound: median error (range)"],
             "rows": [["1", cell(errs["quickstart"]), cell(errs["io-bound"])]]}],
    notes=["Measured steps: " + ", ".join(f"{rf.span(ms[n], '{:.1f}', ' ms')} ({label})" for n, label in names.items())
           + "."],
)
PY
