#!/usr/bin/env bash
# Sampled link prediction training throughput, Tessel against DGL's edge dataloader
# (dgl.dataloading.as_edge_prediction_sampler over a NeighborSampler, uniform negatives):
# training edges (positives) per second, interleaved A B A B over rounds, one process per run.
#
# scripts/bench/link_sampled.sh [--venv DIR] [--work DIR] [--rounds R] [--threads T]
#                               [--steps S] [--ranks LIST]
#   --venv     the folder with dgl/ (scripts/bench/peers.sh --install makes it; default
#              build/peers-venv); without it only Tessel runs, with a note.
#   --work     scratch folder (default build/bench-peers, shared with peers.sh: the same graph).
#   --rounds   rounds (default 2); a round runs every side once, in turn.
#   --threads  cores every side uses (default 2); Tessel P ranks x T/P threads.
#   --steps    timed training steps per run (default 30; DGL warms up 5 steps more, Tessel's
#              first epoch of as many steps warms up and its second is timed).
#   --ranks    Tessel's rank counts (default 1).
#   --keep     append to the results of earlier calls (a long series split into several calls)
#              instead of starting them afresh; the medians cover them all.
# The graph is peers.sh's: `tessel convert synthetic --ogb`, 200k nodes, average degree 20, 128
# features, seed 1 (NODES, AVG_DEGREE, FEAT change it), its edges split 85/5/10 (Tessel:
# `convert ogb --edge-split 85,5,10 --seed 1`; DGL: the same fractions drawn by numpy). The
# workload (both sides): GraphSAGE (mean), 2 layers, fanouts 10,10, width 128, output 64, dropout
# 0.5 before each layer, a dot product decoder, 1 uniform negative per positive, binary
# cross-entropy, Adam lr 0.01, a global batch of 512 training edges; features row-normalized.
# Prints one line per run and the medians; Tessel / DGL is the ratio of the medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

venv=build/peers-venv
work=build/bench-peers
rounds=2
threads=2
steps=30
ranks=1
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) venv="$2"; shift ;;
    --work) work="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --steps) steps="$2"; shift ;;
    --ranks) ranks="$2"; shift ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "link_sampled.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$rounds" -ge 1 ] 2>/dev/null || { echo "link_sampled.sh: --rounds must be at least 1" >&2; exit 2; }
[ "$steps" -ge 1 ] 2>/dev/null || { echo "link_sampled.sh: --steps must be at least 1" >&2; exit 2; }

tessel="${TESSEL:-build/src/cli/tessel}"
nodes="${NODES:-200000}"
avg_degree="${AVG_DEGREE:-20}"
feat="${FEAT:-128}"
batch=512
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench_require link_sampled.sh "$tessel" python3 mpirun uptime

mkdir -p "$work/metrics"
ogb="$work/ogb-n${nodes}-d${avg_degree}-f${feat}-generated"
[ -d "$ogb/raw" ] || "$tessel" convert synthetic --nodes "$nodes" --avg-degree "$avg_degree" \
  --classes 16 --feat-dim "$feat" --seed 1 --ogb "$ogb"
store="$ogb-link.h5"
[ -f "$store" ] || "$tessel" convert ogb "$ogb" "$store" --edge-split 85,5,10 --seed 1 >/dev/null
for p in ${ranks//,/ }; do bench_parts "$tessel" "$store" "$p" "$ogb-link-parts$p"; done
dgl_python="$venv/dgl/bin/python"
[ -x "$dgl_python" ] || echo "link_sampled.sh: no DGL environment at $venv/dgl; Tessel only" >&2

results="$work/link_sampled.jsonl"
[ "$keep" = 1 ] || : > "$results"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), load: $(uptime | sed 's/.*load average: //')"
# With --keep, this call's rounds follow the earlier calls' ones.
first=$(python3 -c "import json,sys; print(1 + max([json.loads(l)['round'] for l in open(sys.argv[1])], default=0))" "$results")
for round in $(seq "$first" $(( first + rounds - 1 ))); do
  for p in ${ranks//,/ }; do
    t=$(bench_threads "$p" "$threads")
    metrics="$work/metrics/link-sampled-p$p-r$round.jsonl"
    mpirun --oversubscribe --bind-to none -np "$p" "$tessel" train "$ogb-link-parts$p" \
      --mode sampled --task link --model sage --layers 2 --fanouts 10,10 --hidden 128 \
      --out-dim 64 --dropout 0.5 --lr 0.01 --negatives 1 --batch-size $(( batch / p )) \
      --max-batches "$steps" --epochs 2 --eval-every 1000000 --normalize-features row \
      --seed 0 --threads "$t" --quiet --metrics "$metrics" >/dev/null 2>"$metrics.log" \
      || { cat "$metrics.log" >&2; exit 1; }
    # The second epoch's training seconds (its evaluation left out).
    python3 - "$metrics" "$p" "$round" >> "$results" <<'EOF'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
epoch = [r for r in records if r.get("epoch") == 2][0]
seconds = epoch["epoch_s"] - epoch["phases"].get("eval", 0.0)
print(json.dumps(dict(side=f"tessel-p{sys.argv[2]}", round=int(sys.argv[3]),
                      train_edges=epoch["train_edges"], seconds=seconds,
                      edges_per_s=epoch["train_edges"] / seconds)))
EOF
    tail -n 1 "$results"
  done
  if [ -x "$dgl_python" ]; then
    "$dgl_python" scripts/bench/dgl_link_sampled.py "$ogb" --threads "$threads" --fanouts 10,10 \
      --batch-size "$batch" --negatives 1 --hidden 128 --out-dim 64 --steps "$steps" \
      2>/dev/null | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); \
r.update(side='dgl', round=$round); print(json.dumps(r))" >> "$results"
    tail -n 1 "$results"
  fi
done
python3 - "$results" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
median = {}
for side in sorted({r["side"] for r in runs}):
    median[side] = statistics.median(r["edges_per_s"] for r in runs if r["side"] == side)
    print(f"{side}: median {median[side]:.0f} training edges/s over "
          f"{sum(r['side'] == side for r in runs)} runs")
for side in median:
    if side != "dgl" and "dgl" in median:
        print(f"{side} / dgl: {median[side] / median['dgl']:.2f}x")
EOF
