#!/usr/bin/env bash
# Sets up, builds and runs every test (unit, MPI under mpirun, CLI). Exit code 0 iff all pass,
# and never 0 when no test ran.
#
# The build folder is shared with scripts/quickstart.sh, which may configure it without tests
# and without CUDA: configure both on explicitly here, whatever the cache says, so the README's
# two commands work in either order. TESSEL_BUILD_DIR names another build folder (default build/);
# TESSEL_SKIP_SETUP=1 skips the package check.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${TESSEL_SKIP_SETUP:-0}" != 1 ]; then
  bash scripts/setup.sh
fi
# CUDA sources are built wherever nvcc exists, also when scripts/quickstart.sh configured the
# folder without them first (TESSEL_WITH_CUDA=ON or OFF overrides).
cuda=OFF
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then cuda=ON; fi
bash scripts/build.sh -DTESSEL_BUILD_TESTS=ON -DTESSEL_WITH_CUDA="${TESSEL_WITH_CUDA:-$cuda}" "$@"
# Open MPI refuses to run as root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "${TESSEL_BUILD_DIR:-build}"
ctest --output-on-failure --no-tests=error -j "${TESSEL_TEST_JOBS:-2}" --timeout 900
