#!/usr/bin/env bash
# GPU check anyone can run: builds Tessel with CUDA, runs the GPU-labelled tests (`ctest -L gpu`)
# and scripts/bench/gpu.sh, and prints one summary table. About 8 minutes on one GPU.
#
#   scripts/gpu-check.sh [--arch 90] [--build-dir build-gpu] [--skip-build]
#   scripts/gpu-check.sh --bundle DIR [--arch 90] [--build-dir build-gpu]
#
# --arch: CUDA architecture (default: read from nvidia-smi's compute capability, else 90).
# --bundle DIR: instead of running, writes DIR (and DIR.tar.xz) for a GPU machine that has the
# NVIDIA driver, the CUDA toolkit's runtime libraries, Python and CMake but not Tessel's build
# dependencies: the tessel binary, the GPU test executables and benchmark, their non-system
# shared libraries (not the CUDA ones: the target's are used), Open MPI relocated under
# DIR/ompi (OPAL_PREFIX), the Cora and england_covid files when present, and DIR/run.sh, which runs the same
# tests and benchmark there and writes its logs and summary to $OUT (or DIR/out).
# Environment for the benchmark: see scripts/bench/gpu.sh (NODES, DEGREE, FEAT, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
arch="" build="build-gpu" bundle="" skip_build=0
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --bundle) bundle="$2"; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$arch" ]; then
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d . || true)
  [ -n "$arch" ] || arch=90
fi
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
gpu_tests="core_test kernels_test nn_test sampling_test data_plane_test gpu_train_test gpu_sampled_test gpu_sampler_test gpu_dynamic_test"

