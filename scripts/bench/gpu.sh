#!/usr/bin/env bash
# GPU benchmark: device-resident full-batch training (GCN and GraphSAGE, 2 layers, hidden 128)
# on a synthetic graph with a uniform number of in-neighbors per node, one GPU, P = 1: ms per
# epoch (median of epochs 3-12) and peak GPU memory (Tessel's caching allocator beside
# torch.cuda.max_memory_allocated, with the ratios); SpMM effective TB/s at F = 32 and 128
# against a device copy; and, when torch_geometric is importable, the same models in PyG on the
# same graph and GPU (scripts/bench/pyg_fullbatch.py, torch.sparse CSR adjacency). Then sampled
# GraphSAGE (3 x hidden, fanouts 15,10,5, batch 1024) on the same graph, a fixed number of steps
# per epoch, with --prefetch 0 and 1: sampled edges per second of the sample phase, the epoch and
# its split (sample / fetch / compute / communicate), the feature store's hit rates.
#
# Environment (optional): TESSEL (binary, default build/src/cli/tessel), SPMM_BENCH (default
# beside it: build/kernels/tessel_bench_gpu_spmm), MPIRUN (mpirun), WORK (scratch folder,
# default build/bench-gpu), NODES (2000000), DEGREE (25), FEAT (128), CLASSES (16), HIDDEN (128),
# EPOCHS (13), PYTHON (python3), SKIP_PYG (1 to skip PyG), DEVICE (cuda; cpu for a dry run),
# SAMPLED_STEPS (steps per sampled epoch, 20), SAMPLED_CACHE (device cache ratio, 0.25),
# SKIP_SAMPLED (1 to skip the sampled runs). Writes $WORK/gpu-bench.md.
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

# tessel_numbers METRICS: "ms_per_epoch peak_gb reserved_gb device_used_gb setup_peak_gb loss
# phases" from a metrics file: the median of epochs 3..12, and the device memory of the summary
# line (caching allocator's peak in use and reserved since setup, cudaMemGetInfo's use at the
# end; the epoch lines as a fallback).
tessel_numbers() {
  py - "$1" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
epochs = [e for e in lines if not e.get("summary")]
summary = next((e for e in lines if e.get("summary")), {})
timed = epochs[2:12]
def most(key):
    return max([e.get(key, 0) for e in epochs] + [summary.get(key, 0)]) / 1e9
phases = {k: statistics.median(e["phases"].get(k, 0) for e in timed) for k in timed[0].get("phases", {})}
print(f"{1e3 * statistics.median(e['epoch_s'] for e in timed):.2f} {most('gpu_peak_bytes'):.2f}"
      f" {most('gpu_peak_reserved_bytes'):.2f} {most('gpu_device_used_bytes'):.2f}"
      f" {most('gpu_setup_peak_bytes'):.2f} {epochs[-1]['loss']:.4f} "
      + ",".join(f"{k}={1e3 * v:.1f}ms" for k, v in sorted(phases.items())))
PY
}

echo "| model | tessel ms/epoch | PyG (sparse adj) ms/epoch | time ratio | tessel peak GB | PyG peak GB | memory ratio | tessel reserved GB | PyG reserved GB | tessel device used GB |" >>"$summary"
echo "|---|---|---|---|---|---|---|---|---|---|" >>"$summary"
pyg_ok=0
if [ "${SKIP_PYG:-0}" != 1 ] && py -c "import torch_geometric, torch; assert torch.cuda.is_available()" 2>/dev/null; then
  pyg_ok=1
  py scripts/bench/pyg_fullbatch.py "$parts/part-0.h5" --models gcn,sage --hidden "$hidden" \
    --epochs "$epochs" --json "$work/pyg.jsonl" || pyg_ok=0
