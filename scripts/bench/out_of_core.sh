#!/usr/bin/env bash
# Out-of-core features (--feature-memory) against features held in memory: sampled SAGE on a
# synthetic graph, one rank. Prints seeds per second, the reader's hit rate, bytes read per step,
# read seconds and peak RSS for --feature-memory all and for a budget of a quarter of the
# features (the I/O path, the page-cache drop and the recency tier varied one at a time). "train
# MiB" is the peak RSS before the last epoch's evaluation, "peak MiB" the whole run's (evaluation
# reads the feature rows in blocks, but holds every node's layer outputs). Runs
# alternate (A B A B); the out-of-core runs go inside a memory cgroup (cgroup v2, as root) capped
# at the in-memory run's peak less three quarters of the features, and the script says when it
# cannot make one. The papers100M-shape run in a memory cgroup, with DGL in memory and GraphBolt
# on disk beside it on the same graph, is scripts/bench/papers100m_cgroup.sh.
#
# Environment (all optional):
#   TESSEL      the tessel binary                   (default: build/src/cli/tessel)
#   WORK        folder for the store and parts      (default: build/bench-out-of-core)
#   NODES, AVG_DEGREE, FEAT_DIM, CLASSES             (default 2000000, 10, 128, 16)
#   STEPS       steps per epoch (--max-batches)     (default 100); two epochs, the second timed
#   BATCH       --batch-size                        (default 1024)
#   REPEATS     rounds of the runs                  (default 2)
#   RUNS        which runs, in this order           (default "all quarter hdf5 keepcache static")
#               f16: the quarter budget on a float16 copy of the store (convert --feature-dtype
#               float16, its own parts); the same budget, since the reader holds float32 rows
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

tessel="${TESSEL:-build/src/cli/tessel}"
work="${WORK:-build/bench-out-of-core}"
nodes="${NODES:-2000000}"
avg_degree="${AVG_DEGREE:-10}"
feat_dim="${FEAT_DIM:-128}"
classes="${CLASSES:-16}"
steps="${STEPS:-100}"
batch="${BATCH:-1024}"
repeats="${REPEATS:-2}"
runs=" ${RUNS:-all quarter hdf5 keepcache static} "

bench_require out_of_core.sh "$tessel" jq /usr/bin/time
mkdir -p "$work"
store="$work/synthetic-n${nodes}-d${avg_degree}-f${feat_dim}.h5"
bench_synthetic "$tessel" "$store" "$nodes" "$avg_degree" "$classes" "$feat_dim"
bench_parts "$tessel" "$store" 1 "$work/p1"
if [[ "$runs" == *" f16 "* ]]; then
  store16="$work/synthetic-n${nodes}-d${avg_degree}-f${feat_dim}-float16.h5"
  [ -f "$store16" ] || "$tessel" convert synthetic --nodes "$nodes" --avg-degree "$avg_degree" \
    --classes "$classes" --feat-dim "$feat_dim" --seed 1 --feature-dtype float16 "$store16"
  bench_parts "$tessel" "$store16" 1 "$work/p1-f16"
  echo "disk: store $(stat -c %s "$store") bytes float32, $(stat -c %s "$store16") float16;" \
    "part file $(stat -c %s "$work/p1/part-0.h5") float32, $(stat -c %s "$work/p1-f16/part-0.h5") float16"
fi

feature_bytes=$(( nodes * feat_dim * 4 ))
budget=$(( feature_bytes / 4 ))
echo "graph: $nodes nodes, avg degree $avg_degree, $feat_dim features ($(( feature_bytes >> 20 )) MiB);" \
  "budget $(( budget >> 20 )) MiB (a quarter)"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'); load: $(cut -d' ' -f1-3 /proc/loadavg)"

# A cgroup v2 with memory.max, when this runs as root and one can be made.
cgroup=""
if [ "$(id -u)" = 0 ] && [ -w /sys/fs/cgroup/cgroup.subtree_control ] &&
   grep -q memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  cgroup="/sys/fs/cgroup/tessel-ooc-$$"
  if mkdir "$cgroup" 2>/dev/null && [ -w "$cgroup/memory.max" ]; then
    trap 'rmdir "$cgroup" 2>/dev/null || true' EXIT
  else
    rmdir "$cgroup" 2>/dev/null || true
    cgroup=""
  fi
