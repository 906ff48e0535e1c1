#!/usr/bin/env bash
# Managed recovery (cluster.max_restarts): what a preemption at a random point
# costs. Each round runs the quickstart uninterrupted, then twice more with
# `--max-restarts 1`, each time hitting one rank (chosen at random) at a random
# moment of a random step (after step 1's metrics, before the last step's):
# once with SIGKILL (no notice: the steps since the last checkpoint are lost)
# and once with SIGTERM (a preemption notice: the ranks finish the step and
# write a checkpoint). From each run.json: the steps lost, the seconds from the
# failure to the restarted run's first step (time to recover), and the whole
# run's wall time less the uninterrupted one's. The random draws come from
# SEED (printed; default: the time). Writes $RESULTS_DIR/recovery.json
# (default bench/results) through bench/results_file.py; the run folders are
# in a temporary folder, removed at exit. Run it on a quiet machine.
#   [RESULTS_DIR=DIR] [SEED=N] bench/recovery.sh [ROUNDS] [STEPS] [CHECKPOINT_EVERY]
set -euo pipefail
usage="usage: [RESULTS_DIR=DIR] [SEED=N] bench/recovery.sh [ROUNDS] [STEPS] [CHECKPOINT_EVERY]"
source "$(dirname "$0")/lib.sh"
bench_results_dir
[[ $# -le 3 ]] || { echo "$usage" >&2; exit 2; }
rounds=${1:-3}
steps=${2:-20}
every=${3:-5}
bench_positive_ints bench/recovery.sh "$usage" "$rounds" "$steps" "$every"
(( steps >= 4 )) || { echo "bench/recovery.sh: STEPS '$steps': expected at least 4; $usage" >&2; exit 2; }
seed=${SEED:-$(date +%s)}
bench_positive_ints bench/recovery.sh "$usage" "$seed"
cd "$(dirname "$0")/.."
launch=$PWD/build/launcher/tencache-launch
bench_executables bench/recovery.sh "$launch"
out=$(mktemp -d /tmp/tencache-recovery.XXXXXX)
trap 'pkill -f "$out/" 2>/dev/null || true; rm -rf "$out"' EXIT
echo "seed $seed"
RANDOM=$seed
common=(configs/examples/quickstart.yaml --steps "$steps" --set "train.checkpoint_every=$every"
        --set "cache.nvme_path=$out/nvme" --progress-every 0)
# The wall time of one launch, in seconds (appended to $out/NAME.wall).
launch_timed() {  # name args...
  local name=$1 t0 t1
  shift
  t0=$(date +%s.%N)
  "$launch" "${common[@]}" "$@" --out "$out/$name" >"$out/$name.log" 2>&1 ||
    { echo "$name failed:" >&2; tail -n 30 "$out/$name.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 -c "print($t1 - $t0)" >"$out/$name.wall"
}
# Hits a random rank of run NAME with SIGNAL at a random moment of step AT.
hit() {  # name signal at
  local name=$1 sig=$2 at=$3 rank pid metrics=$out/$1/metrics.jsonl
  while [[ ! -s $metrics ]] || (( $(wc -l <"$metrics") < at )); do
    [[ -e $out/$name.wall ]] && { echo "$name ended before step $at" >&2; exit 1; }
    sleep 0.02
  done
  sleep "$(python3 -c "import random; random.seed($RANDOM); print(round(random.uniform(0, 0.1), 3))")"
  rank=$(( RANDOM % 2 ))
  pid=$(awk '$1 == "TENCACHE_PID" {print $2; exit}' "$out/$name/logs/rank-$rank.out")
  echo "$name: $sig to rank $rank (PID $pid) once step $at began"
  echo "$sig $rank $at" >"$out/$name.hit"
  kill "-$sig" "$pid"
}
launch_timed warm-up  # measures this machine once: the probe cache serves the timed launches
for round in $(seq 1 "$rounds"); do
  launch_timed "whole-$round"
  for sig in KILL TERM; do
    at=$(( 2 + RANDOM % (steps - 3) ))  # a step in [2, steps - 2]: one ran before it, one is left after
    name="$sig-$round"
    launch_timed "$name" --max-restarts 1 --set cluster.restart_backoff_s=0 &
    hit "$name" "$sig" "$at"
    wait $! || exit 1
  done
done
python3 - "$out" "$rounds" "$steps" "$every" "$seed" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
import results_file as rf
out, rounds, steps, every, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
wall = lambda name: float(open(f"{out}/{name}.wall").read())
rows, summary = [], {}
for sig, label in (("KILL", "SIGKILL (no notice)"), ("TERM", "SIGTERM (notice: checkpoint on stop)")):
    lost, recover, slower = [], [], []
    for r in range(1, rounds + 1):
        name = f"{sig}-{r}"
        run = json.load(open(f"{out}/{name}/run.json"))
        if run["status"] != "finished" or len(run["attempts"]) != 2:
            sys.exit(f"{name}: expected one restart and a finished run, got {run['status']} after "
                     f"{len(run['attempts'])} attempt(s)")
        first = run["attempts"][0]
        _, rank, at = open(f"{out}/{name}.hit").read().split()
        lost.append(first["steps_lost"])
        recover.append(first["recover_seconds"])
        slower.append(wall(name) - wall(f"whole-{r}"))
        print(f"{label} round {r}: rank {rank} hit once step {at} began; it stopped after {first['steps_done']} step(s), "
              f"resumed at {first['resumed_at_step']}: {first['steps_lost']} step(s) lost "
              f"({first['lost_step_seconds']:.2f} s of steps), recovered in {first['recover_seconds']:.2f} s; "
              f"run {wall(name):.1f} s vs {wall(f'whole-{r}'):.1f} s uninterrupted")
    rows.append([label, rf.span(lost, "{:.0f}"), f"**{statistics.median(recover):.2f} s** "
                 f"({min(recover):.2f}-{max(recover):.2f})", f"{statistics.median(slower):+.1f} s "
                 f"({min(slower):+.1f} .. {max(slower):+.1f})"])
    print(f"{label}: steps lost {min(lost)}-{max(lost)}, time to recover median {statistics.median(recover):.2f} s")
rf.write(
    "recovery",
    title="Managed recovery: a preemption at a random point",
    order=15,
    about=["`tencache-launch` on this machine with the quickstart as it ships (2 ranks on this machine, fp32, policy tencache) "
           f"and `train.checkpoint_every: {every}`, `--max-restarts 1`, `cluster.restart_backoff_s: 0`: one rank, "
           "chosen at random, gets SIGKILL or SIGTERM at a random moment of a random step. Steps lost: the steps "
           "the failed attempt reported past the checkpoint the restart resumed from (run again; the step in flight "
           "is not counted). Time to recover: from the failed attempt's end (every rank gone) to the restarted "
           "attempt's first step (mpirun, the ranks' start, the checkpoint's read, the step). Run time added: the "
           "whole launch (planning and report included) less the uninterrupted launch's in the same round; a warm-up "
           "launch first fills the probe cache. The signal lands a moment after its step begins: its step is a "
           "lower bound of where the ranks stopped."],
    commands=[f"SEED={seed} bench/recovery.sh {rounds} {steps} {every}"],
    rounds=f"{rf.plural(rounds, 'round')}, each an uninterrupted run and one of each signal; a cell is the median "
           "over the rounds (range).",
    tables=[{"columns": ["preemption", "steps lost", "time to recover, median (range)",
                         "run time added, median (range)"], "rows": rows}],
)
PY