fi
phase_notes="$work/phases.txt"
: >"$phase_notes"
for model in gcn sage; do
  metrics="$work/tessel-$model.jsonl"
  if ! "$mpirun" --oversubscribe --bind-to none -np 1 "$tessel" train "$parts" --mode full \
    --device "${DEVICE:-cuda}" --model "$model" --layers 2 --hidden "$hidden" --dropout 0.5 \
    --epochs "$epochs" --eval-every 1000 --quiet --metrics "$metrics"; then
    echo "| $model 2x$hidden | failed (see the log) | | | | | | | | |" >>"$summary"
    continue
  fi
  read -r ms peak reserved used setup_peak loss phases < <(tessel_numbers "$metrics")
  pyg_ms="-"; pyg_peak="-"; pyg_reserved="-"; time_ratio="-"; mem_ratio="-"
  if [ "$pyg_ok" = 1 ]; then
    read -r pyg_ms pyg_peak pyg_reserved < <(py -c "
import json
for l in open('$work/pyg.jsonl'):
    r = json.loads(l)
    if r['model'] == '$model' and r['input'] == 'sparse':
        print(f\"{r['ms_per_epoch']:.2f} {r['peak_gb']:.2f} {r.get('reserved_gb', 0):.2f}\")")
    read -r time_ratio mem_ratio < <(py -c "print(f'{$ms / $pyg_ms:.2f}x {$peak / $pyg_peak:.2f}x')")
  fi
  echo "tessel $model: $ms ms/epoch ($phases), peak $peak GB in use, $reserved GB reserved, device used $used GB, setup peak $setup_peak GB, loss after $epochs epochs $loss"
  echo "| $model 2x$hidden | $ms | $pyg_ms | $time_ratio | $peak | $pyg_peak | $mem_ratio | $reserved | $pyg_reserved | $used |" >>"$summary"
  echo "tessel $model phases (median ms): $phases" >>"$phase_notes"
done
cat "$phase_notes" >>"$summary"
echo "(peak GB: Tessel's caching allocator and torch.cuda.max_memory_allocated, bytes in use at the worst moment, features and graph included; reserved: held from the driver; device used: cudaMemGetInfo at the end, CUDA context included)" >>"$summary"
[ "$pyg_ok" = 1 ] || echo "(PyG not run: torch_geometric with CUDA not importable, or SKIP_PYG=1)" >>"$summary"

# Sampled GraphSAGE: 3 epochs of SAMPLED_STEPS steps; the second epoch is reported (the first
# warms the allocator and the cache, the third evaluates).
if [ "${SKIP_SAMPLED:-0}" != 1 ]; then
  steps="${SAMPLED_STEPS:-20}"
  echo >>"$summary"
  echo "Sampled SAGE 3x$hidden, fanouts 15,10,5, batch 1024, $steps steps per epoch, P = 1, degree cache ratio ${SAMPLED_CACHE:-0.25} (epoch 2):" >>"$summary"
  echo >>"$summary"
  echo "| prefetch | sampled edges/s (sample phase) | epoch s | sample s | fetch s | compute s | communicate s | device hit | host hit | network rows | loss |" >>"$summary"
  echo "|---|---|---|---|---|---|---|---|---|---|---|" >>"$summary"
  for prefetch in 0 1; do
    metrics="$work/tessel-sampled-prefetch$prefetch.jsonl"
    if ! "$mpirun" --oversubscribe --bind-to none -np 1 "$tessel" train "$parts" --mode sampled \
      --device "${DEVICE:-cuda}" --model sage --layers 3 --hidden "$hidden" --dropout 0.5 \
      --fanouts 15,10,5 --batch-size 1024 --max-batches "$steps" --epochs 3 --eval-every 1000 \
      --cache-policy degree --cache-ratio "${SAMPLED_CACHE:-0.25}" --prefetch "$prefetch" --quiet \
      --metrics "$metrics"; then
      echo "| $prefetch | failed (see the log) | | | | | | | | | |" >>"$summary"
      continue
    fi
    py - "$metrics" "$prefetch" >>"$summary" <<'PY'
import json, sys
epochs = [json.loads(l) for l in open(sys.argv[1]) if l.strip() and '"summary"' not in l]
e = epochs[1]
p = e.get("phases", {})
rate = lambda k: f"{100 * e[k]:.1f}%" if k in e else "-"
print(f"| {sys.argv[2]} | {e.get('sampled_edges_per_s', 0) / 1e6:.1f} M | {e['epoch_s']:.3f} | "
      f"{p.get('sample', 0):.3f} | {p.get('fetch', 0):.3f} | {p.get('compute', 0):.3f} | "
      f"{p.get('communicate', 0):.3f} | {rate('device_tier_hit_rate')} | {rate('host_tier_hit_rate')} | "
      f"{e.get('network_tier_requests', '-')} | {e['loss']:.4f} |")
PY
  done
fi

echo
cat "$summary"
