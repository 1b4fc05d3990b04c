#!/usr/bin/env bash
# Sampled-training benchmark on a synthetic graph of 200k nodes / 2M undirected edges:
#   1. sampling throughput (sampled edges per second of the sample phase's wall time, and per
#      CPU second, which other jobs on the cores do not inflate; fanouts 15,10,5, batch 1024) at
#      P = 1, 2;
#   2. feature bytes fetched per epoch with a cache of 0%, 10% and 30% of the remote candidates;
#   3. the data-centric saving: bytes moved when owners sample and serve their own nodes, against
#      a model-centric run where the trainer pulls every remote frontier node's whole adjacency
#      list and every remote input row itself (both counted on the same batches);
#   4. the single-process sampler microbenchmark (tessel_bench_sampling);
#   5. sampling inside training against that bare sampler (owner_local: what an owner does), run
#      back to back at P = 1 with 1 and CORES threads: the ratio of their rates per wall second
#      and per CPU second (ROUNDS times, default 1).
# Environment (optional): TESSEL, WORK (default build/bench-sampling), NODES, AVG_DEGREE, FEAT,
# CLASSES, EPOCHS (default 2), CORES (2), ROUNDS (1).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

tessel="${TESSEL:-build/src/cli/tessel}"
sampling_bench="$(dirname "$tessel")/../sampling/tessel_bench_sampling"
work="${WORK:-build/bench-sampling}"
nodes="${NODES:-200000}"
avg_degree="${AVG_DEGREE:-20}"
feat="${FEAT:-128}"
classes="${CLASSES:-16}"
epochs="${EPOCHS:-2}"
cores="${CORES:-2}"
rounds="${ROUNDS:-1}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench_require sampling.sh "$tessel" jq
mkdir -p "$work"

data="$work/synthetic-n${nodes}-d${avg_degree}-f${feat}.h5"
bench_synthetic "$tessel" "$data" "$nodes" "$avg_degree" "$classes" "$feat"
for p in 1 2; do
  bench_parts "$tessel" "$data" "$p" "$work/parts$p"
done

run() {  # run P CACHE_RATIO TAG [THREADS]
  local p=$1 ratio=$2 tag=$3 threads
  threads=${4:-$(bench_threads "$1" "$cores")}
  local cache=(--cache-policy none)
  [ "$ratio" != 0 ] && cache=(--cache-policy degree --cache-ratio "$ratio")
  OMP_NUM_THREADS=$threads mpirun --oversubscribe --bind-to none -np "$p" -x OMP_NUM_THREADS \
    "$tessel" train "$work/parts$p" --mode sampled --model sage --layers 3 --fanouts 15,10,5 \
    --batch-size 1024 --hidden 128 --epochs "$epochs" --eval-every 1000 --threads "$threads" \
    --quiet "${cache[@]}" --metrics "$work/$tag.jsonl"
}

summary() {  # summary TAG -> the last epoch's numbers
  jq -s -r '[ .[] | select(.summary | not) ] | last |
    [.epoch_s, .phases.sample, .sampled_edges, .sampled_edges_per_s, .cache_hit_rate,
     .bytes_fetched, .data_centric_bytes, .model_centric_bytes, .sampled_edges_per_cpu_s] | @tsv' \
    "$work/$1.jsonl"
}

echo "== sampling throughput (fanouts 15,10,5, batch 1024 per rank, last of $epochs epochs)"
printf "%-3s %10s %10s %14s %18s %18s\n" P "epoch s" "sample s" "sampled edges" "edges/s (sample)" \
  "edges/CPU-s"
for p in 1 2; do
  run "$p" 0 "p$p-cache0"
  summary "p$p-cache0" | awk -F'\t' -v p="$p" \
    '{printf "%-3s %10.3f %10.3f %14d %18.3e %18.3e\n", p, $1, $2, $3, $4, $9}'
done

echo
echo "== feature bytes fetched per epoch at P = 2 (degree-ranked cache of the halo)"
printf "%-8s %10s %16s %18s %18s %8s\n" cache "hit rate" "MB fetched" "data-centric MB" "model-centric MB" saving
for ratio in 0 0.1 0.3; do
  tag="p2-cache$ratio"
  [ "$ratio" = 0 ] || run 2 "$ratio" "$tag"
  summary "$tag" | awk -F'\t' -v r="$ratio" '{printf "%-8s %10.3f %16.2f %18.2f %18.2f %7.2fx\n", r*100 "%", $5, $6/1e6, $7/1e6, $8/1e6, ($7 > 0 ? $8/$7 : 0)}'
done

if [ -x "$sampling_bench" ]; then
  echo
  echo "== single-process sampler (tessel_bench_sampling)"
  "$sampling_bench" --batches 20
fi

if [ -x "$sampling_bench" ]; then
  echo
  echo "== sampling inside training (P = 1, last of $epochs epochs) against the bare sampler" \
    "(owner_local, 40 batches), back to back"
  printf "%-8s %12s %12s %8s %14s %14s %8s %12s\n" threads "train M/s" "bare M/s" ratio \
    "train M/CPU-s" "bare M/CPU-s" ratio "load avg"
  for round in $(seq 1 "$rounds"); do
    for t in $(printf '%s\n' 1 "$cores" | sort -n -u); do
      load=$(cut -d' ' -f1 /proc/loadavg)
      run 1 0 "p1-t$t" "$t"
      train=$(jq -s -r '[ .[] | select(.summary | not) ] | last |
        [.sampled_edges_per_s, .sampled_edges_per_cpu_s] | @tsv' "$work/p1-t$t.jsonl")
      bare=$("$sampling_bench" --batches 40 --threads "$t" --variants owner_local --json |
        grep '^{' | jq -r 'select(.bench == "sampling") | [.edges_per_s, .edges_per_cpu_s] | @tsv')
      printf '%s\t%s\t%s\n' "$train" "$bare" "$load" | awk -F'\t' -v t="$t" \
        '{printf "%-8s %12.2f %12.2f %7.2fx %14.2f %14.2f %7.2fx %12s\n", t, $1/1e6, $3/1e6, $1/$3,
          $2/1e6, $4/1e6, $2/$4, $5}'
    done
  done
fi
