#!/usr/bin/env bash
# The GPU check's bundle is self-contained. Packed from this CUDA build (scripts/gpu-check.sh
# --bundle DIR --skip-build --no-archive, no rebuild), every ELF file in it resolves, by ldd under
# the environment its run.sh sets, Open MPI, PMIx, HDF5, METIS, oneDNN, OpenBLAS, ISA-L and fmt
# inside the bundle and nothing outside it but the C/C++ runtime and CUDA's driver and libraries;
# then, in a mount namespace where this machine's copy of every library the bundle carries (and
# Open MPI's and PMIx's folders, and mpirun) is an empty file or folder, `run.sh --cpu` runs the
# GPU suites' quick filters (their GPU tests skip here, saying so) and the README's Cora example
# with --device cpu at P = 1 and 2 from the bundle, and must pass.
#
#   gpu_bundle_test.sh SOURCE_DIR BUILD_DIR
#
# Exit code 77 (ctest: skipped) where a mount namespace cannot be made (not root, a container
# without the privilege), with the reason.
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/tessel-bundle-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
b="$work/bundle"
t0=$SECONDS
bash "$src/scripts/gpu-check.sh" --bundle "$b" --build-dir "$build" --skip-build --no-archive
echo "packed in $((SECONDS - t0)) s"

# ---- ldd: what every ELF file of the bundle resolves to. ------------------------------------
# Outside the bundle only the C/C++ runtime (the machine's own) and CUDA's driver and libraries
# (the GPU machine's toolkit or Python wheels); those may also be missing here.
outside_ok='^(linux-vdso|libc|libm|libdl|libpthread|librt|libutil|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcusparse|libnccl|libnvidia-[a-z]*|libnvJitLink|libnvrtc|libcurand)\.so'
t0=$SECONDS
failures=0 files=0
declare -A inside
elf=()
while IFS= read -r -d '' f; do
  [ "$(head -c 4 "$f" | tr -d '\0' | tail -c 3)" = ELF ] && elf+=("$f")
done < <(find "$b" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
# One run.sh for all of them: "== FILE" and then ldd's lines for it.
while read -r name arrow path _; do
  if [ "$name" = "==" ]; then
    f=$arrow
    files=$((files + 1))
    continue
  fi
  [ "$arrow" = "=>" ] || continue # the vdso and the loader itself
  if [ "$path" = not ]; then
    [[ "$name" =~ $outside_ok ]] && continue
    echo "FAIL: ${f#"$b"/} needs $name, found nowhere"
    failures=$((failures + 1))
  elif [[ "$path" == "$b"/* ]]; then
    inside[${name%%.so*}]=1
  elif ! [[ "$name" =~ $outside_ok ]]; then
    echo "FAIL: ${f#"$b"/} resolves $name outside the bundle: $path"
    failures=$((failures + 1))
  fi
done < <("$b/run.sh" --exec bash -c 'for f; do echo "== $f"; ldd "$f" 2>&1; done' ldd "${elf[@]}")
[ "$files" = ${#elf[@]} ] || { echo "FAIL: ldd ran on $files of ${#elf[@]} files"; failures=$((failures + 1)); }
for family in libmpi libopen-pal libopen-rte libpmix libhdf5 libmetis libdnnl libopenblas libisal libfmt; do
  found=0
  for lib in "${!inside[@]}"; do [[ "$lib" == "$family"* ]] && found=1; done
  if [ "$found" = 0 ]; then
    echo "FAIL: no file of the bundle resolves $family inside it"
    failures=$((failures + 1))
  fi
done
echo "ldd: $files ELF files checked in $((SECONDS - t0)) s, $failures failure(s); inside the bundle: ${!inside[*]}"
[ "$failures" = 0 ] || exit 1

# ---- run.sh --cpu with this machine's copies hidden. -----------------------------------------
if ! unshare -m --propagation private true 2>/dev/null; then
  echo "skipped: cannot make a mount namespace here (unshare -m needs root): run.sh --cpu not run"
  exit 77
fi
cat >"$work/hidden.sh" <<'HIDDEN'
# Inside the namespace: the bundle's libraries' originals become empty files, Open MPI's and
# PMIx's folders and mpirun empty, so that anything reaching for them fails; then run.sh --cpu.
set -euo pipefail
b=$1 out=$2
empty_dir=$(mktemp -d) empty_file=$(mktemp)
mount_deps=$(ldd "$(command -v mount)" | awk '/=> \// {print $1}')
hidden=0
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi \
  /usr/share/pmix /etc/openmpi /usr/lib/x86_64-linux-gnu/hwloc; do
  [ -d "$d" ] && mount --bind "$empty_dir" "$d" && hidden=$((hidden + 1))
done
for f in "$b"/lib/*; do
  lib=$(basename "$f")
  if grep -qx "$lib" <<<"$mount_deps"; then
    echo "not hidden (mount itself needs it): $lib"
    continue
  fi
  for dir in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib /lib; do
    if [ -e "$dir/$lib" ] && [ -s "$(readlink -f "$dir/$lib")" ]; then
      mount --bind "$empty_file" "$(readlink -f "$dir/$lib")"
      hidden=$((hidden + 1))
    fi
  done
done
system_mpirun=$(readlink -f "$(command -v mpirun || echo /usr/bin/mpirun)")
[ -f "$system_mpirun" ] && mount --bind "$empty_file" "$system_mpirun" && hidden=$((hidden + 1))
echo "hidden: $hidden files and folders of this machine"
# The hiding works: the machine's own Open MPI no longer starts.
if mpirun --version >/dev/null 2>&1; then
  echo "FAIL: this machine's mpirun still runs inside the namespace"
  exit 1
fi
"$b/run.sh" --cpu --out "$out"
HIDDEN
t0=$SECONDS
rc=0
unshare -m --propagation private bash "$work/hidden.sh" "$b" "$work/out" || rc=$?
echo "run.sh --cpu with the machine's copies hidden: exit $rc in $((SECONDS - t0)) s"
[ "$rc" = 0 ] || exit 1
# Every suite ran and passed, and so did the Cora example.
for suite in core_test kernels_test nn_test sampling_test data_plane_test.np1 data_plane_test.np2 \
  gpu_sampler_test.np1 gpu_sampler_test.np2 gpu_train_test gpu_sampled_test gpu_dynamic_test \
  cora_example; do
  if ! grep -q "^| $suite | passed |" "$work/out/summary.md"; then
    echo "FAIL: $suite did not pass from the bundle"
    exit 1
  fi
done
echo "gpu bundle: self-contained"
