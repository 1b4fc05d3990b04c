#!/usr/bin/env bash
# GPU check: builds Tessel with CUDA and runs scripts/gpu-run.sh (the GPU suites' parity tests at
# P = 1 and 2, compute-sanitizer's memcheck on the sampling suites, the 2M-node tables against
# PyG), or packs a self-contained bundle that runs the same on a GPU machine without Tessel's
# build dependencies.
#
#   scripts/gpu-check.sh [--quick | --full | --cpu] [--arch 90] [--build-dir build-gpu] [--skip-build]
#   scripts/gpu-check.sh --bundle DIR [--arch 90] [--build-dir build-gpu] [--skip-build] [--no-archive]
#
# --quick (default), --full, --cpu: what gpu-run.sh runs (see its --help): --quick at most
#   4 minutes on one H100 or H200 (estimated 160 to 225 s; docs/gpu.md says how), --full the
#   complete run (12 to 15 minutes), --cpu the same suites on the CPU and the Cora example.
# --arch: CUDA architecture (default: nvidia-smi's compute capability, else 90).
# --skip-build: use the build folder as it is (scripts/test.sh's build/ with tests, say).
# --bundle DIR: writes DIR and DIR.tar.xz (at most 64 MiB, or it fails) for a machine with the
#   NVIDIA driver and CUDA's libraries (cuBLAS, cuSPARSE, NCCL: the toolkit's, or those of
#   Python's CUDA wheels) but none of Tessel's other dependencies: the tessel binary, the GPU test
#   executables and the GPU benchmarks (stripped, at their build-tree paths under DIR/tree), every
#   shared library they need but the C/C++ runtime and CUDA's (DIR/lib: Open MPI's, PMIx's, HDF5,
#   METIS, oneDNN, OpenBLAS, ISA-L, fmt, ...), Open MPI and PMIx relocated under DIR/ompi without
#   the plugins for networks a single machine does not have (InfiniBand, UCX, libfabric, PSM),
#   Cora and england_covid, the benchmark scripts, and DIR/run.sh (gpu-run.sh):
#   `DIR/run.sh --quick|--full|--cpu`. --no-archive leaves out DIR.tar.xz (what the bundle test
#   in CI does: it checks the folder).
set -euo pipefail
cd "$(dirname "$0")/.."
arch="" build="build-gpu" bundle="" skip_build=0 mode=quick archive=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick | --full | --cpu) mode="${1#--}"; shift ;;
    --arch) arch="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --bundle) bundle="$2"; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --no-archive) archive=0; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$arch" ]; then
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d . || true)
  [ -n "$arch" ] || arch=90
fi
# The executables a GPU run needs: the GPU-labelled suites and the benchmarks of gpu.sh.
gpu_tests="core_test kernels_test nn_test sampling_test data_plane_test gpu_train_test gpu_sampled_test gpu_sampler_test gpu_dynamic_test"
targets="tessel tessel_bench_gpu_spmm tessel_bench_frontier_ops $gpu_tests"

if [ "$skip_build" = 0 ]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  launcher=()
  command -v ccache >/dev/null &&
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSEL_WITH_CUDA=ON -DTESSEL_BUILD_TESTS=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" "${launcher[@]}" >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$build" -j "${TESSEL_JOBS:-$(nproc)}" --target $targets
fi
build="$(cd "$build" && pwd)"

# find_exe NAME: the executable NAME in the build tree, wherever the layout puts it: one linked
# since the last configure if there is one (an older layout's may linger), the shallowest (a
# bundle packed inside the build folder holds copies deeper down).
find_exe() {
  local path
  path=$(find "$build" -name "$1" -type f -perm -u+x -not -path '*/CMakeFiles/*' \
    -newer "$build/CMakeCache.txt" -printf '%d %p\n' | sort -n | head -1 | cut -d' ' -f2-)
  [ -n "$path" ] || path=$(find "$build" -name "$1" -type f -perm -u+x -not -path '*/CMakeFiles/*' \
    -printf '%d %p\n' | sort -n | head -1 | cut -d' ' -f2-)
  [ -n "$path" ] || { echo "gpu-check.sh: $1 not found under $build (build it first)" >&2; exit 1; }
  echo "$path"
}

if [ -z "$bundle" ]; then
  exec env TESSEL_GPU_BUILD="$build" bash scripts/gpu-run.sh "--$mode"
fi

# ---- The bundle. -----------------------------------------------------------------------------
mkdir -p "$(dirname "$bundle")"
bundle="$(cd "$(dirname "$bundle")" && pwd)/$(basename "$bundle")"
rm -rf "$bundle" "$bundle.tar.xz"
mkdir -p "$bundle/tree" "$bundle/lib" "$bundle/scripts/bench" "$bundle/data"
# Executables at their build-tree paths: the tests find tessel where the build put it.
for t in $targets; do
  exe=$(find_exe "$t")
  rel="${exe#"$build"/}"
  mkdir -p "$bundle/tree/$(dirname "$rel")"
  strip --strip-unneeded -o "$bundle/tree/$rel" "$exe"
