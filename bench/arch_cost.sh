#!/usr/bin/env bash
# Does an architecture cost more than its FLOPs say? A reduced Llama (RMSNorm,
# SwiGLU, rotary, untied head) and a reduced GPT-2 of about the same parameter
# count, trained by tencache-launch on this machine with the same budgets, the
# two interleaved round by round. Prints each round's step times (medians after
# warm-up, from report.json), the ratio of step times, and the ratio of the
# training FLOPs the resource model counts for one sequence (plan --json's
# model.train_flops_per_sequence). Run it on a quiet machine.
#   bench/arch_cost.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-20}
launch=$PWD/build/launcher/tencache-launch
out=$(mktemp -d /tmp/tencache-archcost.XXXXXX)
common=(--set model.layers=4 --set model.hidden=256 --set model.heads=4 --set model.seq_len=128
        --set model.vocab=256 --set model.dtype=fp32 --set train.data=/usr/share/common-licenses/GPL-3
        --set train.global_batch=8 --set train.micro_batch=4 --set train.tokens_per_epoch=100000
        --set cluster.ranks_per_node=2 --set cache.device_budget=2MiB --set cache.host_budget=24MiB
        --set "cache.nvme_path=$out/nvme")
gpt2=(configs/examples/quickstart.yaml --set model.preset=gpt2 --set model.ffn_hidden=1024 --set model.max_positions=128)
llama=(configs/examples/llama-2-7b.yaml --set model.kv_heads=4 --set model.ffn_hidden=683)
run() {  # name round args...
  local name=$1 round=$2
  shift 2
  "$launch" "$@" "${common[@]}" --steps "$steps" --out "$out/$name-$round" >"$out/$name-$round.log" 2>&1 ||
    { echo "$name round $round failed: see $out/$name-$round.log"; exit 1; }
}
flops() { "$launch" plan "$@" "${common[@]}" --json 2>/dev/null | python3 -c \
  'import json,sys; j=json.load(sys.stdin)["model"]; print(j["train_flops_per_sequence"], j["params"])'; }
read -r f_gpt2 p_gpt2 < <(flops "${gpt2[@]}")
read -r f_llama p_llama < <(flops "${llama[@]}")
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then run gpt2 "$round" "${gpt2[@]}"; run llama "$round" "${llama[@]}"
  else run llama "$round" "${llama[@]}"; run gpt2 "$round" "${gpt2[@]}"; fi
done
python3 - "$out" "$rounds" "$f_gpt2" "$f_llama" "$p_gpt2" "$p_llama" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
f_gpt2, f_llama, p_gpt2, p_llama = map(float, sys.argv[3:7])
ratios = []
for r in range(1, rounds + 1):
    g = json.load(open(f"{out}/gpt2-{r}/report.json"))["measured"]["step_time_s"]
    l = json.load(open(f"{out}/llama-{r}/report.json"))["measured"]["step_time_s"]
    ratios.append(l / g)
    print(f"round {r}: gpt2 {g*1e3:.1f} ms, llama {l*1e3:.1f} ms, llama/gpt2 {l/g:.3f}")
flop_ratio = f_llama / f_gpt2
med = statistics.median(ratios)
print(f"parameters: gpt2 {p_gpt2:.0f}, llama {p_llama:.0f}; FLOPs per sequence: gpt2 {f_gpt2:.3e}, llama {f_llama:.3e}")
print(f"step-time ratio llama/gpt2: median {med:.3f} (range {min(ratios):.3f} .. {max(ratios):.3f}) over {rounds} rounds; "
      f"FLOPs ratio {flop_ratio:.3f}; step-time ratio / FLOPs ratio {med / flop_ratio:.3f}")
PY
echo "Run folders: $out"
