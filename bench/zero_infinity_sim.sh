#!/usr/bin/env bash
# Zero-infinity as DeepSpeed runs it, in tencache-sim: OPT-6.7B on a 24 GiB
# device with DeepSpeed's defaults (pageable, synchronous copies), pinned
# (--zero-infinity-pin-memory), and with a fixed latency added to every copy;
# OPT-13B with NVMe, defaults and pinned; tencache beside it in every run.
# Deterministic: one simulation each. Writes $RESULTS_DIR/zero_infinity_sim.json
# (default bench/results) from the simulations' --json output (kept in a
# temporary folder, removed at exit) through bench/results_file.py;
# bench/render_benchmarks.py renders it.
#   [RESULTS_DIR=DIR] bench/zero_infinity_sim.sh
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] bench/zero_infinity_sim.sh"
source "$(dirname "$0")/lib.sh"
bench_results_dir
[[ $# -eq 0 ]] || { echo "$usage" >&2; exit 2; }
cd "$(dirname "$0")/.."
sim=build/scheduler/tencache-sim
bench_executables bench/zero_infinity_sim.sh "$sim"
out=$(mktemp -d /tmp/tencache-zi-sim.XXXXXX)
trap 'rm -rf "$out"' EXIT
opt67=(--model opt-6.7b --device-budget 24GiB --host-budget 400GiB --micro-batch 16 --policy "tencache,zero-infinity")
opt13=(--model opt-13b --device-budget 12GiB --host-budget 60GiB --micro-batch 16 --policy "tencache,zero-infinity")
pin=--zero-infinity-pin-memory
run() {  # tag, tencache-sim's flags...
  local tag=$1 extra=()
  shift
  echo "tencache-sim $* --json" >>"$out/commands"
  [[ $tag == defaults ]] && extra=(--write-trace "$out/trace.jsonl")  # to count the step's device accesses
  "$sim" "$@" --json "${extra[@]}" >"$out/$tag.json" || { echo "bench/zero_infinity_sim.sh: tencache-sim $* failed" >&2; exit 1; }
  echo "$tag done" >&2
}
run defaults "${opt67[@]}"
run pinned "${opt67[@]}" "$pin"
run defaults-100 "${opt67[@]}" --copy-latency-us 100
run pinned-100 "${opt67[@]}" "$pin" --copy-latency-us 100
run defaults-500 "${opt67[@]}" --copy-latency-us 500
run nvme "${opt13[@]}"
run nvme-pinned "${opt13[@]}" "$pin"
python3 - "$out" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import results_file as rf
out = sys.argv[1]
def sim(tag):
    return {r["policy"]: r for r in json.load(open(f"{out}/{tag}.json"))["results"]}
def pct(zi, tc):
    d = (zi / tc - 1) * 100
    return f"{d:+.2f} %" if abs(d) < 1 else f"{d:+.1f} %"
runs = [("defaults", "DeepSpeed defaults (pageable, synchronous copies)"), ("pinned", "`--zero-infinity-pin-memory`"),
        ("defaults-100", "defaults, `--copy-latency-us 100`"), ("pinned-100", "pinned, `--copy-latency-us 100`"),
        ("defaults-500", "defaults, `--copy-latency-us 500`")]
rows = []
for tag, label in runs:
    s = sim(tag)
    zi, tc = s["zero-infinity"], s["tencache"]
    rows.append([label, f"{zi['device_hit_rate'] * 100:.2f} %", f"{zi['bytes_h2d'] / 2**30:.1f} GiB",
                 f"{zi['stall_s']:.4f}", f"{zi['step_time_s']:.4f}", pct(zi["step_time_s"], tc["step_time_s"])])
tc = {tag: sim(tag)["tencache"] for tag in ("defaults", "defaults-100", "defaults-500")}
caption = (f"OPT-6.7B, 24 GiB device, micro-batch 16 (tencache: {tc['defaults']['device_hit_rate'] * 100:.0f} % device "
           f"hits, {tc['defaults']['step_time_s']:.4f} s; {tc['defaults-100']['step_time_s']:.4f} s with 100 µs, "
           f"{tc['defaults-500']['step_time_s']:.4f} s with 500 µs):")
n13, n13p = sim("nvme"), sim("nvme-pinned")
t13 = n13["tencache"]["step_time_s"]
nvme_rows = [["tencache", f"{t13:.4f}", f"{n13['tencache']['stall_s']:.4f}", ""]]
for label, r, bold in (("zero-infinity (DeepSpeed defaults)", n13["zero-infinity"], True),
                       ("zero-infinity, `--zero-infinity-pin-memory`", n13p["zero-infinity"], False)):
    x = f"{r['step_time_s'] / t13:.2f}x"
    nvme_rows.append([label, f"{r['step_time_s']:.4f}", f"{r['stall_s']:.4f}", f"**{x}**" if bold else x])
# The 10Cache paper's figures against the defaults run.
d = sim("defaults")
zi, t = d["zero-infinity"], d["tencache"]
accesses = sum(1 for line in open(f"{out}/trace.jsonl")
               if line.strip() and json.loads(line).get("phase") in ("fwd", "bwd"))
per_access_ms = zi["stall_s"] / accesses * 1e3
magnitude = "the paper's order of magnitude" if 0.068 <= per_access_ms <= 6.8 else "not the paper's order of magnitude"
ratio = zi["step_time_s"] / t["step_time_s"]
lanes = (f"{t['lane_busy_s']['compute']:.1f} s of device compute plus {t['lane_busy_s']['optimizer']:.1f} s of host "
         f"Adam a step, all parameter traffic exposed costs about {zi['step_time_s'] - t['step_time_s']:.1f} s")
notes = [
    "Not modelled: the CPU optimizer beyond a rate (every policy gets the same 1e9 parameters/s after the backward); "
    "DeepSpeed's pageable gradient and optimizer copies; the CUDA caching allocator under pressure; Python hook time "
    "per module; NVMe staging through DeepSpeed's swap buffers.",
    "Against the 10Cache paper (DeepSpeed waiting about 0.68 ms a fetch and 2.5x slower than 10Cache on OPT-6.7B): "
    f"the synchronous copies bring the modelled wait to {zi['stall_s']:.2f} s a step, {per_access_ms:.2f} ms per each "
    f"of the {accesses:,} device accesses, {magnitude}; "
    + (f"the 2.5x does not follow from parameter movement in this model ({lanes}), and we do not claim it."
       if ratio < 2.5 else f"this model gives {ratio:.2f}x ({lanes}).")]
rf.write(
    "zero_infinity_sim",
    commands=["bench/zero_infinity_sim.sh; its simulations:"] + open(f"{out}/commands").read().splitlines(),
    machine="simulated (the figures do not depend on the machine that runs the simulator)",
    rounds="one simulation each (deterministic); STEP_S and STALL_S per steady-state step.",
    tables=[{"caption": caption,
             "columns": ["zero-infinity run", "DEV_HIT", "H2D", "STALL_S", "STEP_S", "against tencache"],
             "rows": rows},
            {"caption": "OPT-13B with NVMe (`--device-budget 12GiB --host-budget 60GiB`):",
             "columns": ["policy", "STEP_S", "STALL_S", "against tencache"], "rows": nvme_rows}],
    notes=notes,
)
PY