done
cp scripts/gpu-run.sh "$bundle/run.sh"
chmod +x "$bundle/run.sh"
cp scripts/bench/gpu.sh scripts/bench/pyg_fullbatch.py scripts/bench/pyg_sampled.py "$bundle/scripts/bench/"
# The shipped datasets, wherever the source layout keeps them.
samples=$(find . -path ./build -prune -o -path './build-*' -prune -o -type d -name samples \
  -path '*datasets*' -print | sort | head -1)
cp -r "$samples/cora" "$samples/england_covid" "$bundle/data/"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)'), sm_$(grep -m1 '^CMAKE_CUDA_ARCHITECTURES:' "$build/CMakeCache.txt" | cut -d= -f2 | tr ';' ',') build of $(date -u +%F)" >"$bundle/BUNDLE"

# Open MPI and PMIx with their install layout, relocated by OPAL_PREFIX and PMIx's component path.
ompi_lib=$(dirname "$(ompi_info --path libdir --parsable | cut -d: -f3)") # .../openmpi
for d in "$ompi_lib" "$(dirname "$ompi_lib")/pmix2" /usr/share/openmpi /usr/share/pmix /etc/openmpi; do
  [ -e "$d" ] && mkdir -p "$bundle/ompi$(dirname "$d")" && cp -a "$d" "$bundle/ompi$(dirname "$d")/"
done
rm -rf "$bundle/ompi$ompi_lib/include" "$(dirname "$bundle/ompi$ompi_lib")/pmix2/include"
mkdir -p "$bundle/ompi/usr/bin"
cp "$(readlink -f "$(command -v mpirun)")" "$bundle/ompi/usr/bin/mpirun"
# Plugins for fabrics and tools one machine does not use (InfiniBand, UCX, libfabric, PSM, Java,
# OpenCL, CUDA-aware transports) would need libraries the bundle does not carry: they go, so
# that everything left resolves inside the bundle.
find "$bundle/ompi" -name '*.so*' \( -type f -o -type l \) | while read -r plugin; do
  needs=$(ldd "$plugin" 2>/dev/null || true) # whole, before grep: no early exit, no SIGPIPE
  if [ ! -e "$plugin" ] ||
    grep -qE 'lib(ucp|ucs|uct|ucm|ibverbs|rdmacm|fabric|psm|psm2|efa|OpenCL|cuda|jvm|java|mpi_java)[-._0-9]' <<<"$needs"; then
    rm -f "$plugin"
  fi
done
rm -f "$bundle"/ompi/usr/lib/*/openmpi/lib/libmpi_java.so* "$bundle"/ompi/usr/lib/*/openmpi/lib/openmpi*/mca_*java*

# Shared libraries: everything the executables and the plugins left need, but the C/C++ runtime
# (the machine's own is newer) and CUDA's (the machine's driver and toolkit are used).
runtime='^(libc|libm|libdl|libpthread|librt|libutil|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'
cuda='^(libcuda|libcudart|libcublas|libcublasLt|libcusparse|libnccl|libnvidia-[a-z]*|libnvJitLink|libnvrtc|libcurand)\.so'
{ find "$bundle/tree" -type f -perm -u+x; echo "$bundle/ompi/usr/bin/mpirun"; find "$bundle/ompi" -name '*.so*' -type f; } |
  xargs -r ldd 2>/dev/null | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  base=$(basename "$lib")
  [[ "$base" =~ $runtime || "$base" =~ $cuda ]] && continue
  case "$lib" in "$bundle"/*) continue ;; esac
  strip --strip-unneeded -o "$bundle/lib/$base" "$lib" 2>/dev/null || cp -L "$lib" "$bundle/lib/$base"
done
echo "bundle: $(find "$bundle/tree" -type f | wc -l) executables, $(ls "$bundle/lib" | wc -l) libraries, $(du -sh "$bundle" | cut -f1) unpacked"
if [ "$archive" = 1 ]; then
  XZ_OPT="-9 -T${TESSEL_JOBS:-$(nproc)}" tar -C "$(dirname "$bundle")" -cJf "$bundle.tar.xz" "$(basename "$bundle")"
  bytes=$(stat -c %s "$bundle.tar.xz")
  echo "bundle: $bundle.tar.xz, $((bytes / 1048576)) MiB ($bytes bytes)"
  if [ "$bytes" -gt $((64 * 1048576)) ]; then
    echo "gpu-check.sh: $bundle.tar.xz is over 64 MiB: a GPU machine's working tree takes 64 MiB in all" >&2
    exit 1
  fi
fi
