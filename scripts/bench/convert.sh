#!/usr/bin/env bash
# Benchmark of `tessel convert ogb` at ogbn-products scale: writes a synthetic OGB raw folder
# (about 2.4M nodes, 60M undirected edges, 100 features, gzip CSV) once, then times the
# conversion on THREADS cores and prints seconds, MB/s of uncompressed CSV text, peak RSS and
# the output size (target: under 60 s on 2 cores, peak RSS under 2x the output file).
#
# Environment (all optional):
#   TESSEL      the tessel binary                     (default: build/src/cli/tessel)
#   WORK        scratch folder for input and output   (default: build/bench-convert)
#   NODES, AVG_DEGREE, FEAT_DIM, CLASSES   graph size (default 2400000, 57, 100, 47; the
#               generator drops repeated pairs, so degree 57 gives about 60M edges)
#   THREADS     cores for the conversion              (default: 2)
#   RUNS        timed conversions                     (default: 1)
#   KEEP=1      keep the converted store
#   TESSEL_INFLATE=zlib   use zlib even when Tessel was built with ISA-L (to compare)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

tessel="${TESSEL:-build/src/cli/tessel}"
work="${WORK:-build/bench-convert}"
nodes="${NODES:-2400000}"
avg_degree="${AVG_DEGREE:-57}"
feat_dim="${FEAT_DIM:-100}"
classes="${CLASSES:-47}"
threads="${THREADS:-2}"
runs="${RUNS:-1}"

bench_require convert.sh "$tessel" jq /usr/bin/time
mkdir -p "$work"
folder="$work/ogb-products-like-n${nodes}-d${avg_degree}-f${feat_dim}"
out="$work/converted.h5"

# The writer makes the folder atomically, so an existing folder is a complete one.
if [ ! -d "$folder" ]; then
  echo "== generating $folder (once; reused by later runs)"
  /usr/bin/time -f "generate: %e s wall, %U s user, peak RSS %M KiB" \
    "$tessel" convert synthetic --nodes "$nodes" --avg-degree "$avg_degree" --classes "$classes" \
    --feat-dim "$feat_dim" --seed 1 --name products-like --ogb "$folder"
fi
du -b "$folder"/raw/* "$folder"/split/*/* | awk '{ printf "  %8.1f MB  %s\n", $1 / 1e6, $2 }'

# Pin to the first THREADS cores when taskset exists, so "2 cores" means 2 cores.
pin=()
if command -v taskset >/dev/null && [ "$(nproc)" -gt "$threads" ]; then
  pin=(taskset -c "0-$((threads - 1))")
fi

echo
echo "== converting on $threads cores: OMP_NUM_THREADS=$threads ${pin[*]} $tessel convert ogb $folder $out"
for run in $(seq 1 "$runs"); do
  rm -f "$out"
  OMP_NUM_THREADS="$threads" /usr/bin/time -f "%e %U %S %M" -o "$work/time.txt" \
    "${pin[@]}" "$tessel" convert ogb "$folder" "$out" --json >"$work/convert.json"
  read -r wall user sys max_rss_kib <"$work/time.txt"
  jq -r --arg wall "$wall" --arg user "$user" --arg sys "$sys" --arg rss "$max_rss_kib" --arg run "$run" '
    ($rss | tonumber * 1024) as $rss_bytes
    | "run \($run): \(.num_nodes) nodes, \(.num_edges) edges, \(.feature_dim) features\n" +
      "  time        \($wall) s wall (\($user) s user, \($sys) s sys); tool says \(.seconds * 100 | round / 100) s\n" +
      "  CSV text    \(.text_bytes / 1e6 | round) MB uncompressed (\(.input_bytes / 1e6 | round) MB gzip) -> \(.text_bytes / 1e6 / ($wall | tonumber) | round) MB/s\n" +
      "  peak RSS    \($rss_bytes / 1e6 | round) MB (tool: \(.peak_rss_bytes / 1e6 | round) MB)\n" +
      "  output      \(.output_bytes / 1e6 | round) MB; peak RSS / output = \($rss_bytes / .output_bytes * 100 | round / 100)\n" +
      "  phases      \(.phases | to_entries | map("\(.key) \(.value * 100 | round / 100) s") | join(", "))\n" +
      "  targets     time < 60 s: \(if ($wall | tonumber) < 60 then "yes" else "NO" end); " +
      "peak RSS < 2x output: \(if $rss_bytes < 2 * .output_bytes then "yes" else "NO" end)"' \
    "$work/convert.json"
done
[ "${KEEP:-0}" = 1 ] || rm -f "$out"
