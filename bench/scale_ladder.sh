#!/usr/bin/env bash
# The scale ladder: three Llama-family models in fp32, each run end to end
# through `tencache-launch JOB.yaml` on this machine (cluster.target local,
# every budget auto: the planner decides), on a tokenised Debian corpus
# (bench/debian_corpus.sh):
#   rung 1  ~134M   GPT-2 small's width as a Llama (hidden 768, 12 layers): states fit in memory
#   rung 2  ~1.1B   TinyLlama-1.1B's shape: states about the size of RAM
#   rung 3  ~2.1B   OpenLLaMA-3B's width and heads, the fewest of its 26 layers whose training
#                   states (16 bytes a parameter in fp32) are >= 1.3x MemTotal, read at run time
# Each rung:
#   init    tencache-worker --write-init writes the seeded weights (bf16: half
#           the disk) as a sharded Hugging Face checkpoint (index + shards),
#           and model.init reads them
#   A       the uninterrupted run (its weights exported, and read back by
#           `tencache-worker --evaluate`: the same validation loss, bit for bit;
#           the initial weights evaluated on the same 8 held-out windows: the
#           loss must fall from theirs)
#   B       the same run with train.checkpoint_every, SIGTERM once a
#           checkpoint is complete (it writes one more as it stops); then
#           `--resume B` (no periodic checkpoint: two at once would not fit
#           rung 3's disk): the losses of B and its resumption equal A's, bit
#           for bit
# and bench/scale_ladder_report.py prints the rung's table: parameters, states
# vs RAM, budgets, peak RSS vs host budget, step time measured vs predicted,
# overlap, NVMe bytes read vs placed, the times of each phase, the training loss
# first -> last and the validation loss of the initial weights -> the last
# step's, and the ladder's checks. --rounds N runs the rungs N times over (round
# K's results in WORK/results/roundK/rungR/). --overlap-ab runs, instead of A,
# export, evaluation and B, run A twice side by side, with the optimizer lane
# (train.optimizer_overlap on) and without (off), the order alternating by
# round, and prints their median step times, the training thread's time in
# the optimizer and the ratio (WORK/results/roundK/rungR/overlap.md, copied by
# hand into bench/results/scale_ladder_overlap.json; nothing goes to
# $RESULTS_DIR). Once every round is done,
# scale_ladder_report.py --json writes $RESULTS_DIR/scale_ladder.json (default
# bench/results; docs/benchmarks.md, "Scale ladder") through
# bench/results_file.py: one table a rung that ran, each cell round 1's figures
# and any later round's that moved. A file describes one invocation: a run of
# some rungs writes those rungs' tables only, and a note names them.
#   [RESULTS_DIR=DIR] bench/scale_ladder.sh [--rungs 1,2,3] [--rounds N] [--work DIR] [--steps N] [--build DIR] [--overlap-ab]
# Needs the build (scripts/build.sh), sentencepiece and python3; rung 3's run B
# needs about 80 GB under --work (the NVMe tier's file of 27 GB, two checkpoints
# of 25 GB while a new one is written, the initial weights of 4 GB): the plan
# refuses it before it starts when the disk cannot hold that. Everything large it writes is
# removed at the end of a rung; the results stay in WORK/results/.
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] bench/scale_ladder.sh [--rungs 1,2,3] [--rounds N] [--work DIR] [--steps N] [--build DIR] [--overlap-ab]"
source "$(dirname "$0")/lib.sh"
bench_results_dir
cd "$(dirname "$0")/.."
root=$(pwd)
rungs=1,2,3
rounds=1
work=/tmp/tencache-ladder
steps=8
ckpt_every=3
build=build
overlap_ab=0
while [ $# -gt 0 ]; do
  case $1 in
    --rungs) rungs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --overlap-ab) overlap_ab=1; shift ;;
    *) echo "scale_ladder: unknown argument '$1'; $usage" >&2; exit 2 ;;
  esac
done
bench_positive_ints bench/scale_ladder.sh "$usage" "$rounds" "$steps"
[[ $rungs =~ ^[123](,[123])*$ ]] || { echo "scale_ladder: --rungs '$rungs': expected a list of 1, 2 and 3; $usage" >&2; exit 2; }
launch=$root/$build/launcher/tencache-launch
worker=$root/$build/worker/tencache-worker
bench_executables bench/scale_ladder.sh "$launch" "$worker"
command -v python3 >/dev/null || { echo "scale_ladder: python3 not found" >&2; exit 2; }
mpi=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work/results"
bench/debian_corpus.sh "$work/corpus" 32000

