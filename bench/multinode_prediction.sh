#!/usr/bin/env bash
# The planner's predicted step time against the measured median for the
# quickstart across network-namespace "nodes" on this machine
# (tests/multinode/netns-nodes.sh: veth links through a bridge, MPI over TCP),
# 2 and 3 nodes of one rank, at the veth's own speed and with every link shaped
# to 1 Gbit/s (tc tbf), beside 2 ranks on this one machine (shared memory).
# Each run probes its hosts again (--reprobe), so the probe's noise is in the
# spread; the configurations rotate from round to round. Needs root; run it on a
# quiet machine. The namespace nodes share this machine's cores, so each node's
# rank computes on its share of them (train.compute_threads: cores / nodes, at
# least 1) rather than on every core it sees. Prints one line per run, then
# writes $RESULTS_DIR/multinode_prediction.json (default bench/results) from the
# runs' report.json through bench/results_file.py; the run folders are in a
# temporary folder, removed at exit.
#   [RESULTS_DIR=DIR] bench/multinode_prediction.sh [ROUNDS] [STEPS]
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] bench/multinode_prediction.sh [ROUNDS] [STEPS]"
source "$(dirname "$0")/lib.sh"
bench_results_dir
[[ $# -le 2 ]] || { echo "$usage" >&2; exit 2; }
rounds=${1:-3}
steps=${2:-30}
bench_positive_ints bench/multinode_prediction.sh "$usage" "$rounds" "$steps"
[[ $(id -u) == 0 ]] || { echo "bench/multinode_prediction.sh: needs root (network namespaces)" >&2; exit 2; }
cd "$(dirname "$0")/.."
launch=$PWD/build/launcher/tencache-launch
bench_executables bench/multinode_prediction.sh "$launch"
nodes_sh=$PWD/tests/multinode/netns-nodes.sh
out=$(mktemp -d /tmp/tencache-multinode.XXXXXX)
job=$PWD/configs/examples/quickstart.yaml
batch=(--set train.global_batch=12)  # divides over 2 and 3 ranks
trap '"$nodes_sh" down "$out/nodes" >/dev/null 2>&1 || true; rm -rf "$out"' EXIT

report() {  # name round folder
  python3 - "$3/report.json" "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m, p = r["measured"], r["predicted"]
probe = r["machine"]["probes"]["compute"]
print(f"{sys.argv[2]:12s} round {sys.argv[3]}  measured {m['step_time_s']*1e3:7.1f} ms  predicted "
      f"{p['step_time_s']*1e3:7.1f} ms  error {r['prediction_error']*100:+6.1f} %  "
      f"probe: all-gather {probe['allgather_gbps']:.3f} GB/s, 4-byte all-gather {probe['collective_latency_s']*1e6:.0f} us")
PY
}
run_hosts() {  # n rate round
  local n=$1 rate=$2 round=$3 name="${1}nodes${2:+-$2}"
  "$nodes_sh" down "$out/nodes" >/dev/null 2>&1 || true
  "$nodes_sh" up "$out/nodes" "$n" $rate
  local hosts="[$(seq -s, -f '192.0.2.%g' 1 "$n")]" threads=$(( $(nproc) / n ))
  [ "$threads" -ge 1 ] || threads=1
  nsenter -t "$(cat "$out/nodes/192.0.2.1.pid")" -n -u -- "$launch" "$job" "${batch[@]}" --reprobe --steps "$steps" \
    --set cluster.target=hosts --set "cluster.hosts=$hosts" --set "cluster.rsh_agent=$out/nodes/rsh" \
    --set cluster.network_interface=eth0 --set train.compute_threads=$threads --out "$out/$name-$round" >"$out/$name-$round.log" 2>&1 ||
    { echo "$name round $round failed:" >&2; tail -n 30 "$out/$name-$round.log" >&2; exit 1; }
  report "$name" "$round" "$out/$name-$round"
}
run_local() {  # round
  "$launch" "$job" "${batch[@]}" --reprobe --steps "$steps" --set cluster.ranks_per_node=2 --out "$out/local2-$1" \
    >"$out/local2-$1.log" 2>&1 || { echo "local2 round $1 failed:" >&2; tail -n 30 "$out/local2-$1.log" >&2; exit 1; }
  report local-2ranks "$1" "$out/local2-$1"
}
configs=("2 " "3 " "2 1gbit" "3 1gbit" "local")
for round in $(seq 1 "$rounds"); do
  for k in $(seq 0 $((${#configs[@]} - 1))); do
    c=${configs[$(( (k + round) % ${#configs[@]} ))]}
    if [ "$c" = local ]; then run_local "$round"; else run_hosts ${c% *} "${c#* }" "$round"; fi
  done
done | tee "$out/summary.txt"
python3 - "$out" "$rounds" "$steps" "$(nproc)" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
import results_file as rf
out, rounds, steps, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
configs = [("local2", "2 ranks, one machine"), ("2nodes", "2 nodes x 1 rank"), ("2nodes-1gbit", "2 nodes, 1 Gbit/s links"),
           ("3nodes", "3 nodes x 1 rank"), ("3nodes-1gbit", "3 nodes, 1 Gbit/s links")]
reports = {c: [json.load(open(f"{out}/{c}-{r}/report.json")) for r in range(1, rounds + 1)] for c, _ in configs}
med = lambda c, f: statistics.median(f(r) for r in reports[c])
rows = []
for c, label in configs:
    e = [r["prediction_error"] * 100 for r in reports[c]]
    m, p = med(c, lambda r: r["measured"]["step_time_s"] * 1e3), med(c, lambda r: r["predicted"]["step_time_s"] * 1e3)
    rows.append([label, f"{m:.1f} ms", f"{p:.1f} ms", f"{statistics.median(e):+.1f} % ({min(e):+.1f} .. {max(e):+.1f})"])
    print(f"{c}: measured median {m:.1f} ms, predicted median {p:.1f} ms, error median {statistics.median(e):+.1f} % "
          f"(range {min(e):+.1f} .. {max(e):+.1f}) over {rounds} rounds")
ns = [r["machine"]["probes"]["compute"] for c, _ in configs if c != "local2" for r in reports[c]]
lat_ms = [p["collective_latency_s"] * 1e3 for p in ns]
lat = rf.span(lat_ms, "{:.0f}" if min(lat_ms) >= 1 else "{:.2f}", " ms")
bw = rf.span([p["allgather_gbps"] for p in ns], "{:.2f}", " GB/s")
step = lambda c: med(c, lambda r: r["measured"]["step_time_s"])
shaped = [f"{(step(f'{n}nodes-1gbit') / step(f'{n}nodes') - 1) * 100:+.0f} % ({n} nodes)" for n in (2, 3)]
threads = sorted({max(1, cores // n) for n in (2, 3)})
micro = [str(reports[c][0]["run"]["micro_batch"]) for c in ("2nodes", "3nodes")]
rf.write(
    "multinode_prediction",
    commands=[f"bench/multinode_prediction.sh {rounds} {steps}"],
    rounds=f"{rf.plural(rounds, 'round')}, the five configurations rotating between rounds; step times are medians of steps >= 2 "
           f"of {steps}; the error is the median over the rounds (range).",
    about=["The quickstart (`global_batch` 12 so that it divides over 2 and 3 ranks, `micro_batch` auto: "
           f"{' and '.join(micro)}) with `cluster.target: hosts` over 2 and 3 network-namespace \"nodes\" of one rank "
           "(tests/multinode/netns-nodes.sh: veth links through a bridge, MPI over TCP), at the veth's own speed and "
           "with every link shaped to 1 Gbit/s (`tc tbf`), beside 2 ranks on one machine (shared memory). Each "
           "namespace node's rank computes on its share of the cores (`train.compute_threads`: "
           f"{' and '.join(map(str, threads))}). Each run probes its hosts again (`--reprobe`)."],
    tables=[{"columns": ["configuration", "measured step (median)", "predicted (median)",
                         f"prediction error (median, range over {rf.plural(rounds, 'round')})"], "rows": rows}],
    notes=[f"These \"nodes\" share the machine's {cores} cores and its kernel: their {lat} latency (the probe's 4-byte "
           f"all-gather) and {bw} all-gather bandwidth are the scheduler's, not a network's; shaping the links to "
           f"1 Gbit/s changes the measured step by {' and '.join(shaped)}. A real cluster's figures differ; the probe "
           "measures whichever it runs on.",
           "The probe takes each collective's bandwidth from the time beyond its latency (t = latency + bytes / "
           "bandwidth), reduce-scatters at the probe's reduce-scatter bandwidth; the local candidate charges the "
           "collectives at the share of the probe's times that the in-memory reference step leaves them "
           "(docs/resource-model.md)."],
)
PY
