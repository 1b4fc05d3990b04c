#!/usr/bin/env bash
# Benchmark of `tessel partition` on a products-scale synthetic graph (about 2.4M nodes, 60M
# undirected edges, 100 features) into 4 and 8 parts: wall time per phase and peak RSS, with
# peak RSS relative to the bytes of the symmetrized CSR (int64) plus the features.
#
# Environment (all optional):
#   TESSEL      the tessel binary             (default: build/src/cli/tessel)
#   WORK        folder for the store and parts (default: build/bench-partition)
#   NODES, AVG_DEGREE, FEAT_DIM, CLASSES       graph size (default 2400000, 57, 100, 47: the
#               generator drops repeated pairs, so this gives about 60M undirected edges)
#   PARTS       part counts                    (default: "4 8")
#   METHOD      metis or random                (default: metis)
#   METIS_MAX_EDGES  --metis-max-edges         (default: tessel's; 200000000 runs METIS alone)
#   KEEP=1      keep the part folders
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

tessel="${TESSEL:-build/src/cli/tessel}"
work="${WORK:-build/bench-partition}"
nodes="${NODES:-2400000}"
avg_degree="${AVG_DEGREE:-57}"
feat_dim="${FEAT_DIM:-100}"
classes="${CLASSES:-47}"
parts="${PARTS:-4 8}"
method="${METHOD:-metis}"

bench_require partition.sh "$tessel" jq /usr/bin/time
mkdir -p "$work"
store="$work/synthetic-n${nodes}-d${avg_degree}-f${feat_dim}.h5"

if [ ! -f "$store" ]; then
  echo "== generating $store"
  /usr/bin/time -f "convert: %e s wall, peak RSS %M KiB" \
    "$tessel" convert synthetic --nodes "$nodes" --avg-degree "$avg_degree" --classes "$classes" \
    --feat-dim "$feat_dim" --seed 1 --name "synthetic-products" "$store"
fi
"$tessel" info "$store" || true

echo
printf "%-6s %-7s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %8s %8s %9s %7s\n" \
  parts method read symmetrize coarsen "$method" refine build features write total "non-part" \
  "cut %" repl "peakRSS" "xbase"
for k in $parts; do
  out="$work/parts-$method-$k"
  log="$work/partition-$method-$k.log"
  /usr/bin/time -f "%e %M" -o "$work/time-$k.txt" \
    "$tessel" partition "$store" --parts "$k" --method "$method" --out "$out" --force \
    ${METIS_MAX_EDGES:+--metis-max-edges "$METIS_MAX_EDGES"} \
    >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  json="$out/partition.json"
  jq -r --arg k "$k" --arg m "$method" '
    .timings_s as $t
    | (($t.coarsen // 0) + ($t[$m] // 0) + ($t.refine // 0)) as $part
    | ((.num_nodes + 1) * 8 + .num_edges * 8 + .num_nodes * .feature_dim * 4) as $base
    | [$k, $m,
       ($t.read // 0), ($t.symmetrize // 0), ($t.coarsen // 0), ($t[$m] // 0), ($t.refine // 0),
       ($t.build // 0), ($t.features // 0),
       ($t.write // 0), ($t.total // 0), (($t.total // 0) - $part),
       (.edge_cut.fraction * 100), .replication_factor,
       (.peak_rss_bytes / 1048576), (.peak_rss_bytes / $base)]
    | "\(.[0])\t\(.[1])\t\(.[2:] | map(. * 100 | round / 100) | join("\t"))"' "$json" |
    awk -F'\t' '{ printf "%-6s %-7s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %8.2f %8.3f %8.0fM %7.2f\n",
                  $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16 }'
  read -r wall rss_kib <"$work/time-$k.txt"
  echo "       balance (max/mean) $(jq -r '.balance | "nodes \(.nodes * 1000 | round / 1000), train \(.train * 1000 | round / 1000), edges \(.edges * 1000 | round / 1000)"' "$json"); $(jq -r 'if .metis.coarse_levels then "coarse levels \(.metis.coarse_levels | map("\(.nodes)/\(.edges)") | join(" -> ")) (nodes/edges)" else "METIS on the whole graph" end' "$json")"
  echo "       process: ${wall} s wall, peak RSS $((rss_kib / 1024)) MiB (/usr/bin/time); source checksum $(jq -r '.timings_s.checksum // 0 | . * 100 | round / 100' "$json") s on a second thread"
  echo "       peak RSS when each phase ended (MiB): $(jq -r '.peak_rss_after_bytes as $p | ["read", "symmetrize", "metis", "random", "build", "features"] | map(select($p[.] != null) | "\(.) \($p[.] / 1048576 | round)") | join(", ")' "$json")"
  /usr/bin/time -f "%e %M" -o "$work/check-$k.txt" "$tessel" partition --check "$out" >"$work/check-$method-$k.log" 2>&1 ||
    { cat "$work/check-$method-$k.log" >&2; exit 1; }
  read -r wall rss_kib <"$work/check-$k.txt"
  echo "       --check: ${wall} s wall, peak RSS $((rss_kib / 1024)) MiB: $(cat "$work/check-$method-$k.log")"
  [ "${KEEP:-0}" = 1 ] || rm -rf "$out"
done
echo
echo "times in seconds; non-part = total - (coarsen + $method + refine); xbase = peak RSS / bytes(int64 CSR of the"
echo "symmetrized graph + f32 features). Logs: $work/partition-$method-*.log"
