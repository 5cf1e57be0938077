#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test locus. The CUDA Toolkit (nvcc and
# CCCL: Thrust, CUB, libcudacxx) is expected in its standard place, /usr/local/cuda.
set -euo pipefail
packages=(cmake ninja-build g++ make catch2 zlib1g-dev pkgconf python3 libopenblas-dev libopenblas-openmp-dev libeigen3-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda/lib64/cmake/thrust/thrust-config.cmake" ]; then
  echo "install-deps: the CUDA Toolkit (for CCCL's Thrust/CUB headers) is missing at $cuda" >&2
  exit 1
fi
