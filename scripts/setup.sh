#!/usr/bin/env bash
# Installs the Debian packages Tessel builds and runs with, when missing. Idempotent; quiet when
# everything is already there.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libopenmpi-dev openmpi-bin
  libmetis-dev
  libhdf5-dev hdf5-tools
  libopenblas-openmp-dev libdnnl-dev
  zlib1g-dev libisal-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libfast-float-dev
  libgtest-dev
  clang libclang-rt-dev libomp-dev  # the fuzz targets (scripts/fuzz.sh): libFuzzer, OpenMP
  python3 python3-matplotlib python3-h5py python3-numpy python3-scipy python3-pytest  # python/: the package and its tests
  jq time
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "tessel setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "tessel setup: done"
