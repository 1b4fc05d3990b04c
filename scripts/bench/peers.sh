#!/usr/bin/env bash
# Tessel, DGL and PyG side by side on one graph and one thread count: full-batch GCN and
# GraphSAGE (seconds per training step and per forward-only evaluation), and sampled GraphSAGE
# (seconds per training epoch), printed as one table.
#
# scripts/bench/peers.sh [--install] [--venv DIR] [--work DIR] [--threads T] [--epochs E]
#                        [--sampled-epochs E]
#   --install   make two virtual environments under the --venv folder (default build/peers-venv)
#               from PyPI: dgl/ with DGL 2.1.0, torch 2.2.1, torchdata 0.7.1 and numpy < 2 (what
#               DGL 2.1 needs), pyg/ with PyG 2.8.1 and the current torch. A few GB (torch's
#               wheels pull CUDA libraries from PyPI even for CPU use).
#   --work      scratch folder (default build/bench-peers): the OGB raw folder everyone reads,
#               Tessel's store and partitions, metrics, the table (peers.md).
# The graph: `tessel convert synthetic --ogb` with 200k nodes, average degree 20, 128 features,
# 16 classes, seed 1 (environment NODES, AVG_DEGREE, FEAT, CLASSES change it). Tessel runs
# P = 1 rank x T threads and P = 2 ranks x T/2 threads; the Python frameworks run one process
# with T threads. Models: 2 layers of width 128 full batch, 3 layers with fanouts 15,10,5 and a
# global batch of 1024 sampled; dropout 0.5, Adam lr 0.01. A framework whose environment is
# missing is left out of the table with a note.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

install=0
venv=build/peers-venv
work=build/bench-peers
threads=2
epochs=12
sampled_epochs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --install) install=1 ;;
    --venv) venv="$2"; shift ;;
    --work) work="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --epochs) epochs="$2"; shift ;;
    --sampled-epochs) sampled_epochs="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "peers.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$epochs" -ge 3 ] || { echo "peers.sh: --epochs must be at least 3 (2 warm up)" >&2; exit 2; }
[ "$sampled_epochs" -ge 2 ] || { echo "peers.sh: --sampled-epochs must be at least 2" >&2; exit 2; }

tessel="${TESSEL:-build/src/cli/tessel}"
nodes="${NODES:-200000}"
avg_degree="${AVG_DEGREE:-20}"
feat="${FEAT:-128}"
classes="${CLASSES:-16}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench_require peers.sh "$tessel" python3 mpirun

if [ "$install" = 1 ]; then
  mkdir -p "$venv"
  if [ ! -x "$venv/dgl/bin/python" ]; then python3 -m venv "$venv/dgl"; fi
  "$venv/dgl/bin/pip" install -q torch==2.2.1 dgl==2.1.0 torchdata==0.7.1 "numpy<2" pandas \
    pydantic pyyaml
  if [ ! -x "$venv/pyg/bin/python" ]; then python3 -m venv "$venv/pyg"; fi
  "$venv/pyg/bin/pip" install -q torch torch_geometric==2.8.1 pandas
fi

mkdir -p "$work"
ogb="$work/ogb-n${nodes}-d${avg_degree}-f${feat}"
[ -d "$ogb/raw" ] || "$tessel" convert synthetic --nodes "$nodes" --avg-degree "$avg_degree" \
  --classes "$classes" --feat-dim "$feat" --seed 1 --ogb "$ogb"
store="$work/graph.h5"
[ -f "$store" ] || "$tessel" convert ogb "$ogb" "$store" >/dev/null
results="$work/results.jsonl"
: > "$results"

for p in 1 2; do
  parts="$work/parts$p"
  bench_parts "$tessel" "$store" "$p" "$parts"
  t=$(bench_threads "$p" "$threads")
  run=(mpirun --oversubscribe --bind-to none -np "$p" "$tessel" train "$parts" --threads "$t" \
       --quiet --hidden 128 --dropout 0.5 --lr 0.01 --seed 0)
  for model in gcn sage; do
    echo "tessel P=$p x $t: full $model" >&2
    "${run[@]}" --mode full --model "$model" --layers 2 --epochs "$epochs" \
      --metrics "$work/tessel-p$p-full-$model.jsonl"
  done
  echo "tessel P=$p x $t: sampled sage" >&2
  # The global batch is --batch-size x ranks: keep it at 1024. Evaluation only after the last
  # epoch, and its seconds are left out: epochs time training only, as the peers' sampled
  # epochs do.
  "${run[@]}" --mode sampled --model sage --layers 3 --fanouts 15,10,5 \
    --batch-size $(( 1024 / p )) --epochs "$sampled_epochs" --eval-every 1000000 \
    --metrics "$work/tessel-p$p-sampled-sage.jsonl"
  python3 scripts/bench/peers_table.py tessel-metrics --label "Tessel P=$p x $t" \
    --full-gcn "$work/tessel-p$p-full-gcn.jsonl" --full-sage "$work/tessel-p$p-full-sage.jsonl" \
    --sampled "$work/tessel-p$p-sampled-sage.jsonl" >> "$results"
done

for framework in dgl pyg; do
  py="$venv/$framework/bin/python"
  if [ ! -x "$py" ]; then
    echo "{\"framework\": \"$framework\", \"missing\": \"no environment at $venv/$framework (run with --install)\"}" >> "$results"
    continue
  fi
  echo "$framework: full gcn, full sage, sampled sage" >&2
  OMP_NUM_THREADS="$threads" "$py" scripts/bench/peer_gnn.py --framework "$framework" \
    --ogb "$ogb" --cache "$work/ogb-arrays.npz" --threads "$threads" --epochs "$epochs" \
    --sampled-epochs "$sampled_epochs" >> "$results" \
    || echo "{\"framework\": \"$framework\", \"missing\": \"the run failed (see above)\"}" >> "$results"
done

python3 scripts/bench/peers_table.py table "$results" --threads "$threads" | tee "$work/peers.md"