if [ "$skip_build" = 0 ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSEL_WITH_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" "${launcher[@]}" >/dev/null
  cmake --build "$build" -j "$(nproc)" --target tessel tessel_bench_gpu_spmm tessel_bench_frontier_ops $gpu_tests
fi

if [ -n "$bundle" ]; then
  rm -rf "$bundle"
  mkdir -p "$bundle/tree/src/cli" "$bundle/tree/kernels" "$bundle/tree/sampling" "$bundle/tree/tests" "$bundle/lib" \
    "$bundle/scripts/bench" "$bundle/data"
  cp "$build/src/cli/tessel" "$bundle/tree/src/cli/"
  cp "$build/src/kernels/tessel_bench_gpu_spmm" "$bundle/tree/kernels/"
  cp "$build/src/sampling/tessel_bench_frontier_ops" "$bundle/tree/sampling/"
  for t in $gpu_tests; do cp "$(find "$build/tests" -name "$t" -type f -perm -u+x | head -1)" "$bundle/tree/tests/"; done
  cp scripts/bench/gpu.sh scripts/bench/pyg_fullbatch.py "$bundle/scripts/bench/"
  cp -r datasets/samples/cora datasets/samples/england_covid "$bundle/data/"
  # Open MPI (and PMIx) with their install layout, for OPAL_PREFIX relocation.
  ompi_lib=$(dirname "$(ompi_info --path libdir --parsable | cut -d: -f3)")  # .../openmpi
  for d in "$ompi_lib" "$(dirname "$ompi_lib")/pmix2" /usr/share/openmpi /usr/share/pmix /etc/openmpi; do
    [ -e "$d" ] && mkdir -p "$bundle/ompi$(dirname "$d")" && cp -a "$d" "$bundle/ompi$(dirname "$d")/"
  done
  mkdir -p "$bundle/ompi/usr/bin"
  cp "$(readlink -f "$(command -v mpirun)")" "$bundle/ompi/usr/bin/mpirun"
  # Shared libraries: everything the executables and MPI plugins need, but not the C runtime
  # (the target's is newer) and not CUDA's (the target's driver and toolkit are used).
  skip='^(libc|libm|libdl|libpthread|librt|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcusparse|libnccl|libnvidia|libnvJitLink)\.so'
  # MPI's plugins that need more (InfiniBand, UCX, OpenCL, ...) are left to fail to load there:
  # a single-node run uses shared memory and TCP.
  { find "$bundle/tree" -type f -perm -u+x; echo "$bundle/ompi/usr/bin/mpirun";
    find "$bundle/ompi" -name '*.so*' -type f | while read -r plugin; do
      ldd "$plugin" 2>/dev/null | grep -qE "lib(ucp|ucs|uct|ibverbs|fabric|psm|OpenCL|cuda|jvm|xml2|X11|numa)" || echo "$plugin"
    done; } |
    xargs -r ldd 2>/dev/null | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
      base=$(basename "$lib")
      [[ "$base" =~ $skip ]] && continue
      case "$lib" in "$bundle"/*) continue ;; esac
      cp -L "$lib" "$bundle/lib/$base"
    done
  cat >"$bundle/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs Tessel's GPU tests and benchmark from this bundle. $OUT (default: DIR/out) receives
# summary.md (one line per suite, failed tests, the benchmark table), env.log and logs.tgz.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$here/out}"
logs="$(mktemp -d)/logs"
mkdir -p "$out" "$logs"
ompi="$here/ompi/usr"
ompi_lib=$(find "$ompi/lib" -maxdepth 2 -type d -name openmpi | head -1)
export OPAL_PREFIX="$ompi" OPAL_EXEC_PREFIX="$ompi" OPAL_BINDIR="$ompi/bin" \
  OPAL_LIBDIR="$ompi_lib/lib" OPAL_PKGLIBDIR="$(find "$ompi_lib/lib" -maxdepth 1 -type d -name 'openmpi*' | head -1)" \
  OPAL_DATADIR="$ompi/share" OPAL_PKGDATADIR="$ompi/share/openmpi" OPAL_SYSCONFDIR="$here/ompi/etc/openmpi" \
  PMIX_INSTALL_PREFIX="$(dirname "$ompi_lib")/pmix2" \
  OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 \
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
  OMPI_MCA_rmaps_base_oversubscribe=1
# PMIx looks for its plugins only where it was installed: on a machine without that folder,
# point it at the bundle's copy (root only; the path is Debian's).
pmix_home="$(dirname "$ompi_lib")/pmix2"
if [ ! -e /usr/lib/x86_64-linux-gnu/pmix2 ] && [ -w / ]; then
  mkdir -p /usr/lib/x86_64-linux-gnu && ln -s "$pmix_home" /usr/lib/x86_64-linux-gnu/pmix2
fi
# CUDA libraries of this machine: the toolkit's, else the ones Python's CUDA wheels carry.
cuda_libs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && cuda_libs="$cuda_libs:$d"; done
for d in $(python3 -c "import nvidia, os; print(' '.join(os.path.join(p, q, 'lib') for p in nvidia.__path__ for q in os.listdir(p)))" 2>/dev/null); do
  [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
done
export LD_LIBRARY_PATH="$here/lib:$ompi_lib/lib:$(dirname "$ompi_lib")/pmix2/lib${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$ompi/bin:$PATH"
export TESSEL_TEST_BINARY_DIR="$here/tree" TESSEL_TEST_MPIEXEC="$ompi/bin/mpirun"
export TESSEL_SAMPLE_DATASETS="$here/data"
cd "$here"
{
  echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv 2>&1
  echo "== missing libraries"; ldd tree/src/cli/tessel tree/tests/* tree/kernels/* tree/sampling/* | grep "not found" | sort -u
  echo "== libraries used"; ldd tree/src/cli/tessel | grep -E "nccl|cublas|cusparse|cudart|mpi|gomp|openblas"
  echo "== mpirun"; "$ompi/bin/mpirun" --version 2>&1 | head -2
} >"$out/env.log" 2>&1
summary="$out/summary.md"
echo "| suite | result | tests | seconds |" >"$summary"
echo "|---|---|---|---|" >>"$summary"
save_logs() { tar -C "$(dirname "$logs")" -czf "$out/logs.tgz" logs 2>/dev/null; }
run_suite() {  # name command...
  local name=$1; shift
  local start=$SECONDS
  timeout "${SUITE_TIMEOUT:-240}" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  local counts
  counts=$(grep -E "^\[ *(PASSED|FAILED|SKIPPED) *\] [0-9]+ tests?" "$logs/$name.log" | sed -E 's/^\[ *([A-Z]+) *\] ([0-9]+) tests?.*/\1 \2/' | sort | uniq -c | awk '{printf "%s %s (x%s) ", $2, $3, $1}')
  echo "| $name | $([ $rc = 0 ] && echo pass || echo "FAIL rc=$rc") | ${counts:-see log} | $((SECONDS - start)) |" >>"$summary"
  grep -E "^\[  FAILED  \] [A-Za-z]" "$logs/$name.log" | grep -v " ms)$" | sort -u | sed "s/^/    $name: /" >>"$out/failures.txt"
  grep -E "^\[ *SKIPPED *\] [A-Za-z]" "$logs/$name.log" | grep -v " ms)$" | sort -u | sed "s/^/    $name: /" >>"$out/skipped.txt"
  save_logs
}
: >"$out/failures.txt"; : >"$out/skipped.txt"
export OMP_NUM_THREADS=4 GTEST_COLOR=no
mpi="$ompi/bin/mpirun --oversubscribe --bind-to none"
if [ "${ONLY_BENCH:-0}" != 1 ]; then
  for t in core_test kernels_test nn_test sampling_test; do run_suite "$t" "tree/tests/$t"; done
  run_suite data_plane_test.np1 $mpi -np 1 tree/tests/data_plane_test
  run_suite data_plane_test.np2 $mpi -np 2 tree/tests/data_plane_test
  SUITE_TIMEOUT=300 run_suite gpu_train_test tree/tests/gpu_train_test
  run_suite gpu_sampler_test.np1 $mpi -np 1 tree/tests/gpu_sampler_test
  run_suite gpu_sampler_test.np2 $mpi -np 2 tree/tests/gpu_sampler_test
  # Two more runs of 3 epochs than before: prefetch 0 and 2 on the device-resident path at P = 1.
  SUITE_TIMEOUT=360 run_suite gpu_sampled_test tree/tests/gpu_sampled_test
  SUITE_TIMEOUT=420 run_suite gpu_dynamic_test tree/tests/gpu_dynamic_test
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  start=$SECONDS
  work="${BENCH_WORK:-/tmp/tessel-bench-gpu}"
  TESSEL="$here/tree/src/cli/tessel" SPMM_BENCH="$here/tree/kernels/tessel_bench_gpu_spmm" \
    FRONTIER_BENCH="$here/tree/sampling/tessel_bench_frontier_ops" MPIRUN="$ompi/bin/mpirun" WORK="$work" \
    timeout "${BENCH_TIMEOUT:-300}" bash scripts/bench/gpu.sh >"$out/bench.log" 2>&1
  echo "| bench | rc=$? | see the tables below | $((SECONDS - start)) |" >>"$summary"
  [ -f "$work/gpu-bench.md" ] && { echo; cat "$work/gpu-bench.md"; } >>"$summary"
