#!/usr/bin/env bash
# GPU benchmark: device-resident full-batch training (GCN and GraphSAGE, 2 layers, hidden 128)
# on a synthetic graph with a uniform number of in-neighbors per node, one GPU, P = 1: ms per
# epoch (median of epochs 3-12) and peak GPU memory; SpMM effective TB/s at F = 32 and 128
# against a device copy; and, when torch_geometric is importable, the same models in PyG on the
# same graph and GPU (scripts/bench/pyg_fullbatch.py, torch.sparse CSR adjacency).
#
# Environment (optional): TESSEL (binary, default build/src/cli/tessel), SPMM_BENCH (default
# beside it: build/kernels/tessel_bench_gpu_spmm), MPIRUN (mpirun), WORK (scratch folder,
# default build/bench-gpu), NODES (2000000), DEGREE (25), FEAT (128), CLASSES (16), HIDDEN (128),
# EPOCHS (13), PYTHON (python3), SKIP_PYG (1 to skip PyG), DEVICE (cuda; cpu for a dry run).
# Writes $WORK/gpu-bench.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
tessel="${TESSEL:-build/src/cli/tessel}"
spmm_bench="${SPMM_BENCH:-$(dirname "$tessel")/../../kernels/tessel_bench_gpu_spmm}"
mpirun="${MPIRUN:-mpirun}"
work="${WORK:-build/bench-gpu}"
nodes="${NODES:-2000000}"
degree="${DEGREE:-25}"
feat="${FEAT:-128}"
classes="${CLASSES:-16}"
hidden="${HIDDEN:-128}"
epochs="${EPOCHS:-13}"
# Python runs without the bundle's library path (its own libraries, not Tessel's).
py() { env -u LD_LIBRARY_PATH "${PYTHON:-python3}" "$@"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x "$tessel" ] || { echo "gpu.sh: $tessel not found; build with CUDA first" >&2; exit 1; }
mkdir -p "$work"
summary="$work/gpu-bench.md"
: >"$summary"

# The SpMM kernels first: they need no store, and their numbers are the ceiling of the epochs.
if [ -x "$spmm_bench" ]; then
  rm -f "$work/spmm.jsonl"
  "$spmm_bench" --nodes "$nodes" --degree "$degree" --feat 32,"$feat" --reps 10 \
    --json "$work/spmm.jsonl" | tee "$work/spmm.txt" || echo "(SpMM benchmark failed)" | tee -a "$summary"
  echo "| SpMM kernel | F | ms | effective TB/s |" >>"$summary"
  echo "|---|---|---|---|" >>"$summary"
  [ -s "$work/spmm.jsonl" ] && py - "$work/spmm.jsonl" >>"$summary" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "tbps" in r:
        print(f"| {r['kernel']} | {r.get('F', '-')} | {1e3 * r['best_s']:.3f} | {r['tbps']:.2f} |")
    elif "tflops" in r:
        print(f"| gemm [N,{r['F']}]x[{r['F']},{r['F']}] | {r['F']} | {1e3 * r['best_s']:.3f} | {r['tflops']:.1f} TFLOP/s |")
PY
fi
echo >>"$summary"

data="$work/uniform-n${nodes}-k${degree}-f${feat}.h5"
parts="$work/uniform-n${nodes}-k${degree}-f${feat}-p1"
SECONDS=0
[ -f "$data" ] || "$tessel" convert synthetic --nodes "$nodes" --uniform-degree "$degree" \
  --classes "$classes" --feat-dim "$feat" --seed 1 "$data" >/dev/null
[ -f "$parts/partition.json" ] || "$tessel" partition "$data" --parts 1 --no-symmetrize \
  --out "$parts" --force >/dev/null
echo "graph ready in ${SECONDS} s: $nodes nodes, $degree in-neighbors each, F = $feat" | tee -a "$summary"

# median_and_peak METRICS: "ms_per_epoch peak_gb" from a metrics file (epochs 3..12).
median_and_peak() {
  py - "$1" <<'PY'
import json, statistics, sys
epochs = [json.loads(l) for l in open(sys.argv[1]) if l.strip() and '"summary"' not in l]
timed = [e["epoch_s"] for e in epochs[2:12]]
print(f"{1e3 * statistics.median(timed):.2f} {max(e.get('gpu_peak_bytes', 0) for e in epochs) / 1e9:.2f}"
      f" {epochs[-1]['loss']:.4f}")
PY
}

echo "| model | tessel ms/epoch | tessel peak GB | PyG (sparse adj) ms/epoch | PyG peak GB |" >>"$summary"
echo "|---|---|---|---|---|" >>"$summary"
pyg_ok=0
if [ "${SKIP_PYG:-0}" != 1 ] && py -c "import torch_geometric, torch; assert torch.cuda.is_available()" 2>/dev/null; then
  pyg_ok=1
  py scripts/bench/pyg_fullbatch.py "$parts/part-0.h5" --models gcn,sage --hidden "$hidden" \
    --epochs "$epochs" --json "$work/pyg.jsonl" || pyg_ok=0
fi
for model in gcn sage; do
  metrics="$work/tessel-$model.jsonl"
  if ! "$mpirun" --oversubscribe --bind-to none -np 1 "$tessel" train "$parts" --mode full \
    --device "${DEVICE:-cuda}" --model "$model" --layers 2 --hidden "$hidden" --dropout 0.5 \
    --epochs "$epochs" --eval-every 1000 --quiet --metrics "$metrics"; then
    echo "| $model 2x$hidden | failed (see the log) | | | |" >>"$summary"
    continue
  fi
  read -r ms peak loss < <(median_and_peak "$metrics")
  pyg_ms="-"; pyg_peak="-"
  if [ "$pyg_ok" = 1 ]; then
    read -r pyg_ms pyg_peak < <(py -c "
import json
for l in open('$work/pyg.jsonl'):
    r = json.loads(l)
    if r['model'] == '$model' and r['input'] == 'sparse':
        print(f\"{r['ms_per_epoch']:.2f} {r['peak_gb']:.2f}\")")
  fi
  echo "tessel $model: $ms ms/epoch, peak $peak GB, loss after $epochs epochs $loss"
  echo "| $model 2x$hidden | $ms | $peak | $pyg_ms | $pyg_peak |" >>"$summary"
done
[ "$pyg_ok" = 1 ] || echo "(PyG not run: torch_geometric with CUDA not importable, or SKIP_PYG=1)" >>"$summary"

echo
cat "$summary"
