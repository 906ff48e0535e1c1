#!/usr/bin/env bash
# `tencache-bench cache`: a synthetic training trace through the device, host
# and NVMe tiers (its defaults: 24 layers, device 40 MiB, host 120 MiB, 5
# steps). Writes $RESULTS_DIR/cache.json (default bench/results) from the
# run's own --json output (kept in a temporary folder, removed at exit) through
# bench/results_file.py; bench/render_benchmarks.py renders it.
#   [RESULTS_DIR=DIR] bench/cache.sh [STEPS]
# STEPS: --steps (step 0 the warm-up; at least 2); left out, the bench's default.
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] bench/cache.sh [STEPS]"
source "$(dirname "$0")/lib.sh"
bench_results_dir
[[ $# -le 1 ]] || { echo "$usage" >&2; exit 2; }
args=(cache)
if [[ $# -eq 1 ]]; then
  [[ $1 =~ ^[0-9]+$ && $1 -ge 2 ]] || { echo "bench/cache.sh: STEPS '$1': expected an integer >= 2; $usage" >&2; exit 2; }
  args+=(--steps "$1")
fi
args+=(--json)
cd "$(dirname "$0")/.."
bench=build/bench/tencache-bench
bench_executables bench/cache.sh "$bench"
out=$(mktemp -d /tmp/tencache-cache.XXXXXX)
trap 'rm -rf "$out"' EXIT
"$bench" "${args[@]}" >"$out/cache.json" ||
  { echo "bench/cache.sh: tencache-bench ${args[*]} failed" >&2; head -c 2000 "$out/cache.json" >&2; exit 1; }
python3 - "$out/cache.json" "tencache-bench ${args[*]}" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import results_file as rf
run, command = json.load(open(sys.argv[1])), sys.argv[2]
last = run["steps"][-1]
steps = len(run["steps"])
rows = [
    ["allocations after warm-up", f"**{run['allocations_after_warmup']}**", "0"],
    ["host utilisation at peak (used / reserved)", f"**{run['host_utilization']:.3f}**", ">= 0.9"],
    ["allocations during warm-up", str(run["allocations_during_warmup"]), "—"],
    ["device hit rate, last step", f"{run['device_hit_rate_last_step']:.3f}", "—"],
    ["stall seconds, last step", f"{run['stall_seconds_last_step']:.3f}", "—"],
    ["bytes nvme->host / host->nvme, last step",
     f"{last['bytes_nvme_to_host'] / 1e6:.0f} MB / {last['bytes_host_to_nvme'] / 1e6:.0f} MB", "—"],
    ["corrupt bytes seen", str(run["corrupt_bytes_seen"]), "0"],
]
about = [
    "A synthetic training trace through all three tiers: 24 layers x (one 4 MiB, two 1 MiB and two 12,388-byte "
    "weights, each with a gradient of the same size) plus an 8 MiB embedding and its gradient — "
    f"{run['tensors']} tensors, {run['tensor_bytes'] / 2**20:.0f} MiB. Each step does a forward pass (weights read on "
    "the device), a backward pass (weights read, gradients written on the device) and a CPU-optimizer pass "
    f"(gradients read, weights written on the host) — {run['accesses_per_step']} acquires — with a prefetch 8 "
    "accesses ahead and a next-use oracle built from the trace. Device budget 40 MiB (simulated device: host memory, "
    "reported as `device(simulated-host)`), host budget 120 MiB (pinned with mlock), the rest on NVMe (io_uring, "
    "checksums on). Every read is checked against the last value written (one byte per 4 KiB page)."]
rf.write(
    "cache",
    commands=[command],
    rounds=f"one run of {steps} steps; step 0 is the warm-up; host utilisation is the peak over the steps after it, "
           "the rest are the last step's figures.",
    about=about,
    tables=[{"columns": ["metric", "value", "target"], "rows": rows}],
    notes=["A warm-up allocation is a pool slot grown while every slot of its class was held by tensors in flight "
           "(before the prefetch window settles); the pools are not to grow after warm-up (the first row). Per-step "
           "metrics (`CacheMetrics::ToJson()`, as the worker writes them) are under `\"steps\"` in the JSON."],
)
PY
