#!/usr/bin/env bash
# GPU benchmark: device-resident full-batch training (GCN and GraphSAGE, 2 layers, hidden 128)
# on a synthetic graph with a uniform number of in-neighbors per node, one GPU, P = 1: ms per
# epoch (median of epochs 3-12) and peak GPU memory (Tessel's caching allocator beside
# torch.cuda.max_memory_allocated, with the ratios); SpMM effective TB/s at F = 32 and 128
# against a device copy; and, when torch_geometric is importable, the same models in PyG on the
# same graph and GPU (scripts/bench/pyg_fullbatch.py, torch.sparse CSR adjacency); the frontier
# routing ops of a sampling hop (ms per call and effective GB/s at frontiers of 1e5 and 1e6 nodes,
# P = 2 and 8, fanouts 15 and -1 over power-law degrees: tessel_bench_frontier_ops). Then sampled
# GraphSAGE (3 x hidden, fanouts 15,10,5, batch 1024) on the same graph, a fixed number of steps
# per epoch, with --prefetch 0 and 1: sampled edges per second of the sample phase, the epoch and
# its split (sample / fetch / compute / communicate), the feature store's hit rates, beside PyG's
# SAGEConv fed by a sampler of torch operations on the GPU (scripts/bench/pyg_sampled.py: PyG's
# NeighborLoader needs pyg-lib or torch-sparse, which PyPI has no wheels of). Then the
# same full-batch and sampled runs on a products-scale graph (`tessel convert synthetic --preset
# products`: 2.45M nodes, about 62M undirected edges, power-law degrees, 100 features, 47
# classes), PyG included only when the time budget still allows it.
#
# Environment (optional): TESSEL (binary, default build/src/cli/tessel), SPMM_BENCH (default
# beside it: build/src/kernels/tessel_bench_gpu_spmm), FRONTIER_BENCH (default beside it:
# build/src/sampling/tessel_bench_frontier_ops), MPIRUN (mpirun), WORK (scratch folder,
# default build/bench-gpu), NODES (2000000), DEGREE (25), FEAT (128), CLASSES (16), HIDDEN (128),
# EPOCHS (13), PYTHON (python3), SKIP_PYG (1 to skip PyG), DEVICE (cuda; cpu for a dry run),
# SAMPLED_STEPS (steps per sampled epoch, 20), SAMPLED_CACHE (device cache ratio, 0.25),
# SKIP_SAMPLED (1 to skip the sampled runs), SKIP_PRODUCTS (1 to skip the products-scale graph),
# SKIP_KERNEL_BENCH (1 to skip the SpMM and frontier ops benchmarks), FULLBATCH_MODELS (models
# of the full-batch table, "gcn sage"), SAMPLED_PREFETCH (prefetch depths of the sampled table,
# "0 1"), PREPARE_ONLY (1: make the uniform graph and its 1-part partition, then stop),
# PRODUCTS_NODES (the preset's 2449029; fewer for a dry run), BUDGET_S (seconds the whole script
# may take, 285; scripts/gpu-run.sh passes what is left of its own; a products section that
# would start with less than its share left is skipped and says so). Writes $WORK/gpu-bench.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
tessel="${TESSEL:-build/src/cli/tessel}"
spmm_bench="${SPMM_BENCH:-$(dirname "$tessel")/../kernels/tessel_bench_gpu_spmm}"
frontier_bench="${FRONTIER_BENCH:-$(dirname "$tessel")/../sampling/tessel_bench_frontier_ops}"
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
[ "${PREPARE_ONLY:-0}" = 1 ] || : >"$summary"
script_start=$(date +%s)

# The SpMM kernels first: they need no store, and their numbers are the ceiling of the epochs.
if [ "${SKIP_KERNEL_BENCH:-0}" = 1 ] || [ "${PREPARE_ONLY:-0}" = 1 ]; then
  spmm_bench="" frontier_bench=""
fi
if [ -n "$spmm_bench" ] && [ -x "$spmm_bench" ]; then
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

# The frontier routing ops of a sampling hop (a few seconds, most of it making the inputs on the
# host); its table goes into the summary as printed.
if [ -n "$frontier_bench" ] && [ -x "$frontier_bench" ]; then
  timeout 60 "$frontier_bench" --device "${DEVICE:-cuda}" >"$work/frontier-ops.txt" ||
    echo "(frontier ops benchmark failed)" >>"$work/frontier-ops.txt"
  cat "$work/frontier-ops.txt" | tee -a "$summary"
  echo >>"$summary"
fi

data="$work/uniform-n${nodes}-k${degree}-f${feat}.h5"
parts="$work/uniform-n${nodes}-k${degree}-f${feat}-p1"
SECONDS=0
[ -f "$data" ] || "$tessel" convert synthetic --nodes "$nodes" --uniform-degree "$degree" \
  --classes "$classes" --feat-dim "$feat" --seed 1 "$data" >/dev/null
