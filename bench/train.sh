#!/usr/bin/env bash
# `tencache-bench train`: offloaded training against in-memory training, with
# the optimizer lane (train.optimizer_overlap on) and without it (the -serial
# variants). Each round runs `--regime all` (compute-bound and io-bound) once
# per dtype (bf16, fp32), then the NVMe-scale regime (GPT-2 124M). Writes
# $RESULTS_DIR/train.json (default bench/results) from the runs' own --json
# output (kept in a temporary folder, removed at exit) through
# bench/results_file.py; bench/render_benchmarks.py renders it. Run it on a
# quiet machine.
#   [RESULTS_DIR=DIR] [DTYPES="bf16 fp32"] [NVME_DTYPE=bf16] bench/train.sh [ROUNDS] [STEPS] [NVME_STEPS]
# DTYPES: the dtypes of `--regime all`; NVME_DTYPE: the NVMe-scale regime's (on
# a CPU without AVX512-BF16, bf16 is emulated and many times slower).
# ROUNDS (default 2), STEPS (--steps of `--regime all`, default 30),
# NVME_STEPS (--steps of `--regime nvme`, default 10; fewer for a smoke run).
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] [DTYPES=\"bf16 fp32\"] [NVME_DTYPE=bf16] bench/train.sh [ROUNDS] [STEPS] [NVME_STEPS]"
source "$(dirname "$0")/lib.sh"
bench_results_dir
[[ $# -le 3 ]] || { echo "$usage" >&2; exit 2; }
rounds=${1:-2}
steps=${2:-30}
nvme_steps=${3:-10}
dtypes=${DTYPES:-bf16 fp32}
nvme_dtype=${NVME_DTYPE:-bf16}
for d in $dtypes $nvme_dtype; do
  [[ $d == bf16 || $d == fp32 ]] || { echo "bench/train.sh: dtype '$d': expected bf16 or fp32; $usage" >&2; exit 2; }
done
bench_positive_ints bench/train.sh "$usage" "$rounds" "$steps" "$nvme_steps"
((steps >= 3 && nvme_steps >= 3)) || { echo "bench/train.sh: steps: expected >= 3 (two warm-up steps, one timed)" >&2; exit 2; }
cd "$(dirname "$0")/.."
bench=build/bench/tencache-bench
bench_executables bench/train.sh "$bench"
out=$(mktemp -d /tmp/tencache-train.XXXXXX)
trap 'rm -rf "$out"' EXIT
for round in $(seq 1 "$rounds"); do
  for dtype in $dtypes; do
    "$bench" train --regime all --steps "$steps" --threads 1 --dtype "$dtype" --json >"$out/all-$dtype-$round.json"
    echo "round $round $dtype done" >&2
  done
  "$bench" train --regime nvme --steps "$nvme_steps" --threads 1 --dtype "$nvme_dtype" --json >"$out/nvme-$nvme_dtype-$round.json"
  echo "round $round nvme done" >&2
done
python3 - "$out" "$rounds" "$steps" "$nvme_steps" "$dtypes" "$nvme_dtype" <<'PY'
import glob, json, os, re, sys
sys.path.insert(0, "bench")
import results_file as rf
out, rounds, steps, nvme_steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
dtypes, nvme_dtype = sys.argv[5].split(), sys.argv[6]
OTHERS = ["no-prefetch", "zero-infinity", "lru"]
regimes = []  # (kind, dtype, round, regime object, {policy: result})
for path in glob.glob(os.path.join(out, "*.json")):
    kind, dtype, rnd = os.path.basename(path)[:-5].split("-")
    for reg in json.load(open(path))["regimes"]:
        regimes.append((kind, dtype, int(rnd), reg, {r["policy"]: r for r in reg["results"]}))
def size(s):  # "4MiB" -> "4 MiB", "24.0 MiB" -> "24 MiB"
    return re.sub(r"^(\d+(?:\.\d*[1-9])?)(?:\.0)?\s*", r"\1 ", s)
def lane(r, name, scale=1e3):
    return r["lane_busy_s"][name] * scale
def x(p, name):
    return f"{p[name]['ratio_to_none']:.2f}x" if name in p else ""
def serial(p):  # tencache x none, both updating on the training thread
    return f"{p['tencache-serial']['step_time_s'] / p['none-serial']['step_time_s']:.2f}x"
def wait(p, scale=1e3):  # the training thread's time in the optimizer, lane / serial
    return f"{p['tencache']['optimizer_wait_s'] * scale:.1f} / {p['tencache-serial']['optimizer_wait_s'] * scale:.1f}"
rows = []
order = {"compute-bound": 0, "io-bound": 1}
for kind, dtype, rnd, reg, p in sorted((g for g in regimes if g[0] == "all"),
                                       key=lambda g: (g[1], order.get(g[3]["regime"], 9), g[2])):
    n, t, np_ = p["none"], p["tencache"], p["no-prefetch"]
    rows.append([str(rnd), reg["regime"], dtype, size(reg["device_budget"]), f"{n['step_time_s']:.3f} s",
                 f"**{x(p, 'tencache')}**", serial(p), f"{p['tencache-serial']['step_time_s'] / t['step_time_s']:.2f}x",
                 wait(p) + " ms", " / ".join(x(p, o) for o in OTHERS), f"{t['stall_s']:.4f} s",
                 f"{t['bytes_moved_per_step'] / 2**20:.2f} MiB ({np_['bytes_moved_per_step'] / 2**20:.2f})",
                 f"{t['overlap_efficiency']:.3f} ({p['tencache-serial']['overlap_efficiency']:.3f}; "
                 f"{n['overlap_efficiency']:.3f})",
                 f"{lane(t, 'compute'):.1f} / {lane(n, 'compute'):.1f} ms",
                 f"{lane(t, 'optimizer'):.1f} / {lane(n, 'optimizer'):.1f} ms"])
nvme_rows, notes = [], []
for kind, dtype, rnd, reg, p in sorted((g for g in regimes if g[0] == "nvme"), key=lambda g: g[2]):
    n, t, np_, zi = p["none"], p["tencache"], p["no-prefetch"], p["zero-infinity"]
    G = 2**30
    ts = p["tencache-serial"]
    nvme_rows.append([str(rnd), f"{n['step_time_s']:.3f} s", f"**{x(p, 'tencache')}**", serial(p),
                      f"{ts['step_time_s'] / t['step_time_s']:.2f}x", wait(p, 1) + " s",
                      " / ".join(x(p, o) for o in OTHERS), f"**{zi['step_time_s'] / t['step_time_s']:.2f}x**",
                      f"{t['stall_s']:.3f} s ({zi['stall_s']:.3f} s)",
                      f"{t['bytes_moved_per_step'] / G:.2f} GiB ({np_['bytes_moved_per_step'] / G:.2f}; "
                      f"{zi['bytes_moved_per_step'] / G:.2f})",
                      f"{t['nvme_read_per_step'] / G:.2f} / {t['nvme_write_per_step'] / G:.2f} GiB",
                      f"**{t['overlap_efficiency']:.3f}** ({ts['overlap_efficiency']:.3f}; {n['overlap_efficiency']:.3f})",
                      f"{lane(t, 'compute', 1):.3f} / {lane(n, 'compute', 1):.3f} s"])
    def fewer(other):
        d = (other["bytes_moved_per_step"] - t["bytes_moved_per_step"]) / G
        return f"{abs(d):.2f} GiB {'less' if d >= 0 else 'more'}"
    if rnd != rounds:
        continue  # the last round's bytes and lanes in the note
    notes.append(f"NVMe-scale, round {rnd}: tencache reads {t['nvme_read_per_step'] / G:.2f} GiB and writes "
                 f"{t['nvme_write_per_step'] / G:.2f} GiB of NVMe a step (the optimizer state that lives there) and "
                 f"moves {fewer(np_)} a step than no-prefetch and {fewer(zi)} than zero-infinity; its NVMe lanes are "
                 f"busy {lane(t, 'nvme_read', 1):.2f} s (read) and {lane(t, 'nvme_write', 1):.2f} s (write) of its "
                 f"{t['step_time_s']:.2f} s step, with CRC32C of every byte moved.")
    nvme = reg
budget = {g[1]: size(g[3]["device_budget"]) for g in regimes if g[0] == "all"}
host = next(size(g[3]["host_budget"]) for g in regimes if g[0] == "all")
notes.append("On a GPU, device copies are DMA and do not take the cores, so the overlap here is a lower bound; "
             "not measured on a GPU.")
about = rf.existing("train")["about"][:1] + [
    "compute-bound: a GPT of 4 layers x 256 (3.3 M parameters), micro-batch 8, sequence 128; io-bound: the same "
    f"model, micro-batch 1, sequence 32. The device budget holds two layer blocks ({budget.get('bf16', '?')} in bf16, "
    f"{budget.get('fp32', '?')} in fp32), the host budget is {host}, so optimizer states and some parameters live on "
    f"NVMe (`/tmp`). NVMe-scale: GPT-2 124M (`{nvme['model']}`, micro-batch {nvme['micro_batch']}, {nvme_dtype}), device "
    f"{size(nvme['device_budget'])}, host {size(nvme['host_budget'])} (the least the worker accepts). The simulated device's "
    "copies are memcpys competing with compute for the cores. Overlap is the busiest lane's busy time over the step "
    "time (docs/worker.md, \"Lanes\"); lanes are mean busy seconds a step. Every variant but the -serial ones "
    "runs its updates on the optimizer lane (`train.optimizer_overlap: on`); serial is tencache-serial over "
    "none-serial, both updating on the training thread as before the lane; optimizer wait is the training thread's "
    "time in the optimizer a step (issuing and retiring updates / running them), tencache / tencache-serial."]
cmd = "build/bench/tencache-bench train"
rf.write(
    "train",
    commands=[f"DTYPES=\"{' '.join(dtypes)}\" NVME_DTYPE={nvme_dtype} bench/train.sh {rounds} {steps} {nvme_steps}",
              "# each round:"] +
             [f"{cmd} --regime all --steps {steps} --threads 1 --dtype {d} --json" for d in dtypes] +
             [f"{cmd} --regime nvme --steps {nvme_steps} --threads 1 --dtype {nvme_dtype} --json"],
    rounds=f"{rf.plural(rounds, 'round')}, each `--regime all` a dtype ({steps} steps each) and the NVMe-scale "
           f"regime ({nvme_steps} steps). A ratio is the median step (steps 2 onwards) over the in-memory "
           "reference's median step in the same process; every variant steps in turn in one process.",
    about=about,
    tables=[{"caption": "Compute-bound and io-bound regimes (lanes tencache / none):",
             "columns": ["round", "regime", "dtype", "device", "none", "tencache x none", "serial",
                         "tencache-serial / tencache", "optimizer wait",
                         "no-prefetch / zero-infinity / lru", "stall", "moved (no-prefetch)",
                         "overlap (tencache-serial's; none's)",
                         "compute lane", "optimizer lane"], "rows": rows},
            {"caption": "NVMe-scale regime:",
             "columns": ["round", "none", "tencache x none", "serial", "tencache-serial / tencache",
                         "optimizer wait", "no-prefetch / zero-infinity / lru",
                         "zero-infinity / tencache", "stall (zero-infinity's)",
                         "moved a step (no-prefetch; zero-infinity)", "NVMe read / write",
                         "overlap (tencache-serial's; none's)",
                         "compute lane tencache / none"], "rows": nvme_rows}],
    notes=notes,
)
PY
