#!/usr/bin/env bash
# Configures and builds Tessel into build/ (Release; TESSEL_BUILD_DIR names another folder).
# Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TESSEL_JOBS:-$(nproc)}"
build_dir="${TESSEL_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" -j "$jobs"
