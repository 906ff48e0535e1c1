#!/usr/bin/env bash
# What the deferred-update mode costs (train.grad_clip, and fp16's overflow
# check): the same job with and without train.grad_clip, interleaved round by
# round, once with every state in host memory and once with a host budget that
# sends part of the states (and, clipping, the stored gradients) to NVMe.
# Prints each round's step times (medians after warm-up, from report.json),
# the ratio, and the NVMe bytes per step each moved. Writes
# $RESULTS_DIR/clip_cost.json (default bench/results) from the reports through
# bench/results_file.py; the run folders are in a temporary folder, removed at
# exit. Run it on a quiet machine.
#   [RESULTS_DIR=DIR] bench/clip_cost.sh [ROUNDS] [STEPS]
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] bench/clip_cost.sh [ROUNDS] [STEPS]"
source "$(dirname "$0")/lib.sh"
bench_results_dir
[[ $# -le 2 ]] || { echo "$usage" >&2; exit 2; }
rounds=${1:-3}
steps=${2:-20}
bench_positive_ints bench/clip_cost.sh "$usage" "$rounds" "$steps"
cd "$(dirname "$0")/.."
launch=$PWD/build/launcher/tencache-launch
bench_executables bench/clip_cost.sh "$launch"
out=$(mktemp -d /tmp/tencache-clipcost.XXXXXX)
trap 'rm -rf "$out"' EXIT
common=(configs/examples/quickstart.yaml --set model.preset=gpt2 --set model.layers=4 --set model.hidden=256
        --set model.heads=4 --set model.ffn_hidden=1024 --set model.seq_len=128 --set model.max_positions=128
        --set model.vocab=256 --set model.dtype=fp32 --set train.global_batch=8 --set train.micro_batch=4
        --set cluster.ranks_per_node=2 --set cache.device_budget=2MiB --set "cache.nvme_path=$out/nvme")
declare -A budget=([host]=auto [nvme]=12MiB)
run() {  # case clip round
  local name="$1-$2-$3"
  "$launch" "${common[@]}" --set "cache.host_budget=${budget[$1]}" --set "train.grad_clip=$2" --steps "$steps" \
    --out "$out/$name" >"$out/$name.log" 2>&1 || { echo "$name failed:" >&2; tail -n 30 "$out/$name.log" >&2; exit 1; }
}
for round in $(seq 1 "$rounds"); do
  for c in host nvme; do
    if (( round % 2 )); then run "$c" 0 "$round"; run "$c" 1.0 "$round"
    else run "$c" 1.0 "$round"; run "$c" 0 "$round"; fi
  done
done
python3 - "$out" "$rounds" "$steps" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
import results_file as rf
out, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
nvme = lambda m: m["bytes_nvme_read"] + m["bytes_nvme_write"]
M = 2**20
def mib(values):  # "42.18" or "57.99-60.25"
    return rf.span([v / M for v in values], "{:.2f}")
rows, notes = [], []
for case, label in (("host", "host memory"), ("nvme", "12 MiB host budget (NVMe)")):
    ratios, added, times, off_b, on_b = [], [], [], [], []
    for r in range(1, rounds + 1):
        off = json.load(open(f"{out}/{case}-0-{r}/report.json"))["measured"]
        on = json.load(open(f"{out}/{case}-1.0-{r}/report.json"))["measured"]
        ratios.append(on["step_time_s"] / off["step_time_s"])
        added.append(nvme(on) - nvme(off))
        times += [off["step_time_s"] * 1e3, on["step_time_s"] * 1e3]
        off_b.append(nvme(off))
        on_b.append(nvme(on))
        print(f"{case} round {r}: no clip {off['step_time_s']*1e3:.1f} ms, clip {on['step_time_s']*1e3:.1f} ms "
              f"(x{ratios[-1]:.3f}); NVMe bytes per step {nvme(off)/M:.2f} -> {nvme(on)/M:.2f} MiB")
    med = statistics.median(ratios)
    print(f"{case}: clip/no-clip step time median {med:.3f} "
          f"(range {min(ratios):.3f} .. {max(ratios):.3f}) over {rounds} rounds; NVMe bytes added per step "
          f"median {statistics.median(added)/M:.2f} MiB (all ranks)")
    if max(off_b + on_b) == 0:
        moved = "0 -> 0"
    else:
        more = statistics.median(added)
        moved = (f"{mib(off_b)} -> {mib(on_b)} MiB (**{'+' if more >= 0 else '-'}{abs(more) / M:.2f} MiB**"
                 + (f", {more / statistics.median(off_b) * 100:+.0f} %)" if statistics.median(off_b) else ")"))
        if len(set(off_b)) == 1 and len(set(on_b)) > 1:
            notes.append(f"{label}: without clipping the NVMe bytes are the same in every round; with it they vary "
                         f"by round ({mib(on_b)} MiB): which stored gradient the cache writes back depends on timing.")
    rows.append([label, rf.span(times, "{:.0f}", " ms"), f"**{(med - 1) * 100:+.1f} %** ({min(ratios):.3f} .. "
                 f"{max(ratios):.3f})", moved])
rf.write(
    "clip_cost",
    commands=[f"bench/clip_cost.sh {rounds} {steps}"],
    rounds=f"{rf.plural(rounds, 'round')} of {steps} steps, clipping and not interleaved round by round (the order alternating); "
           "step times are the reports' medians after warm-up; the ratio is the median over the rounds (range).",
    tables=[{"columns": ["case", "steps", "clip / no clip, median (range)", "NVMe bytes a step, no clip -> clip"],
             "rows": rows}],
    notes=notes,
)
PY