now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }

# rung -> "layers hidden heads kv_heads ffn shard_size ranks lr" (ranks: auto, or
# one where a rank's transient host memory beside its budget would not fit twice)
shape() {
  case $1 in
    1) echo "12 768 12 12 2048 200MB auto 6.0e-4" ;;
    2) echo "22 2048 32 4 5632 2GB auto 2.0e-4" ;;
    3) # OpenLLaMA-3B: 123,910,400 parameters a layer, 204,803,200 in the embedding, head and final norm.
      local mem layers
      mem=$(awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo)
      layers=$(python3 -c "import math,sys; print(max(1, math.ceil((1.3 * float(sys.argv[1]) / 16 - 204803200) / 123910400)))" "$mem")
      echo "$layers 3200 32 32 8640 2GB 1 1.0e-4" ;;
    *) echo "scale_ladder: no rung $1 (1, 2 or 3)" >&2; exit 2 ;;
  esac
}

# The files of a run folder the report reads, and its logs, into the results.
keep_run() {  # run_dir results_dir
  mkdir -p "$2"
  local f
  for f in job.resolved.yaml plan.json plan.txt machine.json metrics.jsonl report.json report.md run.json; do
    [ -f "$1/$f" ] && cp "$1/$f" "$2/"
  done
  cp -r "$1/logs" "$2/" 2>/dev/null || true
}

# Run A with the optimizer lane and without, side by side (--overlap-ab).
overlap_runs() {  # rung round dir res set...
  local r=$1 k=$2 dir=$3 res=$4
  shift 4
  local order=(on off)
  ((k % 2 == 0)) && order=(off on)
  local mode
  for mode in "${order[@]}"; do
    "$launch" "$dir/job.yaml" "$@" --set train.checkpoint_every=0 --set "train.optimizer_overlap=$mode" \
      --out "$dir/A-$mode" --progress-every 60 >"$res/A-$mode.log" 2>&1 || { tail -30 "$res/A-$mode.log"; return 1; }
    cp "$dir/.probe-cache.json" "$work/probe-cache-rung$r.json"
    keep_run "$dir/A-$mode" "$res/A-$mode"
    rm -rf "$dir/A-$mode"
    echo "   A, optimizer_overlap $mode: done ($(date -u +%H:%M:%S))"
  done
  rm -rf "$dir"
  python3 bench/scale_ladder_report.py --overlap "$res" "$r" "${order[*]}" | tee "$res/overlap.md"
}

