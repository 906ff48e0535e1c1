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
# least 1) rather than on every core it sees. Prints one line per run, then the
# median and range per configuration.
#   bench/multinode_prediction.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-30}
launch=$PWD/build/launcher/tencache-launch
nodes_sh=$PWD/tests/multinode/netns-nodes.sh
out=$(mktemp -d /tmp/tencache-multinode.XXXXXX)
job=$PWD/configs/examples/quickstart.yaml
batch=(--set train.global_batch=12)  # divides over 2 and 3 ranks
trap '"$nodes_sh" down "$out/nodes" >/dev/null 2>&1 || true' EXIT

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
    { echo "$name round $round failed: see $out/$name-$round.log"; exit 1; }
  report "$name" "$round" "$out/$name-$round"
}
run_local() {  # round
  "$launch" "$job" "${batch[@]}" --reprobe --steps "$steps" --set cluster.ranks_per_node=2 --out "$out/local2-$1" \
    >"$out/local2-$1.log" 2>&1 || { echo "local2 round $1 failed: see $out/local2-$1.log"; exit 1; }
  report local-2ranks "$1" "$out/local2-$1"
}
configs=("2 " "3 " "2 1gbit" "3 1gbit" "local")
for round in $(seq 1 "$rounds"); do
  for k in $(seq 0 $((${#configs[@]} - 1))); do
    c=${configs[$(( (k + round) % ${#configs[@]} ))]}
    if [ "$c" = local ]; then run_local "$round"; else run_hosts ${c% *} "${c#* }" "$round"; fi
  done
done | tee "$out/summary.txt"
python3 - "$out/summary.txt" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name = line.split()[0]
    m = re.search(r"measured\s+([\d.]+) ms\s+predicted\s+([\d.]+) ms\s+error\s+([+-][\d.]+)", line)
    rows.setdefault(name, []).append((float(m.group(1)), float(m.group(2)), float(m.group(3))))
for name, v in rows.items():
    e = [x[2] for x in v]
    print(f"{name}: measured median {statistics.median(x[0] for x in v):.1f} ms, predicted median "
          f"{statistics.median(x[1] for x in v):.1f} ms, error median {statistics.median(e):+.1f} % "
          f"(range {min(e):+.1f} .. {max(e):+.1f}) over {len(v)} rounds")
PY
echo "Run folders: $out"
