#!/usr/bin/env bash
# Dynamic-mode benchmark: a synthetic temporal graph (evolving planted partition) with
# SNAPSHOTS snapshots, gcn-gru at P = 1, 2, 4 for both partitionings: seconds per epoch (median
# of the epochs after the first, evaluation excluded) and its split (graph phase, transposition
# or halo exchange, recurrent phase), bytes sent per epoch against the analytic volume (the
# all-to-all transposition for the snapshot layout, the per-snapshot halo rows for the vertex
# layout), and the store's size with differences only against with full snapshots too. The
# snapshot layout's rows are followed by the blocks the trainer chose. Each phase is the slowest
# rank's, in wall seconds and in process CPU seconds ("cpu" columns, metrics `phases_cpu`): on a
# machine shared with other jobs the wall seconds follow their load, the graph and recurrent
# CPU seconds much less (those of the transposition or halo exchange include MPI's busy polling
# while a rank waits for its peers). "faults/ep" is the training pass's minor page faults on the
# slowest rank (metrics `minor_faults`): host blocks taken fresh from the system, not reused.
#
# The issue's size is 200k nodes x 32 snapshots (average degree 10, 32 features); the default
# here is 50k nodes (NODES=200000 for the full size) so that the whole script runs in a few
# minutes on a 2-core machine; everything else is as specified.
#
# Environment (optional): TESSEL (binary, default build/src/cli/tessel), WORK (scratch folder,
# default build/bench-dynamic), NODES (50000), SNAPSHOTS (32), AVG_DEGREE (10), FEAT (32),
# HIDDEN (32), EPOCHS (4), CORES (2), RANKS ("1 2 4").
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

tessel="${TESSEL:-build/src/cli/tessel}"
work="${WORK:-build/bench-dynamic}"
nodes="${NODES:-50000}"
snapshots="${SNAPSHOTS:-32}"
avg_degree="${AVG_DEGREE:-10}"
feat="${FEAT:-32}"
hidden="${HIDDEN:-32}"
epochs="${EPOCHS:-4}"
cores="${CORES:-2}"
ranks="${RANKS:-1 2 4}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench_require dynamic.sh "$tessel" jq
mkdir -p "$work"

data="$work/temporal-n${nodes}-t${snapshots}-d${avg_degree}-f${feat}.h5"
full="$work/temporal-n${nodes}-t${snapshots}-d${avg_degree}-f${feat}-full.h5"
gen=(convert synthetic-temporal --nodes "$nodes" --snapshots "$snapshots" --avg-degree "$avg_degree"
     --feat-dim "$feat" --seed 1)
[ -f "$data" ] || "$tessel" "${gen[@]}" "$data"
[ -f "$full" ] || "$tessel" "${gen[@]}" --full-snapshots "$full" >/dev/null
"$tessel" info "$data"
info=$("$tessel" info "$data" --json)
echo
echo "== store: base + differences against full snapshots"
jq -r --argjson full "$(stat -c %s "$full")" '
  "edges over all snapshots \(.total_edges); stored as base \(.base_edges) + added \(.added_edges) + removed \(.removed_edges) = \(.base_edges + .added_edges + .removed_edges) edge records (\((.base_edges + .added_edges + .removed_edges) * 100 / .total_edges | floor)% of full snapshots)",
  "file with differences only \(.file_bytes / 1e6 | floor) MB; with full snapshots too \($full / 1e6 | floor) MB (features and targets are \(.num_nodes * .num_snapshots * (.feature_dim + 1) * 4 / 1e6 | floor) MB of each)"' <<<"$info"
train_end=$(jq '.train[1]' <<<"$info")

echo
printf "%-3s %-9s %-3s %9s %9s %11s %10s %9s %11s %10s %11s %11s %12s %7s %9s  %s\n" P layout thr "s/epoch" graph "transp/halo" recurrent \
  "graph cpu" "t/halo cpu" "rec cpu" "sent MB/ep" "a2a MB/ep" "analytic MB" "ratio" "faults/ep" "load"
for p in $ranks; do
  parts="$work/parts$p"
  bench_parts "$tessel" "$data" "$p" "$parts"
  threads=$(bench_threads "$p" "$cores")
  for layout in snapshot vertex; do
    metrics="$work/dynamic-p$p-$layout.jsonl"
    load0=$(cut -d' ' -f1 /proc/loadavg)
    OMP_NUM_THREADS=$threads mpirun --oversubscribe --bind-to none -np "$p" -x OMP_NUM_THREADS \
      "$tessel" train "$parts" --mode dynamic --model gcn-gru --layers 1 --hidden "$hidden" \
      --dropout 0 --temporal-partition "$layout" --epochs "$epochs" --eval-every 1000000 --threads "$threads" \
      --quiet --metrics "$metrics"
    load1=$(cut -d' ' -f1 /proc/loadavg)
    # Analytic volume of a training epoch (forward + backward over the training snapshots):
    # snapshot layout, the transposition the trainer reports; vertex layout, every halo row of
    # every training snapshot, H floats forward and H back.
    halo=$(jq --argjson t "$train_end" --argjson h "$hidden" \
      '[.stats.vertex_halo_per_snapshot[:$t][] | add] | add * $h * 4 * 2' "$parts/partition.json")
    jq -r -s --arg p "$p" --arg l "$layout" --arg t "$threads" --argjson halo "$halo" '
      [ .[] | select((.summary | not) and (.evaluated | not)) ] | .[1:] as $e |
      def med(f): ($e | map(f) | sort) as $s | $s[($s | length) / 2 | floor];
      (if $l == "snapshot" then med(.analytic_transpose_bytes) else $halo end) as $a |
      [$p, $l, $t, med(.epoch_s), med(.phases.graph // 0),
       med((.phases.transpose // 0) + (.phases.halo // 0)), med(.phases.recurrent // 0),
       med(.phases_cpu.graph // 0), med((.phases_cpu.transpose // 0) + (.phases_cpu.halo // 0)),
       med(.phases_cpu.recurrent // 0), med(.comm_bytes) / 1e6, med(.transpose_bytes) / 1e6, $a / 1e6,
       (if $a > 0 then med(.comm_bytes) / $a else 0 end), med(.minor_faults // 0)] | @tsv' "$metrics" |
      awk -F'\t' -v load="$load0-$load1" '{printf "%-3s %-9s %-3s %9.3f %9.3f %11.3f %10.3f %9.3f %11.3f %10.3f %11.2f %11.2f %12.2f %7.3f %9d  %s\n", $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,load}'
    if [ "$layout" = snapshot ]; then
      jq -r -s '.[] | select(.summary) | "    snapshot blocks \(.snapshot_blocks | tostring) (training [0, '"$train_end"'))"' "$metrics"
    fi
  done
done
echo "(sent MB/ep also carries the gradient all-reduce and the loss sums; ratio = sent / analytic;"
echo " faults/ep = the training pass's minor page faults on the slowest rank;"
echo " load = the 1-minute load average before and after the run)"