fi
# NSYS=1: where Nsight Systems is installed, the kernel time of 6 epochs of each model on the
# benchmark's graph (nsys stats, per kernel), for finding where an epoch goes.
nsys_bin=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1 || true)
parts=$(ls -d "${BENCH_WORK:-/tmp/tessel-bench-gpu}"/uniform-*-p1 2>/dev/null | head -1)
if [ "${NSYS:-0}" = 1 ] && [ -n "$nsys_bin" ] && [ -n "$parts" ]; then
  for model in gcn sage; do
    timeout 120 "$nsys_bin" profile -o "$(dirname "$logs")/$model" --force-overwrite true \
      $mpi -np 1 tree/src/cli/tessel train "$parts" --mode full --device cuda --model "$model" \
      --layers 2 --hidden 128 --dropout 0.5 --epochs 6 --eval-every 1000 --quiet >"$logs/nsys-$model.log" 2>&1
    { echo "== $model: GPU kernels and copies over 6 epochs (nsys)"
      "$nsys_bin" stats --report cuda_gpu_kern_sum --report cuda_gpu_mem_time_sum --format csv \
        "$(dirname "$logs")/$model.nsys-rep" 2>&1 | head -45; } >>"$out/profile.txt"
  done
  save_logs
elif [ "${NSYS:-0}" = 1 ]; then
  echo "NSYS=1: no nsys found (or no benchmark graph): no profile" >"$out/profile.txt"
fi
{ echo; echo "failed tests:"; cat "$out/failures.txt"; echo "skipped tests:"; cat "$out/skipped.txt"; } >>"$summary"
rm -f "$out/failures.txt" "$out/skipped.txt"
save_logs
cat "$out/env.log" "$summary"
RUN
  chmod +x "$bundle/run.sh"
  tar -C "$(dirname "$bundle")" -cJf "$bundle.tar.xz" "$(basename "$bundle")"
  du -sh "$bundle" "$bundle.tar.xz"
  exit 0
fi

# Run here.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log="$build/gpu-check"
mkdir -p "$log"
start=$SECONDS
(cd "$build" && ctest -L gpu --output-on-failure --timeout 600) | tee "$log/ctest.log" || true
tests_s=$((SECONDS - start))
TESSEL="$build/src/cli/tessel" SPMM_BENCH="$build/src/kernels/tessel_bench_gpu_spmm" \
  FRONTIER_BENCH="$build/src/sampling/tessel_bench_frontier_ops" WORK="$build/bench-gpu" bash scripts/bench/gpu.sh | tee "$log/bench.log" || true
echo
echo "== GPU check summary (sm_$arch)"
echo "| part | result |"
echo "|---|---|"
echo "| ctest -L gpu | $(grep -E "tests passed|tests failed" "$log/ctest.log" | tail -1) ($tests_s s) |"
echo
cat "$build/bench-gpu/gpu-bench.md" 2>/dev/null || echo "(benchmark did not finish: see $log/bench.log)"