fi
[ -n "$cgroup" ] || echo "note: no memory cgroup (needs root and a writable cgroup v2); runs are not capped"

# run NAME MEMORY CAP_BYTES [F16] [ENV...]: one training run (F16: on the float16 parts); prints
# its row.
run() {
  local name=$1 memory=$2 cap=$3
  shift 3
  local metrics="$work/$name.jsonl" log="$work/$name.log"
  rm -f "$metrics"
  local parts="$work/p1"
  if [ "${1:-}" = F16 ]; then parts="$work/p1-f16"; shift; fi
  local cmd=(env "$@" "$tessel" train "$parts" --mode sampled --model sage --layers 3
             --hidden 128 --fanouts 10,10,5 --batch-size "$batch" --epochs 2 --eval-every 1000
             --max-batches "$steps" --threads 2 --seed 1 --quiet --feature-memory "$memory"
             --metrics "$metrics")
  if [ -n "$cgroup" ] && [ "$cap" -gt 0 ]; then
    echo "$cap" >"$cgroup/memory.max"
    /usr/bin/time -f "%M" -o "$work/$name.rss" \
      bash -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cgroup" "${cmd[@]}" >"$log" 2>&1 ||
      { tail -3 "$log" >&2; return 0; }
  else
    /usr/bin/time -f "%M" -o "$work/$name.rss" "${cmd[@]}" >"$log" 2>&1 ||
      { tail -3 "$log" >&2; return 0; }
  fi
  local rss
  rss=$(tail -1 "$work/$name.rss")
  # The second epoch (the first warms the caches); its seconds less evaluation's.
  jq -r --arg name "$name" --arg rss "$rss" --argjson batch "$batch" --arg cap "$cap" '
      select(.epoch == 2)
      | (.epoch_s - (.phases.eval // 0)) as $s
      | [$name, ((.steps * $batch) / $s), (.feature_hit_rate // "-"),
         ((.feature_bytes_read_per_step // 0) / 1048576), (.feature_read_s // 0),
         (.peak_rss_before_eval_bytes / 1048576), (($rss | tonumber) / 1024), (if $cap == "0" then "-" else (($cap | tonumber) / 1048576) end)]
      | @tsv' "$metrics" |
    awk -F'\t' '{ hit = ($3 == "-") ? "-" : sprintf("%.3f", $3);
                  cap = ($8 == "-") ? "-" : sprintf("%.0f", $8);
                  printf "%-16s %10.0f %8s %12.2f %8.2f %10.0f %10.0f %8s\n", $1, $2, hit, $4, $5, $6, $7, cap }'
}

printf "%-16s %10s %8s %12s %8s %10s %10s %8s\n" run "seeds/s" hit "MiB read/st" "read s" \
  "train MiB" "peak MiB" "cap MiB"
# want NAME: whether RUNS names it.
want() { [[ "$runs" == *" $1 "* ]]; }
cap=0
for round in $(seq 1 "$repeats"); do
  if want all; then
    run "all-$round" all 0
    if [ "$cap" = 0 ]; then
      peak_kib=$(tail -1 "$work/all-1.rss")
      cap=$(( peak_kib * 1024 - feature_bytes * 3 / 4 ))
    fi
  fi
  if want quarter; then run "quarter-$round" "$budget" "$cap"; fi
  if want hdf5; then run "hdf5-$round" "$budget" "$cap" TESSEL_FEATURE_IO=hdf5; fi
  if want keepcache; then run "keepcache-$round" "$budget" 0 TESSEL_FEATURE_PAGE_CACHE=keep; fi
  if want static; then run "static-$round" "$budget" "$cap" TESSEL_FEATURE_RECENT=0; fi
  if want f16; then run "f16-$round" "$budget" "$cap" F16; fi
done