run_rung() {  # rung round
  local r=$1 dir=$work/rung$1 res=$work/results/round$2/rung$1
  read -r layers hidden heads kv ffn shard rpn lr <<<"$(shape "$r")"
  rm -rf "$dir" "$res"
  mkdir -p "$dir" "$res"
  # This machine's probes for the rung's job (tencache-launch's cache, keyed by
  # host, path, model, dtype, micro-batch and ranks) outlive the rung's folder.
  [ -f "$work/probe-cache-rung$r.json" ] && cp "$work/probe-cache-rung$r.json" "$dir/.probe-cache.json"
  cat >"$dir/job.yaml" <<EOF
# The scale ladder's rung $r (bench/scale_ladder.sh).
name: ladder-rung$r
model:
  layers: $layers
  hidden: $hidden
  heads: $heads
  kv_heads: $kv
  ffn_hidden: $ffn
  seq_len: 128
  vocab: 32000
  mlp: swiglu
  norm: rmsnorm
  position: rotary
  bias: false
  tied_embeddings: false
  norm_eps: 1.0e-5
  dtype: fp32
train:
  data: $work/corpus/corpus.bin
  micro_batch: auto
  global_batch: 2
  steps: $steps
  lr: $lr
  seed: 1
  eval_every: $steps
  eval_sequences: 8
  warmup_steps: 2
  keep_checkpoints: 1
cluster:
  target: local
  nodes: auto
  ranks_per_node: $rpn
  max_nodes: 1
  instance_types: [g5.xlarge, g6e.xlarge, g6.2xlarge, g2-standard-12, p4d.24xlarge, p5.48xlarge]
cache:
  policy: tencache
  device_budget: auto
  host_budget: auto
  nvme_budget: auto
  nvme_path: $work/nvme
EOF
  local job=$dir/job.yaml init=$dir/init times=$res/times.env
  : >"$times"
  echo "== rung $r, round $2: $layers layers, hidden $hidden, heads $heads/$kv, ffn $ffn ($(date -u +%H:%M:%S)); free disk $(df -h --output=avail "$work" | tail -1)"

  local t0
  t0=$(now)
  "${mpi[@]}" -n 1 "$worker" --job "$job" --write-init "$init" --init-dtype bf16 --max-shard-size "$shard" \
    >"$res/init.log" 2>&1 || { cat "$res/init.log"; return 1; }
  echo "init_s=$(since "$t0")" >>"$times"
  ls -l "$init" >"$res/init.ls"
  echo "   init: $(ls "$init" | tr '\n' ' ')"

  local set=(--set "model.init=$init")
  if ((overlap_ab)); then
    overlap_runs "$r" "$2" "$dir" "$res" "${set[@]}"
    return
  fi
  t0=$(now)
  "$launch" "$job" "${set[@]}" --set train.checkpoint_every=0 --out "$dir/A" --progress-every 60 >"$res/A.log" 2>&1 ||
    { tail -30 "$res/A.log"; return 1; }
  echo "a_s=$(since "$t0")" >>"$times"
  cp "$dir/.probe-cache.json" "$work/probe-cache-rung$r.json"
  echo "   A: $(grep -E '^Measured|step time' "$res/A.log" | head -2 | tr '\n' ' ')"

  t0=$(now)
  "$launch" export "$dir/A" --out "$dir/export" --max-shard-size "$shard" >"$res/export.log" 2>&1 ||
    { cat "$res/export.log"; return 1; }
  echo "export_s=$(since "$t0")" >>"$times"
  ls -l "$dir/export" >"$res/export.ls"
  rm -rf "$dir/A/weights"
  local ranks
  ranks=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['local']['ranks'])" "$dir/A/plan.json")
  t0=$(now)
  "${mpi[@]}" -n "$ranks" "$worker" --job "$dir/A/job.resolved.yaml" --set "model.init=$dir/export" --evaluate \
    >"$res/evaluate.log" 2>&1 || { tail -20 "$res/evaluate.log"; return 1; }
  echo "evaluate_s=$(since "$t0")" >>"$times"
  rm -rf "$dir/export"
  # The initial weights' validation loss on the same windows: the loss must fall from it.
  "${mpi[@]}" -n "$ranks" "$worker" --job "$dir/A/job.resolved.yaml" --set "model.init=$init" --evaluate \
    >"$res/evaluate_init.log" 2>&1 || { tail -20 "$res/evaluate_init.log"; return 1; }

  # B: checkpoints every $ckpt_every steps; SIGTERM once the first is complete.
  t0=$(now)
  "$launch" "$job" "${set[@]}" --set train.checkpoint_every=$ckpt_every --out "$dir/B" --progress-every 60 \
    >"$res/B.log" 2>&1 &
  local pid=$! first
  first=$(printf '%s/B/checkpoints/step-%08d' "$dir" "$ckpt_every")
  while [ ! -d "$first" ] && kill -0 "$pid" 2>/dev/null; do sleep 1; done
  [ -d "$first" ] || { wait "$pid" || true; tail -30 "$res/B.log"; return 1; }
  local term
  term=$(now)
  kill -TERM "$pid"
  local code=0
  wait "$pid" || code=$?
  echo "b_s=$(since "$t0")" >>"$times"
  echo "b_stop_s=$(since "$term")" >>"$times"
  echo "b_exit=$code" >>"$times"
  ls -l "$dir/B/checkpoints" >"$res/B.checkpoints.ls"
  echo "   B: exit $code after SIGTERM; checkpoints: $(ls "$dir/B/checkpoints" | tr '\n' ' ')"

  t0=$(now)
  "$launch" "$job" "${set[@]}" --set train.checkpoint_every=0 --resume "$dir/B" --out "$dir/B2" \
    --progress-every 60 >"$res/B2.log" 2>&1 || { tail -30 "$res/B2.log"; return 1; }
  echo "b2_s=$(since "$t0")" >>"$times"

  for run in A B B2; do keep_run "$dir/$run" "$res/$run"; done
  rm -rf "$dir"
  python3 bench/scale_ladder_report.py "$res" "$r" | tee "$res/row.md"
}

IFS=, read -r -a list <<<"$rungs"
round_dirs=()
for k in $(seq 1 "$rounds"); do
  for r in "${list[@]}"; do run_rung "$r" "$k"; done
  round_dirs+=("$work/results/round$k")
done
((overlap_ab)) && exit 0
for d in "${round_dirs[@]}"; do python3 bench/scale_ladder_report.py --table "$d"; done
python3 bench/scale_ladder_report.py --json --rungs "$rungs" "${round_dirs[@]}"
