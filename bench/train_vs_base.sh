#!/usr/bin/env bash
# `tencache-bench train` of this build against another build's, side by side:
# per round and dtype the two builds one after the other (which goes first
# alternates between rounds), every regime of `--regime all`. Writes
# $RESULTS_DIR/train_vs_base.json (default bench/results) from the runs' own
# JSON (kept in a temporary folder, removed at exit) through
# bench/results_file.py; bench/render_benchmarks.py renders it. Run it on a
# quiet machine.
#   [RESULTS_DIR=DIR] [NVME_DIRS="DIR ..."] bench/train_vs_base.sh BASE_BENCH BASE_NAME [ROUNDS] [STEPS]
# BASE_BENCH: tencache-bench built at the base commit (e.g. a git worktree's
# build/bench/tencache-bench); BASE_NAME: how the table names it (its commit).
# NVME_DIRS (environment): space-separated folders for the NVMe tiers' files,
# each run in every round (default: the bench's own, on the disk). A tmpfs
# (/dev/shm/...) takes the disk's drift out of the comparison: what is left is
# the code's.
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] [NVME_DIRS=\"DIR ...\"] bench/train_vs_base.sh BASE_BENCH BASE_NAME [ROUNDS] [STEPS]"
source "$(dirname "$0")/lib.sh"
bench_results_dir
[[ $# -ge 2 && $# -le 4 ]] || { echo "$usage" >&2; exit 2; }
base=$(realpath -m "$1")
base_name=$2
rounds=${3:-3}
steps=${4:-30}
bench_positive_ints bench/train_vs_base.sh "$usage" "$rounds" "$steps"
((steps >= 3)) || { echo "bench/train_vs_base.sh: STEPS $steps: expected >= 3 (two warm-up steps, one timed)" >&2; exit 2; }
cd "$(dirname "$0")/.."
this=build/bench/tencache-bench
bench_executables bench/train_vs_base.sh "$this" "$base"
out=$(mktemp -d /tmp/tencache-train-vs-base.XXXXXX)
trap 'rm -rf "$out"' EXIT
read -r -a dirs <<<"${NVME_DIRS:-/tmp/tencache-train-bench}"
((${#dirs[@]} > 0)) || { echo "bench/train_vs_base.sh: NVME_DIRS: expected one or more folders" >&2; exit 2; }
for round in $(seq 1 "$rounds"); do
  for s in "${!dirs[@]}"; do
    for dtype in bf16 fp32; do
      order=(this base)
      ((round % 2 == 0)) && order=(base this)
      for who in "${order[@]}"; do
        bin=$this
        [[ $who == base ]] && bin=$base
        "$bin" train --regime all --steps "$steps" --threads 1 --dtype "$dtype" --nvme-dir "${dirs[$s]}" --json \
          >"$out/$who-$dtype-$round-$s.json"
        echo "round $round ${dirs[$s]} $dtype $who done" >&2
      done
    done
  done
done
python3 - "$out" "$rounds" "$steps" "$base_name" "${dirs[@]}" <<'PY'
import glob, json, os, statistics, sys
sys.path.insert(0, "bench")
import results_file as rf
out, rounds, steps, base_name, dirs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
ratios = {}  # (NVMe folder, dtype, regime, policy, who) -> {round: ratio}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    who, dtype, rnd, s = os.path.basename(path)[:-5].split("-")
    run = json.load(open(path))
    for reg in run["regimes"]:
        for r in reg["results"]:
            if r["policy"] == "none":
                continue
            ratios.setdefault((dirs[int(s)], dtype, reg["regime"], r["policy"], who), {})[int(rnd)] = r["ratio_to_none"]
def cell(v):
    return f"{statistics.median(v):.3f} ({min(v):.3f} .. {max(v):.3f})"
POLICIES = ["tencache", "no-prefetch", "zero-infinity", "lru"]
rows, within, paired = [], True, []
keys = sorted({k[:4] for k in ratios},
              key=lambda k: (dirs.index(k[0]), k[1], k[2], POLICIES.index(k[3]) if k[3] in POLICIES else 9))
for k in keys:
    b, t = ratios[k + ("base",)], ratios[k + ("this",)]
    per_round = [t[r] / b[r] for r in sorted(b) if r in t]  # the two builds ran back to back in each round
    faster = sum(x < 1 for x in per_round)
    rows.append(list(k) + [cell(list(b.values())), cell(list(t.values())), cell(per_round),
                           f"{faster} of {len(per_round)}"])
    if statistics.median(t.values()) > max(b.values()):
        within = False
    paired.append((statistics.median(per_round), k))
worst = max(paired)
note = ("Every median of this build lies within " + base_name + "'s range or below it."
        if within else "Some median of this build lies above " + base_name + "'s range: see the rows.")
note += (f" The largest median of the paired ratio (this build's x NONE over {base_name}'s in the same round) is "
         f"{worst[0]:.3f}, {' '.join(worst[1])}.")
rf.write(
    "train_vs_base",
    title=f"`tencache-bench train`: this build against {base_name}'s, side by side",
    order=4,
    commands=[f"NVME_DIRS=\"{' '.join(dirs)}\" bench/train_vs_base.sh BASE_BENCH {base_name} {rounds} {steps} "
              f"(BASE_BENCH: tencache-bench built at {base_name} in a git worktree); each run: "
              f"tencache-bench train --regime all --steps {steps} --threads 1 --dtype D --nvme-dir DIR --json"],
    commit=f"{rf.commit()} against build of {base_name}",
    rounds=f"{rounds} rounds a dtype and NVMe folder, the two builds alternating (which went first alternated between rounds); "
           "a cell is the median over rounds (min .. max) of the step-time ratio to the in-memory reference of the same "
           "run; the paired column is, per round, this build's ratio over the base's (the two ran back to back), "
           "which cancels most of the machine's drift between rounds.",
    about=["The one-model-of-a-step restructure must leave the worker's speed unchanged. Each run trains the same "
           "small GPT under every policy side by side (the `tencache-bench train` section's setup); x NONE is its "
           "step time over the in-memory reference's in the same run. With the NVMe tier on a tmpfs (/dev/shm) the "
           "disk's drift between runs is gone, and so is most of the io-bound regime's I/O cost: what is left is the "
           "code's (the cache's copies and checksums, the worker's bookkeeping)."],
    tables=[{"columns": ["NVMe folder", "dtype", "regime", "policy", f"{base_name}: x NONE", "this build: x NONE",
                         f"paired: this / {base_name}", "rounds this build was faster"], "rows": rows}],
    notes=[note],
)
print(note)
PY
