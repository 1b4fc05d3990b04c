#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz into build-fuzz/ (clang, ASan + UBSan) and runs
# each one for SECONDS (default 60) from its seed corpus, as many at once as there are cores.
# Exit code 0 iff no target found a crash, a leak, a timeout or an error other than InputError.
# A failing input is kept as build-fuzz/findings/<target>/crash-* (or leak-*, timeout-*, oom-*):
# fix the reader, then add the input to tests/fuzz/regressions/<target>/.
#   scripts/fuzz.sh [SECONDS]      TESSEL_FUZZ_TARGETS="npz store" limits the targets
# TESSEL_FUZZ_BUILD=DIR uses a build folder already configured with -DTESSEL_FUZZ=ON (CI's
# sanitizer build, which also builds the tests) instead of configuring build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build="${TESSEL_FUZZ_BUILD:-build-fuzz}"
targets=(${TESSEL_FUZZ_TARGETS:-ogb_csv npz pt store part checkpoint temporal_json temporal_edges manifest})
jobs="${TESSEL_JOBS:-$(nproc)}"

if [ -z "${TESSEL_FUZZ_BUILD:-}" ]; then
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSEL_WITH_CUDA=OFF \
    -DTESSEL_BUILD_TESTS=OFF -DTESSEL_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    "${launcher[@]}" >/dev/null
elif ! grep -q '^TESSEL_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "fuzz.sh: $build is not configured with -DTESSEL_FUZZ=ON" >&2
  exit 2
fi
cmake --build "$build" -j "$jobs" --target "${targets[@]/#/fuzz_}"

root="$PWD"
# The targets write their inputs under TMPDIR; keep that inside the build folder.
export TMPDIR="$root/$build/fuzz-tmp"
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"
# One thread per target: the targets run side by side, one per core.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# allocator_may_return_null: HDF5 handles a failed malloc (asked for by a corrupt length) as an
# error, as it does without ASan; C++ allocations that are too big still stop the target.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

# Who a sanitizer or libFuzzer report on stdin blames: "tessel" (a Tessel frame, or an error
# other than InputError escaped), "hdf5" (the first frame past the sanitizer's own is inside
# libhdf5: HDF5 1.10 overruns, hangs and leaks on some damaged files, in its own decoder, which
# Tessel cannot fix), or "unknown".
culprit() {
  awk '/instead of an InputError/ { print "tessel"; found = 1; exit }
       /^ +#[0-9]+ / {
         if ($0 ~ /libhdf5/) { print "hdf5"; found = 1; exit }
         if ($0 ~ /tessel::/) { print "tessel"; found = 1; exit }
       }
       END { if (!found) print "unknown" }'
}

run_target() {
  local t="$1"
  local bin="$build/tests/fuzz/fuzz_$t" work="$build/fuzz-corpus/$t" findings="$build/findings/$t"
  local log="$build/fuzz-$t.log"
  mkdir -p "$work" "$findings"
  # Fork mode: a crash or hang ends one child process, the next one carries on fuzzing, and every
  # failing input is kept for the triage below. New inputs go to the first folder (the build's
  # working corpus); the committed seeds and regressions are only read. -rss_limit_mb and the
  # malloc limit it implies: a reader that allocates what a small file cannot justify is a finding.
  "$bin" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$seconds" \
    -timeout=5 -rss_limit_mb=2048 -artifact_prefix="$findings/" \
    "$work" "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t" >"$log" 2>&1 || true
  # Replay each failing input alone and blame it; only Tessel's own failures fail the run.
  local tessel=0 hdf5=0 f
  for f in "$findings"/*; do
    [ -f "$f" ] || continue
    case "$f" in *.log) continue ;; esac
    # An input that runs clean when replayed alone failed only through state an earlier input
    # of the same fork left behind (HDF5 keeps global state across files): listed, not blamed.
    # First replay: one allocation over 2 GB stops it with the allocating stack (the RSS limit,
    # raised, cannot fire first and stop it without one); then the fuzzing limits as they were.
    if "$bin" -timeout=5 -rss_limit_mb=6144 -malloc_limit_mb=2048 "$f" >"$f.log" 2>&1 &&
      "$bin" -timeout=5 -rss_limit_mb=2048 "$f" >"$f.log" 2>&1; then
      echo "  $f (did not fail when replayed alone)" >>"$log.unreproduced"
      continue
    fi
    case "$(culprit <"$f.log")" in
      hdf5) hdf5=$((hdf5 + 1)) ;;
      *) tessel=$((tessel + 1)); echo "  $f (see $f.log)" >>"$log.findings" ;;
    esac
  done
  echo "$tessel $hdf5" >"$log.triage"
  [ "$tessel" -eq 0 ]
}

status=0
declare -A pids
for t in "${targets[@]}"; do
  mkdir -p "tests/fuzz/regressions/$t"
  rm -rf "$build/findings/$t" "$build/fuzz-$t.log.findings"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_target "$t" &
  pids[$t]=$!
done
for t in "${targets[@]}"; do
  if wait "${pids[$t]}"; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  # The last status line of the fork-mode driver: "#<inputs>: ... exec/s <rate> ...".
  last=$(grep -E '^#[0-9]+: ' "$build/fuzz-$t.log" | tail -1)
  execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
  rate=$(sed -nE 's/.*exec\/s:? ([0-9]+).*/\1/p' <<<"$last")
  read -r own upstream <"$build/fuzz-$t.log.triage"
  printf 'fuzz %-10s %-6s %8s inputs in %s s (%s/s); failing inputs: %s in Tessel, %s inside HDF5\n' \
    "$t" "$result" "${execs:-?}" "$seconds" "${rate:-?}" "$own" "$upstream"
  if [ -f "$build/fuzz-$t.log.findings" ]; then cat "$build/fuzz-$t.log.findings"; fi
done
rm -rf "$TMPDIR"
exit "$status"
