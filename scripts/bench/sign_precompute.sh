#!/usr/bin/env bash
# SIGN precompute (`tessel precompute --hops K`) with every row in memory against a budget of a
# quarter of the features (`--feature-memory`): X read from the part file in row blocks, the hops
# through scratch files. Prints each run's seconds and peak RSS, alternating (A B A B), and checks
# that both write the same /feat bits (the files' recorded CRC-32s).
#
# Environment (all optional):
#   TESSEL      the tessel binary                   (default: build/src/cli/tessel)
#   WORK        folder for the store, parts, output (default: build/bench-sign-precompute)
#   NODES, AVG_DEGREE, FEAT_DIM, CLASSES             (default 1000000, 10, 128, 16)
#   HOPS        --hops                              (default 2)
#   REPEATS     rounds of the two runs              (default 2)
#   PREPARE_ONLY=1  make the store and the partition, then stop (run it outside the timing lock)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

tessel="${TESSEL:-build/src/cli/tessel}"
work="${WORK:-build/bench-sign-precompute}"
nodes="${NODES:-1000000}"
avg_degree="${AVG_DEGREE:-10}"
feat_dim="${FEAT_DIM:-128}"
classes="${CLASSES:-16}"
hops="${HOPS:-2}"
repeats="${REPEATS:-2}"

bench_require sign_precompute.sh "$tessel" /usr/bin/time h5dump
mkdir -p "$work"
store="$work/synthetic-n${nodes}-d${avg_degree}-f${feat_dim}.h5"
bench_synthetic "$tessel" "$store" "$nodes" "$avg_degree" "$classes" "$feat_dim"
bench_parts "$tessel" "$store" 1 "$work/p1"
[ "${PREPARE_ONLY:-0}" = 1 ] && exit 0

feature_bytes=$(( nodes * feat_dim * 4 ))
budget=$(( feature_bytes / 4 ))
echo "graph: $nodes nodes, avg degree $avg_degree, $feat_dim features ($(( feature_bytes >> 20 )) MiB);" \
  "--hops $hops; budget $budget bytes ($(( budget >> 20 )) MiB, a quarter)"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'); load: $(cut -d' ' -f1-3 /proc/loadavg)"

run() {  # run NAME MEMORY
  local out="$work/sign-$1" log="$work/$1.time"
  rm -rf "$out"
  /usr/bin/time -v "$tessel" precompute "$work/p1" --hops "$hops" --feature-memory "$2" \
    --out "$out" >"$work/$1.log" 2>"$log"
  local seconds rss crc
  seconds=$(sed -n 's/^\s*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$log" |
            awk -F: '{ s = 0; for (i = 1; i <= NF; ++i) s = s * 60 + $i; print s }')
  rss=$(sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$log")
  crc=$(h5dump -a /feat/crc32 "$out/sign-0.h5" | sed -n 's/.*"\(crc32:[0-9a-f]*\)".*/\1/p')
  printf "%-8s %-12s %8.1f s  peak %6d MiB  /feat %s  load %s\n" "$1" "$2" "$seconds" \
    $(( rss / 1024 )) "$crc" "$(cut -d' ' -f1 /proc/loadavg)"
}

for _ in $(seq "$repeats"); do
  run all all
  run quarter "$budget"
done
