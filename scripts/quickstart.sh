#!/usr/bin/env bash
# Quickstart: installs what is missing, builds the `tessel` program alone (without the CUDA
# sources when no GPU is visible), converts the Cora graph shipped in datasets/samples/,
# partitions it into 2 parts with METIS, trains the GCN paper's recipe on 2 MPI ranks and prints
# the test accuracy beside the paper's 81.5%.
#
# It shares build/ with scripts/test.sh (which builds and tests everything there afterwards,
# CUDA included where nvcc exists); TESSEL_BUILD_DIR names another folder, TESSEL_QUICKSTART_DIR
# the folder for the files it writes (default out/quickstart).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

bash scripts/setup.sh
build="${TESSEL_BUILD_DIR:-build}"
configure=(-DCMAKE_BUILD_TYPE=Release)
if [ ! -f "$build/CMakeCache.txt" ]; then
  # A first configure: no tests, and no CUDA sources unless a GPU is there to run them.
  configure+=(-DTESSEL_BUILD_TESTS=OFF)
  if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then
    configure+=(-DTESSEL_WITH_CUDA=OFF)
  fi
fi
cmake -S . -B "$build" "${configure[@]}" >/dev/null
cmake --build "$build" -j "${TESSEL_JOBS:-$(nproc)}" --target tessel

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tessel="$build/src/cli/tessel"
out=${TESSEL_QUICKSTART_DIR:-out/quickstart}
mkdir -p "$out"

echo "== 1. Cora (2708 papers, 5278 citations, 7 classes) from its OGB raw folder"
"$tessel" convert ogb datasets/samples/cora "$out/cora.h5"

echo "== 2. METIS into 2 parts"
"$tessel" partition "$out/cora.h5" --parts 2 --out "$out/cora-2" --force

echo "== 3. the GCN paper's recipe on 2 ranks (2 layers, hidden 16, dropout 0.5, 200 epochs)"
mpirun --oversubscribe --bind-to none -np 2 "$tessel" train "$out/cora-2" --mode full \
  --model gcn --layers 2 --hidden 16 --dropout 0.5 --lr 0.01 --weight-decay 5e-4 --epochs 200 \
  --normalize-features row --eval-every 20 --metrics "$out/cora.jsonl"

acc=$(tail -n 1 "$out/cora.jsonl" | python3 -c 'import json, sys; print("%.3f" % json.load(sys.stdin)["test_acc"])')
echo "== Cora test accuracy ${acc} (the GCN paper: 0.815), in $((SECONDS - start)) s"
