#!/usr/bin/env bash
# Sets up, builds and runs every test (unit, MPI under mpirun, CLI). Exit code 0 iff all pass.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh "$@"
# Open MPI refuses to run as root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd build
ctest --output-on-failure -j "${TESSEL_TEST_JOBS:-2}" --timeout 900
