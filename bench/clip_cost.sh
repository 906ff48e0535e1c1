#!/usr/bin/env bash
# What the deferred-update mode costs (train.grad_clip, and fp16's overflow
# check): the same job with and without train.grad_clip, interleaved round by
# round, once with every state in host memory and once with a host budget that
# sends part of the states (and, clipping, the stored gradients) to NVMe.
# Prints each round's step times (medians after warm-up, from report.json),
# the ratio, and the NVMe bytes per step each moved. Run it on a quiet machine.
#   bench/clip_cost.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-20}
launch=$PWD/build/launcher/tencache-launch
out=$(mktemp -d /tmp/tencache-clipcost.XXXXXX)
common=(configs/examples/quickstart.yaml --set model.preset=gpt2 --set model.layers=4 --set model.hidden=256
        --set model.heads=4 --set model.ffn_hidden=1024 --set model.seq_len=128 --set model.max_positions=128
        --set model.vocab=256 --set model.dtype=fp32 --set train.global_batch=8 --set train.micro_batch=4
        --set cluster.ranks_per_node=2 --set cache.device_budget=2MiB --set "cache.nvme_path=$out/nvme")
declare -A budget=([host]=auto [nvme]=12MiB)
run() {  # case clip round
  local name="$1-$2-$3"
  "$launch" "${common[@]}" --set "cache.host_budget=${budget[$1]}" --set "train.grad_clip=$2" --steps "$steps" \
    --out "$out/$name" >"$out/$name.log" 2>&1 || { echo "$name failed: see $out/$name.log"; exit 1; }
}
for round in $(seq 1 "$rounds"); do
  for c in host nvme; do
    if (( round % 2 )); then run "$c" 0 "$round"; run "$c" 1.0 "$round"
    else run "$c" 1.0 "$round"; run "$c" 0 "$round"; fi
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for case in ("host", "nvme"):
    ratios, added = [], []
    for r in range(1, rounds + 1):
        off = json.load(open(f"{out}/{case}-0-{r}/report.json"))["measured"]
        on = json.load(open(f"{out}/{case}-1.0-{r}/report.json"))["measured"]
        ratios.append(on["step_time_s"] / off["step_time_s"])
        nvme = lambda m: m["bytes_nvme_read"] + m["bytes_nvme_write"]
        added.append(nvme(on) - nvme(off))
        print(f"{case} round {r}: no clip {off['step_time_s']*1e3:.1f} ms, clip {on['step_time_s']*1e3:.1f} ms "
              f"(x{ratios[-1]:.3f}); NVMe bytes per step {nvme(off)/2**20:.2f} -> {nvme(on)/2**20:.2f} MiB")
    print(f"{case}: clip/no-clip step time median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f} .. {max(ratios):.3f}) over {rounds} rounds; NVMe bytes added per step "
          f"median {statistics.median(added)/2**20:.2f} MiB (all ranks)")
PY
echo "Run folders: $out"