[ -f "$parts/partition.json" ] || "$tessel" partition "$data" --parts 1 --no-symmetrize \
  --out "$parts" --force >/dev/null
if [ "${PREPARE_ONLY:-0}" = 1 ]; then
  echo "graph ready in ${SECONDS} s: $nodes nodes, $degree in-neighbors each, F = $feat"
  exit 0
fi
echo "graph ready in ${SECONDS} s (made before, or now): $nodes nodes, $degree in-neighbors each, F = $feat" | tee -a "$summary"

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

pyg_available=0
if [ "${SKIP_PYG:-0}" != 1 ] && py -c "import torch_geometric, torch; assert torch.cuda.is_available()" 2>/dev/null; then
  pyg_available=1
fi

# fullbatch_section PARTS TAG RUN_PYG: GCN and SAGE 2 x hidden full-batch on PARTS (1 part),
# beside PyG on the same graph when RUN_PYG is 1 and PyG is importable.
fullbatch_section() {
  local parts=$1 tag=$2 run_pyg=$3 models="${FULLBATCH_MODELS:-gcn sage}"
  echo "| model | tessel ms/epoch | PyG (sparse adj) ms/epoch | time ratio | tessel peak GB | PyG peak GB | memory ratio | tessel reserved GB | PyG reserved GB | tessel device used GB |" >>"$summary"
  echo "|---|---|---|---|---|---|---|---|---|---|" >>"$summary"
  local pyg_ok=0
  if [ "$pyg_available" = 1 ] && [ "$run_pyg" = 1 ]; then
    pyg_ok=1
    py scripts/bench/pyg_fullbatch.py "$parts/part-0.h5" --models "${models// /,}" --hidden "$hidden" \
      --epochs "$epochs" --json "$work/pyg-$tag.jsonl" || pyg_ok=0
  fi
  local phase_notes="$work/phases-$tag.txt"
  : >"$phase_notes"
  local model metrics ms peak reserved used setup_peak loss phases
  local pyg_ms pyg_peak pyg_reserved time_ratio mem_ratio
  for model in $models; do
    metrics="$work/tessel-$tag-$model.jsonl"
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
for l in open('$work/pyg-$tag.jsonl'):
    r = json.loads(l)
    if r['model'] == '$model' and r['input'] == 'sparse':
        print(f\"{r['ms_per_epoch']:.2f} {r['peak_gb']:.2f} {r.get('reserved_gb', 0):.2f}\")")
      read -r time_ratio mem_ratio < <(py -c "print(f'{$ms / $pyg_ms:.2f}x {$peak / $pyg_peak:.2f}x')")
    fi
    echo "tessel $tag $model: $ms ms/epoch ($phases), peak $peak GB in use, $reserved GB reserved, device used $used GB, setup peak $setup_peak GB, loss after $epochs epochs $loss"
    echo "| $model 2x$hidden | $ms | $pyg_ms | $time_ratio | $peak | $pyg_peak | $mem_ratio | $reserved | $pyg_reserved | $used |" >>"$summary"
    echo "tessel $model phases (median ms): $phases" >>"$phase_notes"
  done
  cat "$phase_notes" >>"$summary"
  echo "(peak GB: Tessel's caching allocator and torch.cuda.max_memory_allocated, bytes in use at the worst moment, features and graph included; reserved: held from the driver; device used: cudaMemGetInfo at the end, CUDA context included)" >>"$summary"
  if [ "$pyg_available" != 1 ]; then
    echo "(PyG not run: torch_geometric with CUDA not importable, or SKIP_PYG=1)" >>"$summary"
  elif [ "$run_pyg" != 1 ]; then
    echo "(PyG not run on this graph: it would not fit the time budget BUDGET_S)" >>"$summary"
  elif [ "$pyg_ok" != 1 ]; then
    echo "(PyG failed on this graph: see the log)" >>"$summary"
  fi
}

