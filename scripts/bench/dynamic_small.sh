#!/usr/bin/env bash
# Dynamic mode's default recipe on short series against two baselines. Synthetic series of
# PedalMe London's size (15 nodes, 35 steps) and Chickenpox Hungary's (20 nodes, 522 weeks) are
# made by temporal_baselines.py (one per seed), converted as the usual recipe does
# (`convert temporal --lags 4 --standardize`, default split: train, validation from the end of
# the training span, test the last 20%), partitioned into 2 parts and trained with the defaults
# (gcn-gru, hidden 32, lr 0.01; the dynamic node-regression defaults choose weight decay, epochs
# and early stopping). Prints per shape and seed the test MSE at the best validation epoch, that
# epoch, the epochs run, and the baselines on the same split: each node's mean and a pooled
# linear autoregression on the same lags (both fitted on training + validation snapshots).
#
# Environment (optional): TESSEL (binary, default build/src/cli/tessel), WORK (scratch folder,
# default build/bench-dynamic-small), SEEDS ("1 2 3"), RANKS (2), FLAGS (extra train flags).
set -euo pipefail
cd "$(dirname "$0")/../.."

tessel="${TESSEL:-build/src/cli/tessel}"
work="${WORK:-build/bench-dynamic-small}"
seeds="${SEEDS:-1 2 3}"
ranks="${RANKS:-2}"
flags="${FLAGS:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
for tool in "$tessel" jq mpirun python3; do
  command -v "$tool" >/dev/null || { echo "dynamic_small.sh: $tool not found" >&2; exit 2; }
done
mkdir -p "$work"
baselines=scripts/bench/temporal_baselines.py

printf '%-10s %4s %9s %6s %6s %9s %9s %8s %8s\n' shape seed test_mse best epochs node_mean linear_ar vs_mean vs_ar
for shape in pedalme chickenpox; do
  sum=0 sum_mean=0 sum_ar=0
  for seed in $seeds; do
    json="$work/$shape-$seed.json" store="$work/$shape-$seed.h5" parts="$work/$shape-$seed-p$ranks"
    python3 "$baselines" make "$shape" "$json" --seed "$seed"
    "$tessel" convert temporal "$json" "$store" --lags 4 --standardize >/dev/null
    rm -rf "$parts"
    "$tessel" partition "$store" --parts "$ranks" --out "$parts" >/dev/null 2>&1
    # shellcheck disable=SC2086
    mpirun -np "$ranks" "$tessel" train "$parts" --mode dynamic --model gcn-gru --hidden 32 \
      --lr 0.01 --seed "$seed" --quiet --metrics "$work/$shape-$seed.jsonl" $flags \
      >/dev/null 2>"$work/$shape-$seed.log"
    summary=$(tail -n 1 "$work/$shape-$seed.jsonl")
    base=$(python3 "$baselines" score "$json" --lags 4 --standardize)
    mse=$(jq -r .test_mse <<<"$summary")
    mean=$(jq -r .node_mean_mse <<<"$base")
    ar=$(jq -r .linear_ar_mse <<<"$base")
    printf '%-10s %4s %9.4f %6s %6s %9.4f %9.4f %8.3f %8.3f\n' "$shape" "$seed" "$mse" \
      "$(jq -r .best_epoch <<<"$summary")" "$(jq -r .epochs <<<"$summary")" "$mean" "$ar" \
      "$(jq -n "$mse / $mean")" "$(jq -n "$mse / $ar")"
    sum=$(jq -n "$sum + $mse") sum_mean=$(jq -n "$sum_mean + $mean") sum_ar=$(jq -n "$sum_ar + $ar")
  done
  n=$(wc -w <<<"$seeds")
  printf '%-10s %4s %9.4f %6s %6s %9.4f %9.4f %8.3f %8.3f\n' "$shape" mean "$(jq -n "$sum / $n")" - - \
    "$(jq -n "$sum_mean / $n")" "$(jq -n "$sum_ar / $n")" "$(jq -n "$sum / $sum_mean")" \
    "$(jq -n "$sum / $sum_ar")"
done
