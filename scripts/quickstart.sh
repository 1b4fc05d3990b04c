#!/usr/bin/env bash
# Quickstart: set up, build, make the default synthetic dataset, partition it into 2 parts,
# train a 2-layer GCN on it with `mpirun -np 2`, and print the result.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# Tests off to build less; scripts/test.sh turns them back on in the same build folder.
bash scripts/build.sh -DTESSEL_BUILD_TESTS=OFF

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tessel="${TESSEL_BUILD_DIR:-build}/src/cli/tessel"
out=${TESSEL_QUICKSTART_DIR:-out/quickstart}
mkdir -p "$out"

echo "== 1. a synthetic graph: 20000 nodes, 8 classes, 64 features"
"$tessel" convert synthetic --nodes 20000 --avg-degree 10 --classes 8 --feat-dim 64 --seed 1 \
  "$out/synthetic.h5"
"$tessel" info "$out/synthetic.h5"

echo "== 2. METIS into 2 parts"
"$tessel" partition "$out/synthetic.h5" --parts 2 --out "$out/parts" --force

echo "== 3. full-batch GCN on 2 ranks"
mpirun --oversubscribe --bind-to none -np 2 "$tessel" train "$out/parts" --mode full --model gcn \
  --layers 2 --hidden 64 --dropout 0.5 --lr 0.01 --epochs 100 --eval-every 10 \
  --metrics "$out/full.jsonl"

echo "== result"
tail -n 1 "$out/full.jsonl"
