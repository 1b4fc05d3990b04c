#!/usr/bin/env bash
# Configures and builds Tessel into build/ (Release). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TESSEL_JOBS:-$(nproc)}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$jobs"