# sampled_section PARTS TAG: sampled GraphSAGE, 3 epochs of SAMPLED_STEPS steps, --prefetch 0
# and 1; the second epoch is reported (the first warms the allocator and the cache, the third
# evaluates).
sampled_section() {
  local parts=$1 tag=$2 steps="${SAMPLED_STEPS:-20}" prefetch metrics tag_file
  tag_file=$(echo "$tag" | tr -c 'a-z0-9\n' '-')
  echo >>"$summary"
  echo "Sampled SAGE 3x$hidden on $tag, fanouts 15,10,5, batch 1024, $steps steps per epoch, P = 1, degree cache ratio ${SAMPLED_CACHE:-0.25} (epoch 2):" >>"$summary"
  echo >>"$summary"
  echo "| prefetch | sampled edges/s (sample phase) | epoch s | sample s | fetch s | compute s | communicate s | device hit | host hit | network rows | loss |" >>"$summary"
  echo "|---|---|---|---|---|---|---|---|---|---|---|" >>"$summary"
  for prefetch in ${SAMPLED_PREFETCH:-0 1}; do
    metrics="$work/tessel-$tag-sampled-prefetch$prefetch.jsonl"
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
  if [ "$pyg_available" = 1 ]; then
    if py scripts/bench/pyg_sampled.py "$parts/part-0.h5" --hidden "$hidden" --layers 3 \
      --fanouts 15,10,5 --batch-size 1024 --steps "$steps" --epochs 3 \
      --json "$work/pyg-sampled-$tag_file.jsonl"; then
      py - "$work/pyg-sampled-$tag_file.jsonl" "$work/tessel-$tag-sampled-prefetch1.jsonl" >>"$summary" <<'PY'
import json, statistics, sys
r = json.loads(open(sys.argv[1]).readline())
print(f"| PyG SAGEConv, torch sampler on the GPU | {r['sampled_edges_per_s'] / 1e6:.1f} M | "
      f"{r['epoch_s']:.3f} | {r['sample_s']:.3f} | - | - | - | - | - | - | {r['loss']:.4f} |")
try:
    epochs = [json.loads(l) for l in open(sys.argv[2]) if l.strip() and '"summary"' not in l]
    print(f"\nepoch time, Tessel --prefetch 1 / PyG: {epochs[1]['epoch_s'] / r['epoch_s']:.2f}x "
          f"(PyG: median of epochs 2-{r['epochs']}; its sampler draws with replacement)")
except (OSError, IndexError, KeyError):
    pass
PY
    else
      echo "(PyG sampled run failed: see the log)" >>"$summary"
    fi
  else
    echo "(PyG not run: torch_geometric with CUDA not importable, or SKIP_PYG=1)" >>"$summary"
  fi
}

section_start=$(date +%s)
fullbatch_section "$parts" uniform 1
echo "(full-batch section: $(($(date +%s) - section_start)) s of wall time)" >>"$summary"
if [ "${SKIP_SAMPLED:-0}" != 1 ]; then
  section_start=$(date +%s)
  sampled_section "$parts" "the uniform graph"
  echo "(sampled section: $(($(date +%s) - section_start)) s of wall time)" >>"$summary"
fi

# The products-scale graph, within what is left of BUDGET_S: each part starts only when its
# share of the budget is still there, so the script ends before gpu-check's limit stops it. The
# shares are estimates, not yet measured on a GPU machine: generation and partition about 60 s
# (a 2.45M-node graph without features took 40 s and 5 s on two busy cores), Tessel's full-batch
# runs about 40 s, PyG's about 60 s, the sampled runs about 40 s.
budget="${BUDGET_S:-285}"
left() { echo $((budget - $(date +%s) + script_start)); }
skipped() { echo "(products-scale graph: $1 skipped, $(left) s of BUDGET_S=$budget left)" | tee -a "$summary"; }
if [ "${SKIP_PRODUCTS:-0}" != 1 ]; then
  echo >>"$summary"
  pnodes="${PRODUCTS_NODES:-2449029}"
  pdata="$work/products-n$pnodes.h5"
  pparts="$work/products-n$pnodes-p1"
  if [ "$(left)" -lt 150 ] && [ ! -f "$pparts/partition.json" ]; then
    skipped "everything (generation and partition need about 60 s, the runs 80 s more)"
  else
    SECONDS=0
    [ -f "$pdata" ] || "$tessel" convert synthetic --preset products --nodes "$pnodes" --seed 1 \
      "$pdata" >/dev/null
    [ -f "$pparts/partition.json" ] || "$tessel" partition "$pdata" --parts 1 --out "$pparts" \
      --force >/dev/null
    echo "products-scale graph ready in ${SECONDS} s: $pnodes nodes, $("$tessel" info "$pdata" | sed -n 's/^ *edges *\([0-9]*\).*/\1/p') undirected edges, F = 100, 47 classes" | tee -a "$summary"
    if [ "$(left)" -lt 40 ]; then
      skipped "full-batch"
    else
      # PyG only when its share and the sampled runs' still fit after Tessel's runs.
      run_pyg=0
      [ "$(left)" -ge 150 ] && run_pyg=1
      echo "Full-batch on the products-scale graph:" >>"$summary"
      echo >>"$summary"
      fullbatch_section "$pparts" products "$run_pyg"
    fi
    if [ "${SKIP_SAMPLED:-0}" = 1 ]; then
      :
    elif [ "$(left)" -lt 40 ]; then
      skipped "sampled"
    else
      sampled_section "$pparts" "the products-scale graph"
    fi
  fi
fi

echo
cat "$summary"
