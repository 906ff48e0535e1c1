#!/usr/bin/env bash
# Does tencache-sim predict the worker's step? Runs the worker on two jobs —
# the train bench's I/O-bound shape (4 layers of 256, 4 MiB device, 24 MiB
# host, bf16) and GPT-2 124M with its optimizer states mostly on NVMe (256 MiB
# device, 388 MiB host) — then replays the trace it wrote with the replay line
# it printed (`--policy tencache --json`). The trace's access times and leads
# are medians over the worker's last (at most 9) timed steps; the worker's
# figure is its mean step over those same steps and the simulator's its mean
# over as many steady-state steps (`--steps`), so that a step pattern that
# repeats (NVMe traffic can cycle over a few steps) weighs the same in both. Prints, per
# run, both step times, the error, stall and NVMe bytes, and writes
# $RESULTS_DIR/sim_vs_worker.json (default bench/results) from them through
# bench/results_file.py; the runs are in a temporary folder, removed at exit.
# Run it on a quiet machine.
#   [RESULTS_DIR=DIR] bench/sim_vs_worker.sh [ROUNDS] [IO_STEPS] [GPT2_STEPS]
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] bench/sim_vs_worker.sh [ROUNDS] [IO_STEPS] [GPT2_STEPS]"
source "$(dirname "$0")/lib.sh"
bench_results_dir
[[ $# -le 3 ]] || { echo "$usage" >&2; exit 2; }
cd "$(dirname "$0")/.."
rounds=${1:-2}
io_steps=${2:-30}
gpt2_steps=${3:-8}
for n in "$io_steps" "$gpt2_steps"; do  # a trace needs a profiled step, a refill and a timed one
  [[ $n =~ ^[0-9]+$ && $n -ge 4 ]] || { echo "bench/sim_vs_worker.sh: steps '$n': expected an integer >= 4; $usage" >&2; exit 2; }
done
bench_positive_ints bench/sim_vs_worker.sh "$usage" "$rounds"
build=$PWD/build
bench_executables bench/sim_vs_worker.sh "$build/worker/tencache-worker" "$build/scheduler/tencache-sim"
out=$(mktemp -d /tmp/tencache-simworker.XXXXXX)
trap 'rm -rf "$out"' EXIT
data=/usr/share/common-licenses/GPL-3
cat >"$out/io.yaml" <<EOF
name: simw-io
model: {layers: 4, hidden: 256, heads: 4, ffn_hidden: 1024, seq_len: 32, vocab: 256, dtype: bf16}
train: {data: $data, lr: 1.0e-3, seed: 1, micro_batch: 1, global_batch: 1}
cache: {policy: tencache, device_budget: 4MiB, host_budget: 24MiB, nvme_path: $out/nvme}
EOF
cat >"$out/gpt2.yaml" <<EOF
name: simw-gpt2
model: {preset: gpt2, seq_len: 128, dtype: bf16}
train: {data: $data, lr: 1.0e-3, seed: 1, micro_batch: 1, global_batch: 1}
cache: {policy: tencache, device_budget: 256MiB, host_budget: 388MiB, nvme_path: $out/nvme}
EOF
run() {  # job steps tag
  local job=$1 steps=$2 tag=$3
  rm -rf "$out/nvme"
  "$build/worker/tencache-worker" --job "$out/$job.yaml" --steps "$steps" --trace "$out/$tag.trace" \
    --metrics "$out/$tag.jsonl" >"$out/$tag.log" 2>&1 || { echo "$tag: worker failed:" >&2; tail -n 30 "$out/$tag.log" >&2; exit 1; }
  local replay
  replay=$(grep -o "replay: tencache-sim.*--policy tencache" "$out/$tag.log" | sed 's/^replay: tencache-sim //')
  [[ -n $replay ]] || { echo "$tag: no replay line in the worker's log:" >&2; tail -n 30 "$out/$tag.log" >&2; exit 1; }
  # shellcheck disable=SC2086  # the replay line is the worker's own, word-split on purpose
  local counted=$((steps - 2 < 9 ? steps - 2 : 9))
  "$build/scheduler/tencache-sim" $replay --steps "$counted" --json >"$out/$tag.sim.json"
  python3 - "$out" "$tag" <<'PY'
import json, statistics, sys
out, tag = sys.argv[1:]
steps = [json.loads(l) for l in open(f"{out}/{tag}.jsonl") if l.strip()]
last = steps[-min(9, len(steps) - 2):]
worker = statistics.mean(m["step_time_s"] for m in last)
stall = statistics.mean(m["stall_s"] for m in last)
rd = statistics.mean(m["bytes_nvme_read"] for m in last) / 2**20
r = json.load(open(f"{out}/{tag}.sim.json"))["results"][0]
json.dump({"worker": worker, "stall": stall, "read": rd, "sim": r}, open(f"{out}/{tag}.summary.json", "w"))
print(f"{tag}: worker {worker:.4f} s (mean of its last {len(last)} steps, stall {stall:.4f} s, "
      f"NVMe read {rd:.1f} MiB); sim {r['step_time_s']:.4f} s ({(r['step_time_s'] / worker - 1) * 100:+.1f} %, "
      f"stall {r['stall_s']:.4f} s, NVMe read {r['bytes_nvme_read'] / 2**20:.1f} MiB, bound {r['bound_lane']})")
PY
}
for round in $(seq 1 "$rounds"); do
  run io "$io_steps" "io-$round"
  run gpt2 "$gpt2_steps" "gpt2-$round"
done
python3 - "$out" "$rounds" "$io_steps" "$gpt2_steps" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import results_file as rf
out, rounds, io_steps, gpt2_steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = []
for r in range(1, rounds + 1):
    for job, label in (("io", "io-bound"), ("gpt2", "GPT-2 124M")):
        s = json.load(open(f"{out}/{job}-{r}.summary.json"))
        w, sim = s["worker"], s["sim"]
        rows.append([str(r), label, f"{w:.4f} s", f"{sim['step_time_s']:.4f} s",
                     f"{(sim['step_time_s'] / w - 1) * 100:+.1f} %", f"{s['stall']:.3f} / {sim['stall_s']:.3f} s",
                     f"{s['read']:.1f} / {sim['bytes_nvme_read'] / 2**20:.1f} MiB"])
rf.write(
    "sim_vs_worker",
    commands=[f"bench/sim_vs_worker.sh {rounds} {io_steps} {gpt2_steps}"],
    rounds=f"{rf.plural(rounds, 'run')}; each compares one worker run with the simulator's replay of its "
           "trace.",
    about=[f"Runs `tencache-worker` on the io-bound job ({io_steps} steps) and on GPT-2 124M ({gpt2_steps} steps) with "
           "`--trace`, replays each trace with `tencache-sim --policy tencache --json`, and compares the simulated "
           "step with the worker's: the worker's mean over its last (at most 9) steps, the simulator's mean over as "
           "many steady-state steps (`--steps`), so that NVMe traffic that cycles over a few steps weighs the same in "
           "both. error = (sim - worker) / worker; the target is within 10 %."],
    tables=[{"columns": ["run", "job", "worker step", "sim step", "error", "stall worker / sim",
                         "NVMe read worker / sim"], "rows": rows}],
)
PY
