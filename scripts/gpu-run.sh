#!/usr/bin/env bash
# Runs Tessel's GPU check and writes summary.md: the GPU suites' parity tests at P = 1 and 2 on
# one GPU, compute-sanitizer's memcheck on the sampling suites, and full-batch and sampled tables
# on a 2M-node graph against PyG. It is the bundle's run.sh (scripts/gpu-check.sh --bundle DIR
# copies it there) and what scripts/gpu-check.sh runs in a build tree.
#
#   run.sh [--quick | --full | --cpu] [--out DIR] [--budget SECONDS]
#   run.sh --exec COMMAND [ARG...]
#
# --quick (default): each suite filtered to the tests that take its GPU paths (the filters below,
#   each with its reason), memcheck on the sampling suites' smallest cases, and the 2M-node
#   tables (GCN full batch, sampled SAGE) without the products-scale graph and the kernel
#   benchmarks. Stops within --budget (default 235 s) of its start: estimated at 160 to 225 s
#   on one H100 or H200 (see "Estimate" below), at most 4 minutes.
# --full: every test of every suite, memcheck on every CUDA case of the sampling suites, and all
#   of scripts/bench/gpu.sh (kernel benchmarks, the products-scale graph). 12 to 15 minutes by
#   the same estimate: more than one command of a lent GPU machine may take (10 minutes).
# --cpu: the suites and filters of --quick on the CPU (no GPU needed: their GPU tests skip, naming
#   what was not run) and the README's Cora example with --device cpu at P = 1 and 2, to prove a
#   bundle runs where it is unpacked. No memcheck, no tables.
# --exec: runs COMMAND in the environment run.sh sets (the bundle's libraries, Open MPI relocated
#   into the bundle), e.g. `run.sh --exec ldd tree/src/cli/tessel`.
#
# Every suite runs under `timeout` with its own limit (the LIMIT column of summary.md), never
# past the budget, so one hang cannot eat the machine's time; a suite that times out is reported
# TIMED OUT, the processes it left are ended, and the next suite starts. Writes to $OUT (default
# DIR/out in a bundle, BUILD/gpu-check in a build tree): summary.md (one line per suite: passed,
# FAILED or TIMED OUT, seconds; failed and skipped tests; then the tables), env.log (GPU, driver,
# CUDA, libraries) and logs.tgz (every suite's log, memcheck reports, metrics files). Exit code
# 0 iff every suite that ran passed. Environment: TESSEL_GPU_BUILD (the build tree, outside a
# bundle; gpu-check.sh sets it), BENCH_WORK (scratch for the tables, default /tmp/tessel-gpu-bench).
#
# Estimate of --quick on one H100/H200 (not yet run on a GPU; docs/gpu.md has the table): 28 GPU
# and 14 CPU `tessel train` runs, 21 convert/partition runs, the unit suites, memcheck and the
# tables. A CPU run took 1.25 s at P = 1 and 2.2 s at P = 2 on 2 cores of an AMD EPYC at load 5-12
# (0.3 and 0.7 CPU seconds), a convert or partition 0.6 s; a GPU run is taken as its CPU twin
# plus 1 s (CUDA context, cuBLAS and cuSPARSE handles, module loading; NCCL's start at P = 1 one
# more second): gpu_train_test 13-27 s, gpu_sampled_test 28-52 s, gpu_dynamic_test 19-43 s; the
# unit suites about 23 s, data plane and sampler suites 12-15 s, memcheck about 35 s (guessed:
# compute-sanitizer's start and instrumentation per process, kernels 10-100x slower on inputs
# of a few thousand ids), the tables about 30 s (the graph, 2.8 GB written, is made in the
# background while the suites run). In all 160 s (runs at their CPU seconds) to 225 s (at their
# loaded wall time), within the 235 s budget.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode=quick out="" budget="" exec_cmd=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick | --full | --cpu) mode="${1#--}"; shift ;;
    --out) out="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --exec) shift; exec_cmd=("$@"); break ;;
    -h | --help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# ---- Where things are: a bundle (BUNDLE marker beside this file) or a source checkout. -------
