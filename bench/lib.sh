# Shared by the benchmark scripts; source it first:
#   source "$(dirname "$0")/lib.sh"
# bench_results_dir: makes RESULTS_DIR (where a script writes its results file;
# unset: bench/results) absolute before the script changes directory, and exports it.
bench_results_dir() {
  if [[ -n ${RESULTS_DIR:-} ]]; then
    RESULTS_DIR=$(realpath -m "$RESULTS_DIR")
    export RESULTS_DIR
  fi
}
# bench_positive_ints SCRIPT USAGE N...: exits 2, naming the value and SCRIPT,
# unless every N is a positive integer.
bench_positive_ints() {
  local script=$1 usage=$2 n
  shift 2
  for n in "$@"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "$script: '$n': expected a positive integer; $usage" >&2; exit 2; }
  done
}
# bench_executables SCRIPT PATH...: exits 2, naming the path and SCRIPT, unless
# every PATH is an executable (a program of the build).
bench_executables() {
  local script=$1 path
  shift
  for path in "$@"; do
    [[ -x $path ]] || { echo "$script: $path: not an executable (build it first: scripts/build.sh)" >&2; exit 2; }
  done
}
