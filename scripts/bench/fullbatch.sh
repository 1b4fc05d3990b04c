#!/usr/bin/env bash
# Full-batch benchmark: a synthetic graph of 200k nodes, 2M undirected edges and 128 features,
# a 2-layer GCN with hidden 128, at P = 1 and 2 ranks: seconds per epoch (median of the timed
# epochs) and its split (aggregate / dense / communicate), bytes sent per epoch against the
# analytic halo volume, and the SpMM kernel's GB/s against this machine's triad bandwidth.
#
# Environment (optional): TESSEL (binary, default build/src/cli/tessel), WORK (scratch folder,
# default build/bench-fullbatch), NODES (200000), AVG_DEGREE (20 = 2 E / N), FEAT (128),
# CLASSES (16), HIDDEN (128), EPOCHS (12; the first 2 are warm-up), CORES (2).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

tessel="${TESSEL:-build/src/cli/tessel}"
kernels_bench="$(dirname "$tessel")/../kernels/tessel_bench_kernels"
work="${WORK:-build/bench-fullbatch}"
nodes="${NODES:-200000}"
avg_degree="${AVG_DEGREE:-20}"
feat="${FEAT:-128}"
classes="${CLASSES:-16}"
hidden="${HIDDEN:-128}"
epochs="${EPOCHS:-12}"
cores="${CORES:-2}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench_require fullbatch.sh "$tessel" jq
mkdir -p "$work"

data="$work/synthetic-n${nodes}-d${avg_degree}-f${feat}.h5"
bench_synthetic "$tessel" "$data" "$nodes" "$avg_degree" "$classes" "$feat"
"$tessel" info "$data"

echo
printf "%-4s %-8s %10s %10s %10s %12s %10s %14s %14s\n" P threads "s/epoch" aggregate dense communicate eval "sent MB/ep" "halo MB/ep"
for p in 1 2; do
  parts="$work/parts$p"
  bench_parts "$tessel" "$data" "$p" "$parts"
  threads=$(bench_threads "$p" "$cores")
  metrics="$work/full-p$p.jsonl"
  OMP_NUM_THREADS=$threads mpirun --oversubscribe --bind-to none -np "$p" -x OMP_NUM_THREADS \
    "$tessel" train "$parts" --mode full --model gcn --layers 2 --hidden "$hidden" --dropout 0.5 \
    --epochs "$epochs" --threads "$threads" --quiet --metrics "$metrics"
  # Median over the epochs after the first two (warm-up: first-touch allocation, matrix build).
  jq -r -s --argjson f "$feat" --argjson h "$hidden" --argjson c "$classes" --arg p "$p" --arg t "$threads" '
    [ .[] | select(.summary | not) ] | .[2:] as $e |
    def med(f): ($e | map(f) | sort) as $s | $s[($s | length) / 2 | floor];
    # Per epoch every halo row travels for: layer-0 input (F wide, aggregate first), layer-1
    # output (C, transform first) forward and its gradient backward, and again F + C in the
    # evaluation forward pass; 4 bytes a value.
    (med(.halo_rows_sent) * 4 * ($f + $c + $c + $f + $c) / 1e6) as $halo |
    [$p, $t, med(.epoch_s), med(.phases.aggregate // 0), med(.phases.dense // 0),
     med(.phases.communicate // 0), med(.phases.eval // 0), med(.comm_bytes) / 1e6, $halo]
    | @tsv' "$metrics" | awk -F'\t' '{printf "%-4s %-8s %10.4f %10.4f %10.4f %12.4f %10.4f %14.2f %14.2f\n", $1,$2,$3,$4,$5,$6,$7,$8,$9}'
done
echo "(sent MB/ep also carries the gradient all-reduce: about 2 (P-1)/P x parameter bytes)"

if [ -x "$kernels_bench" ]; then
  echo
  echo "== SpMM kernel against the triad bandwidth (same graph size, F = $feat)"
  "$kernels_bench" --nodes "$nodes" --edges $(( nodes * avg_degree / 2 )) --feat "$feat" --threads 1,"$cores" --reps 5
fi
