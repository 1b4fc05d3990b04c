#!/usr/bin/env bash
# scripts/test.sh on a build folder configured without tests and without CUDA (as
# scripts/quickstart.sh leaves it on a machine with no GPU) must configure tests on, CUDA on
# where nvcc exists, and must fail when ctest finds no test instead of exiting 0.
# cmake is a stub that records its arguments and builds nothing, so the real ctest runs in a
# build folder holding no test. Usage: test_sh_test.sh SOURCE_DIR
set -uo pipefail
src="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/build"
cat >"$work/bin/cmake" <<'STUB'
#!/usr/bin/env bash
echo "$*" >>"$STUB_LOG"
STUB
chmod +x "$work/bin/cmake"
# nvcc is there: the CUDA sources must be configured on, although the quickstart left them off.
printf '#!/bin/sh\nexit 0\n' >"$work/bin/nvcc"
chmod +x "$work/bin/nvcc"
printf 'TESSEL_BUILD_TESTS:BOOL=OFF\nTESSEL_WITH_CUDA:BOOL=OFF\n' >"$work/build/CMakeCache.txt"
export STUB_LOG="$work/cmake.log"
: >"$STUB_LOG"

PATH="$work/bin:$PATH" TESSEL_SKIP_SETUP=1 TESSEL_BUILD_DIR="$work/build" \
  bash "$src/scripts/test.sh" >"$work/out.txt" 2>&1
rc=$?

fail=0
if [ "$rc" -eq 0 ]; then
  echo "FAIL: scripts/test.sh exited 0 although no test ran"
  fail=1
fi
if ! grep -q -- "-B $work/build .*-DTESSEL_BUILD_TESTS=ON" "$STUB_LOG"; then
  echo "FAIL: scripts/test.sh did not configure $work/build with -DTESSEL_BUILD_TESTS=ON"
  fail=1
fi
if ! grep -q -- "-DTESSEL_WITH_CUDA=ON" "$STUB_LOG"; then
  echo "FAIL: scripts/test.sh did not configure the CUDA sources on where nvcc exists"
  fail=1
fi
if ! grep -qi "no tests were found" "$work/out.txt"; then
  echo "FAIL: ctest did not run in the build folder (no \"No tests were found\")"
  fail=1
fi
echo "--- test.sh exit code $rc, output:"
cat "$work/out.txt"
echo "--- cmake calls:"
cat "$STUB_LOG"
exit "$fail"
