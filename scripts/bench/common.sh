# Helpers shared by the benchmark scripts (sourced, not run).

# bench_require SCRIPT TESSEL [COMMAND ...]: exits with one line unless the tessel binary was built
# and every COMMAND (a name on PATH or a path) is there.
bench_require() {
  local script=$1 tessel=$2
  shift 2
  [ -x "$tessel" ] || { echo "$script: $tessel not found; build first (scripts/build.sh)" >&2; exit 1; }
  local command
  for command in "$@"; do
    command -v "$command" >/dev/null || { echo "$script: needs $command" >&2; exit 1; }
  done
}

# bench_synthetic TESSEL OUT.h5 NODES AVG_DEGREE CLASSES FEAT: the synthetic store (seed 1), made
# once and reused by later runs.
bench_synthetic() {
  [ -f "$2" ] || "$1" convert synthetic --nodes "$3" --avg-degree "$4" --classes "$5" \
    --feat-dim "$6" --seed 1 "$2"
}

# bench_parts TESSEL DATA.h5 P DIR [FLAG...]: DATA partitioned into P parts at DIR (more
# `partition` flags after DIR), unless DIR holds one.
bench_parts() {
  [ -f "$4/partition.json" ] || "$1" partition "$2" --parts "$3" --out "$4" --force "${@:5}" \
    >/dev/null
}

# bench_threads P CORES: OpenMP threads per rank when P ranks share CORES cores (at least 1).
bench_threads() {
  local threads=$(( $2 / $1 ))
  [ "$threads" -ge 1 ] || threads=1
  echo "$threads"
}