if [ -f "$here/BUNDLE" ]; then
  tree="$here/tree" data="$here/data" bench="$here/scripts/bench"
  ompi="$here/ompi/usr"
  ompi_lib=$(find "$ompi/lib" -maxdepth 2 -type d -name openmpi | head -1)
  pmix_home="$(dirname "$ompi_lib")/pmix2"
  ompi_pkglib=$(find "$ompi_lib/lib" -maxdepth 1 -type d -name 'openmpi*' | head -1)
  # Open MPI and PMIx find their plugins, help files and settings inside the bundle.
  export OPAL_PREFIX="$ompi" OPAL_EXEC_PREFIX="$ompi" OPAL_BINDIR="$ompi/bin" \
    OPAL_LIBDIR="$ompi_lib/lib" OPAL_PKGLIBDIR="$ompi_pkglib" \
    OPAL_DATADIR="$ompi/share" OPAL_PKGDATADIR="$ompi/share/openmpi" \
    OPAL_SYSCONFDIR="$here/ompi/etc/openmpi" PMIX_INSTALL_PREFIX="$pmix_home" \
    PMIX_MCA_mca_base_component_path="$pmix_home/lib/pmix" HWLOC_PLUGINS_PATH="$here/lib/hwloc"
  # (hwloc's plugins, which the bundle does not carry, are not looked for on the machine.)
  # CUDA's libraries are the machine's own: the toolkit's, else those of Python's CUDA wheels.
  cuda_libs=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib; do
    [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
  done
  for d in $(env -u LD_LIBRARY_PATH python3 -c "import nvidia, os; print(' '.join(os.path.join(p, q, 'lib') for p in nvidia.__path__ for q in os.listdir(p)))" 2>/dev/null); do
    [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
  done
  export LD_LIBRARY_PATH="$here/lib:$ompi_lib/lib:$pmix_home/lib${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$ompi/bin:$PATH"
  mpirun_bin="$ompi/bin/mpirun"
  default_out="$here/out"
else
  root="$(cd "$here/.." && pwd)"
  tree="${TESSEL_GPU_BUILD:-$root/build-gpu}" bench="$root/scripts/bench"
  data=$(cd "$root" && find . -path ./build -prune -o -path './build-*' -prune -o -type d \
    -name samples -path '*datasets*' -print | sort | head -1)
  data="$root/${data#./}"
  mpirun_bin="$(command -v mpirun || true)"
  default_out="$tree/gpu-check"
fi
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 \
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
export TESSEL_TEST_BINARY_DIR="$tree" TESSEL_TEST_MPIEXEC="$mpirun_bin" TESSEL_SAMPLE_DATASETS="$data"
if [ ${#exec_cmd[@]} -gt 0 ]; then
  cd "$here" && exec "${exec_cmd[@]}"
fi

# bin NAME: the executable NAME in the tree, wherever the build put it: in a build tree one
# linked since the last configure if there is one (an older layout's may linger), the
# shallowest (a bundle packed inside a build folder holds copies deeper down).
bin() {
  local newer=() path
  [ -f "$tree/CMakeCache.txt" ] && newer=(-newer "$tree/CMakeCache.txt")
  path=$(find "$tree" -name "$1" -type f -perm -u+x -not -path '*/CMakeFiles/*' "${newer[@]}" \
    -printf '%d %p\n' 2>/dev/null | sort -n | head -1 | cut -d' ' -f2-)
  [ -n "$path" ] || path=$(find "$tree" -name "$1" -type f -perm -u+x -not -path '*/CMakeFiles/*' \
    -printf '%d %p\n' 2>/dev/null | sort -n | head -1 | cut -d' ' -f2-)
  echo "$path"
}
out="${out:-${OUT:-$default_out}}"
logs="$(mktemp -d)/logs"
mkdir -p "$out" "$logs"
summary="$out/summary.md"
case "$mode" in quick) budget="${budget:-235}" ;; *) budget="${budget:-0}" ;; esac
start=$SECONDS
reserve=8 # seconds kept at the end for the summary and the logs
failed_suites=0

compute_sanitizer=$(command -v compute-sanitizer ||
  ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer \
    /opt/nvidia/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
{
  echo "== run.sh --$mode, $(date -u '+%Y-%m-%d %H:%M UTC'), $(cat "$here/BUNDLE" 2>/dev/null || echo "build tree $tree")"
  echo "== GPU"; nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv 2>&1
  echo "== CUDA"; nvidia-smi 2>/dev/null | grep -o "CUDA Version: [0-9.]*"; nvcc --version 2>/dev/null | tail -2
  echo "== missing libraries"; for f in "$tree"/src/cli/tessel $(find "$tree" -name '*_test' -type f -perm -u+x); do
    ldd "$f" | grep "not found"; done | sort -u
  echo "== libraries of tessel"; ldd "$(bin tessel)"
  echo "== mpirun"; "$mpirun_bin" --version 2>&1 | head -1
  echo "== compute-sanitizer"; echo "${compute_sanitizer:-none}"
  [ -n "$compute_sanitizer" ] && "$compute_sanitizer" --version | tail -1
  echo "== python"; env -u LD_LIBRARY_PATH python3 -c "import torch, torch_geometric; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'pyg', torch_geometric.__version__)" 2>&1 | tail -1
} >"$out/env.log" 2>&1

gpu_line=$(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -1)
{
  echo "# Tessel GPU check (--$mode)"
  echo
  echo "    $(sed -n '1s/^== //p' "$out/env.log")"
  echo "    GPU: ${gpu_line:-none visible (no nvidia-smi or no driver)}; $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' || echo 'CUDA: no driver')"
  echo
  echo "| suite | result | tests | seconds | limit |"
  echo "|---|---|---|---|---|"
} >"$summary"
: >"$logs/failed.txt"
: >"$logs/skipped.txt"

# Ends what a timed-out suite left running: the processes started from this tree (tests,
# mpirun's ranks, tessel), found by their command line, which names the tree's unique path; not
# the tables' graph being made in the background (its command line names the scratch folder).
end_leftovers() {
  local dir pid cmdline
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [ "$pid" = $$ ] && continue
    cmdline=$(tr '\0' ' ' <"$dir/cmdline" 2>/dev/null) || continue
    [[ "$cmdline" == *"$tree/"* && "$cmdline" != *"$work/"* ]] && kill -KILL "$pid" 2>/dev/null
  done
}

# run_suite NAME LIMIT COMMAND...: runs COMMAND under `timeout` (LIMIT, never past the budget),
# its output in logs/NAME.log, and adds its line to the summary.
run_suite() {
  local name=$1 limit=$2
  shift 2
  # --full runs whole suites (gpu_dynamic_test: 81 runs, not 15): four times the time.
  [ "$mode" = full ] && limit=$((limit * 4))
  if [ "$budget" -gt 0 ]; then
    local left=$((budget - (SECONDS - start) - reserve))
    if [ "$left" -lt 10 ]; then
      echo "| $name | NOT RUN (budget of ${budget} s spent) | | 0 | $limit |" >>"$summary"
      failed_suites=$((failed_suites + 1))
      return
    fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  local t0=$SECONDS rc
  timeout -k 5 "$limit" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  local seconds=$((SECONDS - t0)) log="$logs/$name.log" result counts
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    result="TIMED OUT"
    end_leftovers
  elif [ $rc = 0 ]; then
    result="passed"
  else
    result="FAILED (exit $rc)"
  fi
  local errors
  errors=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  [ "$errors" -gt 0 ] && result="FAILED ($errors memcheck errors)"
  [ "$result" = passed ] || failed_suites=$((failed_suites + 1))
  counts=$(awk '/^\[  PASSED  \] [0-9]+ test/ {p += $4} /^\[  SKIPPED \] [0-9]+ test/ {s += $4}
                /^\[  FAILED  \] [0-9]+ test/ {f += $4}
                END {if (p + s + f > 0) printf "%d passed, %d skipped, %d failed", p, s, f}' "$log")
  echo "| $name | $result | ${counts:--} | $seconds | $limit |" >>"$summary"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | grep -v ' ms)$' | sort -u | sed "s/^\[  FAILED  \] /    $name: /" >>"$logs/failed.txt"
  grep -E '^\[  SKIPPED \] [A-Za-z]' "$log" | grep -v ' ms)$' | sort -u | sed "s/^\[  SKIPPED \] /    $name: /" >>"$logs/skipped.txt"
  # gtest prints a skip's message on the line after "file:line: Skipped".
  grep -h -A1 ': Skipped$' "$log" | grep -v -e ': Skipped$' -e '^--$' | sort | uniq -c |
    sed "s/^ *\([0-9]*\) /    $name: \1 x /" >>"$logs/skipped.txt"
}

# only FILTER: sets `filter` to the suite's --gtest_filter argument (none for --full, which runs
# every test).
only() {
  filter=()
  [ "$mode" = full ] || filter=("--gtest_filter=$1")
}

# The tables' 2M-node graph is generated and partitioned while the suites run (CPU and disk
# only, 2.8 GB written: about 30 s that would otherwise come before the tables).
work="${BENCH_WORK:-/tmp/tessel-gpu-bench}"
graph_pid=""
if [ "$mode" != cpu ]; then
  mkdir -p "$work"
  TESSEL="$(bin tessel)" WORK="$work" PREPARE_ONLY=1 nice -n 10 timeout 300 bash "$bench/gpu.sh" \
    >"$logs/graph.log" 2>&1 &
  graph_pid=$!
fi

export GTEST_COLOR=no OMP_NUM_THREADS=4
mpi=("$mpirun_bin" --oversubscribe --bind-to none)
[ "$mode" = cpu ] || export CUDA_MODULE_LOADING=LAZY

# ---- The suites, at P = 1 and 2 on one GPU (the MPI data plane through pinned memory). -------
# Each filter keeps the tests that take a GPU path; the sizes are those of the tests (a few
# thousand nodes, 3 or 10 epochs): already the smallest that take every path (two parts with
# halos, more steps per epoch than the prefetch depth, frontiers past a block's shared memory),
# and so small that a GPU run is launch time, not arithmetic: what --quick cuts is launches.
#
# core_test: device tensors, the caching allocator, stream scopes and blocks crossing streams;
#   the rest of the suite is host-only and runs in CI.
only 'TensorDevice.*:Tensor.CudaDeviceRefusedWithoutGpu'
run_suite core_test 40 "$(bin core_test)" "${filter[@]}"
# kernels_test: every op's CUDA twin against its CPU twin (Backends: SpMM variants, dropout, the
#   row codecs, GRU/LSTM, link head, losses, Adam) and the kernel context; the CPU-only tests are
#   CI's.
only 'Backends.*:Context.*'
run_suite kernels_test 60 "$(bin kernels_test)" "${filter[@]}"
# nn_test: a model's forward, backward and step on the device against the CPU.
only 'Model.CudaDeviceRunsWhereAGpuIsPresent'
run_suite nn_test 30 "$(bin nn_test)" "${filter[@]}"
# sampling_test: the CUDA sampler, block builder, frontier ops (with their edge shapes) and the
#   tiered feature store against their CPU twins.
only '*Cuda*:DeviceFeatureStoreTest.*'
run_suite sampling_test 60 "$(bin sampling_test)" "${filter[@]}"
# data_plane_test: MPI with host tensors, MPI staging device tensors through pinned buffers, NCCL
#   at P = 1 (at P = 2 one GPU cannot hold two NCCL ranks: skipped with a message). Whole suite.
for np in 1 2; do
  run_suite data_plane_test.np$np 30 "${mpi[@]}" -np $np "$(bin data_plane_test)"
done
# gpu_sampler_test: the distributed sampler on the GPU (device and pinned graph, device blocks,
#   routing at P = 2, the feature store's tiers) against the CPU, bit for bit. Whole suite: 2 tests,
#   a 2000-node graph, 6 steps.
for np in 1 2; do
  run_suite gpu_sampler_test.np$np 45 "${mpi[@]}" -np $np "$(bin gpu_sampler_test)"
done
# gpu_train_test: full batch, GCN and SAGE with dropout on a 3000-node graph, 10 epochs, cuda
#   against cpu at P = 1 and 2 (8 runs), the default device, a killed rank (2 runs). Left out:
#   Cora (8 runs of the same code on a real graph; --full runs it).
only 'GpuTrain.*-GpuTrain.CoraMatchesCpu'
run_suite gpu_train_test 60 "$(bin gpu_train_test)" "${filter[@]}"
# gpu_sampled_test: sampled SAGE on a 3000-node graph, 3 epochs: cuda against cpu at P = 1 and 2,
#   device vs host routing, every cache policy and admission, prefetch 0 vs 2 on the side stream
#   at P = 1 (NCCL) and 2 (MPI staged) with the allocator check (17 runs). Left out: Cora (4 runs
#   of the same paths) and the pinned graph end to end (2 runs; gpu_sampler_test samples from a
#   pinned graph bit for bit at P = 1 and 2).
only 'GpuSampled.*-GpuSampled.CoraMatchesCpu:GpuSampled.PinnedGraphSamplesWhatDeviceGraphSamples'
run_suite gpu_sampled_test 90 "$(bin gpu_sampled_test)" "${filter[@]}"
# gpu_dynamic_test: 7 of the 36 (task, model, layout, P) cases: at P = 2 each model on both
#   layouts and each task on both layouts (6), at P = 1 one (evolvegcn-o, link prediction, the
#   snapshot layout's transposition to itself); --device auto (1 run). Each task's loss or head
#   and each model's cells are kernels of their own, so the (task, model) pairs left out add no
#   path; nor do england_covid (gcn-gru on a real graph, 8 runs) and the other 29 cases.
dynamic_cases="node_regression_gcn_gru_snapshot_p2:node_regression_gcn_lstm_vertex_p2"
dynamic_cases+=":node_classification_evolvegcn_o_snapshot_p2:node_classification_gcn_gru_vertex_p2"
dynamic_cases+=":link_prediction_gcn_lstm_snapshot_p2:link_prediction_evolvegcn_o_vertex_p2"
dynamic_cases+=":link_prediction_evolvegcn_o_snapshot_p1"
only "Tasks/GpuDynamicCase.MatchesCpu/${dynamic_cases//:/:Tasks/GpuDynamicCase.MatchesCpu/}:GpuDynamic.AutoPicksTheGpu:GpuDynamic.NcclWithOneGpuPerRankMatchesCpu"
run_suite gpu_dynamic_test 75 "$(bin gpu_dynamic_test)" "${filter[@]}"

# ---- compute-sanitizer memcheck on the sampling suites' smallest cases. ----------------------
# TESSEL_DEVICE_CACHE=0: every tensor is its own cudaMalloc of its exact size, so an access past
# a tensor's end is past an allocation's, which memcheck reports. The sampling_test cases are
# the CUDA twins on a few thousand ids (the frontier ops' 2^20-node edge shapes only with --full);
# gpu_sampler_test at P = 2 (and 1 with --full) is the distributed sampler and the feature store
# end to end.
if [ "$mode" != cpu ]; then
  if [ -z "$compute_sanitizer" ]; then
    echo "| memcheck | NOT RUN (no compute-sanitizer on this machine) | | 0 | |" >>"$summary"
    failed_suites=$((failed_suites + 1))
  else
    memcheck=("$compute_sanitizer" --tool memcheck --error-exitcode 86)
    # Options of some versions only (the children the tests spawn, tessel convert and partition,
    # use no GPU: not followed where the version can say so).
    sanitizer_help=$("$compute_sanitizer" --help 2>&1 || true)
    grep -q -- '--print-limit' <<<"$sanitizer_help" && memcheck+=(--print-limit 20)
    grep -q -- '--target-processes' <<<"$sanitizer_help" &&
      memcheck+=(--target-processes application-only)
    memcheck_cases='NeighborSamplerBackends.CudaMatchesCpu:BlockBuilder.CudaTwinBuildsTheCpuBlocks:FrontierOps.CudaTwinsMatchTheCpu:DeviceFeatureStoreTest.*'
    [ "$mode" = full ] && memcheck_cases='*Cuda*:DeviceFeatureStoreTest.*'
    TESSEL_DEVICE_CACHE=0 run_suite memcheck.sampling_test 60 "${memcheck[@]}" \
      "$(bin sampling_test)" --gtest_filter="$memcheck_cases"
    memcheck_ranks="2" # routing on the device and the network tier: P = 1's paths and more
    [ "$mode" = full ] && memcheck_ranks="1 2"
    for np in $memcheck_ranks; do
      TESSEL_DEVICE_CACHE=0 run_suite memcheck.gpu_sampler_test.np$np 60 "${mpi[@]}" -np $np \
        "${memcheck[@]}" "$(bin gpu_sampler_test)"
    done
  fi
fi

# ---- --cpu: the README's Cora example, --device cpu, at P = 1 and 2. --------------------------
# Arguments: tessel, the datasets folder, mpirun.
cora_example='set -e
work=$(mktemp -d)
trap "rm -rf $work" EXIT
"$1" convert ogb "$2/cora" "$work/cora.h5"
for np in 1 2; do
  "$1" partition "$work/cora.h5" --parts $np --out "$work/cora-p$np"
  "$3" --oversubscribe --bind-to none -np $np "$1" train "$work/cora-p$np" --device cpu \
    --model sage --hidden 16 --dropout 0.5 --lr 0.01 --weight-decay 5e-4 \
    --normalize-features row --epochs 200 --eval-every 20
  "$3" --oversubscribe --bind-to none -np $np "$1" train "$work/cora-p$np" --device cpu \
    --mode sampled --model sage --fanouts 10,10 --batch-size 32 --weight-decay 5e-4 \
    --normalize-features row --epochs 20 --eval-every 10
done'
if [ "$mode" = cpu ]; then
  OMP_NUM_THREADS=1 run_suite cora_example 120 bash -c "$cora_example" cora "$(bin tessel)" "$data" "$mpirun_bin"
  # Every run must learn Cora: test accuracy at the best epoch above 0.7, at both P, both modes.
  if [ -f "$logs/cora_example.log" ] && ! awk '/^best valid acc/ {n++; if ($NF + 0 < 0.7) bad = 1} END {exit !(n == 4 && !bad)}' \
    "$logs/cora_example.log"; then
    echo "| cora_example accuracy | FAILED (not 4 runs with test accuracy above 0.7) | | | |" >>"$summary"
    failed_suites=$((failed_suites + 1))
  fi
  grep -s '^best valid acc' "$logs/cora_example.log" | sed 's/^/    /' >"$logs/cora.txt"
fi

# ---- The tables: full batch and sampled on the 2M-node graph, against PyG. -------------------
if [ "$mode" != cpu ]; then
  [ -n "$graph_pid" ] && wait "$graph_pid"
  bench_env=(TESSEL="$(bin tessel)" SPMM_BENCH="$(bin tessel_bench_gpu_spmm)"
    FRONTIER_BENCH="$(bin tessel_bench_frontier_ops)" MPIRUN="$mpirun_bin" WORK="$work")
  # --quick: no kernel benchmarks, no products-scale graph; on the 2M-node graph (25 uniform
  # in-neighbours, 128 features) GCN 2x128 full batch (13 epochs) and sampled SAGE 3x128 (3
  # epochs of 20 steps, --prefetch 1, the default), each beside PyG. --full adds SAGE full
  # batch and --prefetch 0.
  [ "$mode" = quick ] &&
    bench_env+=(SKIP_KERNEL_BENCH=1 SKIP_PRODUCTS=1 FULLBATCH_MODELS=gcn SAMPLED_PREFETCH=1)
  if [ "$budget" -gt 0 ]; then
    bench_budget=$((budget - (SECONDS - start) - reserve))
  else
    bench_budget=150 # four times over with --full: gpu.sh's BUDGET_S stops it within 600 s
  fi
  bench_seconds=$bench_budget
  [ "$mode" = full ] && bench_seconds=$((bench_budget * 4 - 15))
  run_suite tables "$bench_budget" env "${bench_env[@]}" BUDGET_S="$bench_seconds" bash "$bench/gpu.sh"
  # gpu.sh goes on past a run that fails, writing "failed" in its table: so does the summary.
  if grep -q 'failed' "$work/gpu-bench.md" 2>/dev/null && grep -q '^| tables | passed' "$summary"; then
    sed -i 's/^| tables | passed /| tables | FAILED (a run failed: see the tables) /' "$summary"
    failed_suites=$((failed_suites + 1))
  fi
  (cd "$work" 2>/dev/null && find . -maxdepth 1 \( -name '*.jsonl' -o -name '*.md' -o -name '*.txt' \) \
    -print0 | tar -cf "$logs/bench-metrics.tar" --null -T -) 2>/dev/null
fi

{
  echo
  echo "total: $((SECONDS - start)) s of wall time; $failed_suites suite(s) not passed"
  echo
  echo "failed tests:"; cat "$logs/failed.txt"
  echo "skipped tests (and why):"; cat "$logs/skipped.txt"
  [ -f "$logs/cora.txt" ] && { echo "Cora example (best epoch of each run):"; cat "$logs/cora.txt"; }
  if [ "$mode" != cpu ] && [ -f "$work/gpu-bench.md" ]; then echo; cat "$work/gpu-bench.md"; fi
} >>"$summary"
tar -C "$(dirname "$logs")" -czf "$out/logs.tgz" logs 2>/dev/null
cat "$summary"
[ "$failed_suites" = 0 ]
