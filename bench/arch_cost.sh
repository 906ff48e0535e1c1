#!/usr/bin/env bash
# Does an architecture cost more than its FLOPs say? A reduced Llama (RMSNorm,
# SwiGLU, rotary, untied head) and a reduced GPT-2 of about the same parameter
# count, trained by tencache-launch on this machine with the same budgets, the
# two interleaved round by round. Prints each round's step times (medians after
# warm-up, from report.json), the ratio of step times, and the ratio of the
# training FLOPs the resource model counts for one sequence (plan --json's
# model.train_flops_per_sequence). Writes $RESULTS_DIR/arch_cost.json (default
# bench/results) from the reports through bench/results_file.py; the run
# folders are in a temporary folder, removed at exit. Run it on a quiet machine.
#   [RESULTS_DIR=DIR] bench/arch_cost.sh [ROUNDS] [STEPS]
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] bench/arch_cost.sh [ROUNDS] [STEPS]"
source "$(dirname "$0")/lib.sh"
bench_results_dir
[[ $# -le 2 ]] || { echo "$usage" >&2; exit 2; }
rounds=${1:-3}
steps=${2:-20}
bench_positive_ints bench/arch_cost.sh "$usage" "$rounds" "$steps"
cd "$(dirname "$0")/.."
launch=$PWD/build/launcher/tencache-launch
bench_executables bench/arch_cost.sh "$launch"
out=$(mktemp -d /tmp/tencache-archcost.XXXXXX)
trap 'rm -rf "$out"' EXIT
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
    { echo "$name round $round failed:" >&2; tail -n 30 "$out/$name-$round.log" >&2; exit 1; }
}
flops() { "$launch" plan "$@" "${common[@]}" --json 2>/dev/null | python3 -c \
  'import json,sys; j=json.load(sys.stdin)["model"]; print(j["train_flops_per_sequence"], j["params"])'; }
read -r f_gpt2 p_gpt2 < <(flops "${gpt2[@]}")
read -r f_llama p_llama < <(flops "${llama[@]}")
[[ -n $f_gpt2 && -n $f_llama ]] || { echo "bench/arch_cost.sh: tencache-launch plan --json gave no FLOPs" >&2; exit 1; }
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then run gpt2 "$round" "${gpt2[@]}"; run llama "$round" "${llama[@]}"
  else run llama "$round" "${llama[@]}"; run gpt2 "$round" "${gpt2[@]}"; fi
done
python3 - "$out" "$rounds" "$steps" "$f_gpt2" "$f_llama" "$p_gpt2" "$p_llama" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
import results_file as rf
out, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
f_gpt2, f_llama, p_gpt2, p_llama = map(float, sys.argv[4:8])
ratios, rows = [], []
for r in range(1, rounds + 1):
    g = json.load(open(f"{out}/gpt2-{r}/report.json"))["measured"]["step_time_s"]
    l = json.load(open(f"{out}/llama-{r}/report.json"))["measured"]["step_time_s"]
    ratios.append(l / g)
    rows.append([str(r), f"{g*1e3:.1f} ms", f"{l*1e3:.1f} ms", f"{l/g:.3f}"])
    print(f"round {r}: gpt2 {g*1e3:.1f} ms, llama {l*1e3:.1f} ms, llama/gpt2 {l/g:.3f}")
flop_ratio = f_llama / f_gpt2
med = statistics.median(ratios)
rows.append(["median", "", "", f"**{med:.3f}** ({min(ratios):.3f} .. {max(ratios):.3f})"])
print(f"parameters: gpt2 {p_gpt2:.0f}, llama {p_llama:.0f}; FLOPs per sequence: gpt2 {f_gpt2:.3e}, llama {f_llama:.3e}")
print(f"step-time ratio llama/gpt2: median {med:.3f} (range {min(ratios):.3f} .. {max(ratios):.3f}) over {rounds} rounds; "
      f"FLOPs ratio {flop_ratio:.3f}; step-time ratio / FLOPs ratio {med / flop_ratio:.3f}")
off = med / flop_ratio - 1
outside = sum(abs(x / flop_ratio - 1) > 0.15 for x in ratios)
note = (f"Llama costs {abs(off) * 100:.1f} % {'less' if off < 0 else 'more'} than its FLOPs say, "
        + ("within the 15 % bound in every round." if not outside else
           f"outside the 15 % bound in {outside} of {rounds} rounds."))
rf.write(
    "arch_cost",
    commands=[f"bench/arch_cost.sh {rounds} {steps}"],
    rounds=f"{rf.plural(rounds, 'round')} of {steps} steps, interleaved (which goes first alternating); step times are the "
           "reports' medians after warm-up.",
    about=["`tencache-launch` on this machine, 2 ranks, fp32, policy tencache with the same budgets (device 2 MiB, "
           "host 24 MiB a rank), 4 layers of width 256, 4 heads, sequence 128, byte vocabulary: GPT-2 (learned "
           f"positions, GELU, tied head, ffn 1024; {p_gpt2:,.0f} parameters) against Llama (RMSNorm, SwiGLU ffn 683, "
           f"rotary, untied head; {p_llama:,.0f} parameters). The resource model counts {f_gpt2 / 1e9:.3f}e9 (GPT-2) "
           f"and {f_llama / 1e9:.3f}e9 (Llama) training FLOPs a sequence, a ratio of {flop_ratio:.3f}; a step-time "
           "ratio near it means the model's FLOPs predict the architecture's cost (bound: within 15 %)."],
    tables=[{"columns": ["round", "GPT-2 step", "Llama step", "Llama / GPT-2"], "rows": rows}],
    notes=[note],
)
PY
