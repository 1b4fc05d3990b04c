#!/usr/bin/env bash
# Pipeline benchmark: a 16-layer, 1024-wide SIGN MLP (K = 2) on the precomputed features of the
# 200k-node synthetic graph. Samples per second and bubble fraction for S in {1, 2, 4} stages x
# schedule (gpipe, 1f1b, wave) x m in {4, 16} micro-batches, against pure data parallelism on
# the same number of ranks; the analytic bubble (S-1)/(m+S-1) (wave: its bound (S-1)/(2m+S-1)
# and the simulated figure of Tessel's wave order) next to each measured figure; a plot of
# bubble fraction against micro-batches per schedule (scripts/plot_pipeline.py).
#
# Two bubble figures are measured: "wall" is idle time over time inside the schedule, summed
# over ranks, from wall clocks; "replay" replays the schedule with the compute seconds each
# action actually took (messages free). With more ranks than cores (S = 4 on a 2-core machine)
# ranks wait for a core as well as for each other, which inflates "wall"; "replay" is what the
# schedule itself costs with the measured stage times.
#
# Environment (optional): TESSEL (binary, default build/src/cli/tessel), WORK (scratch folder,
# default build/bench-pipeline), NODES (200000), AVG_DEGREE (20), FEAT (128), CLASSES (16),
# HIDDEN (1024), LAYERS (16), BATCH (512 rows per optimizer step), BATCHES (2 mini-batches per
# epoch), EPOCHS (2; the last is reported), CORES (2), STAGES ("1 2 4"), MICRO ("4 16").
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

tessel="${TESSEL:-build/src/cli/tessel}"
work="${WORK:-build/bench-pipeline}"
nodes="${NODES:-200000}"
avg_degree="${AVG_DEGREE:-20}"
feat="${FEAT:-128}"
classes="${CLASSES:-16}"
hidden="${HIDDEN:-1024}"
layers="${LAYERS:-16}"
batch="${BATCH:-512}"
batches="${BATCHES:-2}"
epochs="${EPOCHS:-2}"
cores="${CORES:-2}"
stages_list="${STAGES:-1 2 4}"
micro_list="${MICRO:-4 16}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench_require pipeline.sh "$tessel" jq
mkdir -p "$work"

data="$work/synthetic-n${nodes}-d${avg_degree}-f${feat}.h5"
bench_synthetic "$tessel" "$data" "$nodes" "$avg_degree" "$classes" "$feat"

results="$work/results.tsv"
printf "ranks\tD\tS\tschedule\tm\tsamples_per_s\tbubble_wall\tbubble_replay\tbubble_analytic\tbubble_schedule\tstage_MB\n" >"$results"

# run RANKS D S SCHEDULE M: one training run; appends a row to the results.
run() {
  local ranks=$1 d=$2 s=$3 schedule=$4 m=$5
  local parts="$work/parts$ranks" threads metrics
  threads=$(bench_threads "$ranks" "$cores")
  metrics="$work/pipe-p$ranks-d$d-s$s-$schedule-m$m.jsonl"
  OMP_NUM_THREADS=$threads mpirun --oversubscribe --bind-to none -np "$ranks" -x OMP_NUM_THREADS \
    "$tessel" train "$parts" --mode pipeline --hops 2 --mlp-layers "$layers" --hidden "$hidden" \
    --dropout 0 --lr 0.001 --batch-size "$batch" --max-batches "$batches" --epochs "$epochs" \
    --eval-every 1000000 --stages "$s" --data-parallel "$d" --schedule "$schedule" --micro-batches "$m" \
    --threads "$threads" --quiet --metrics "$metrics"
  jq -r -s --arg r "$ranks" '[ .[] | select(.summary | not) ] | last |
    [$r, .data_parallel, .stages, .schedule, .micro_batches, .samples_per_s, .bubble,
     .bubble_replay, .bubble_analytic, .bubble_schedule, .stage_bytes / 1e6] | @tsv' \
    "$metrics" >>"$results"
}

for ranks in $(echo "$stages_list" | tr ' ' '\n' | sort -n -u); do
  bench_parts "$tessel" "$data" "$ranks" "$work/parts$ranks"
  # Precompute once per partition; later runs read the files.
  OMP_NUM_THREADS=$(bench_threads "$ranks" "$cores") mpirun --oversubscribe --bind-to none \
    -np "$ranks" -x OMP_NUM_THREADS "$tessel" precompute "$work/parts$ranks" --hops 2
done
for s in $stages_list; do
  if [ "$s" -eq 1 ]; then
    run 1 1 1 1f1b 4
    continue
  fi
  [ "$s" -gt "$cores" ] && echo "S = $s: $s ranks on $cores cores (oversubscribed)"
  for schedule in gpipe 1f1b wave; do
    for m in $micro_list; do run "$s" 1 "$s" "$schedule" "$m"; done
  done
  run "$s" "$s" 1 1f1b 4  # pure data parallelism on the same ranks
done

echo
printf "%-5s %-3s %-3s %-6s %-4s %12s %11s %13s %14s %14s %10s\n" ranks D S sched m "samples/s" \
  "bubble wall" "bubble replay" "analytic" "schedule sim" "stage MB"
tail -n +2 "$results" | awk -F'\t' '{printf "%-5s %-3s %-3s %-6s %-4s %12.1f %11.3f %13.3f %14.3f %14.3f %10.1f\n", $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11}'
plotted=0
for python in python3 /usr/bin/python3; do
  if command -v "$python" >/dev/null && "$python" -c "import matplotlib" 2>/dev/null; then
    "$python" scripts/plot_pipeline.py "$results" "$work/bubble_vs_micro_batches.png"
    plotted=1
    break
  fi
done
[ "$plotted" -eq 1 ] || echo "(matplotlib missing: no plot)"

