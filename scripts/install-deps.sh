#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test locus.
# Usage: scripts/install-deps.sh [stage...]   (the stages of scripts/test.sh; default: all of them)
# The cuda stage needs the CUDA Toolkit (nvcc and CCCL 3: Thrust, CUB, libcudacxx) in /usr/local/cuda
# or CUDA_HOME. The host stages build without it, against Debian's Thrust 1.17 (libthrust-dev,
# libcub-dev), which is installed in any case: packaging:debian_thrust builds with it alone.
set -euo pipefail
stages=("$@")
((${#stages[@]})) || stages=(host clang asan tsan fuzz cuda)
packages=(cmake ninja-build g++ make catch2 zlib1g-dev pkgconf python3 libopenblas-dev libopenblas-openmp-dev libeigen3-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin clang libclang-rt-14-dev libthrust-dev libcub-dev)
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
  for s in "${stages[@]}"; do
    if [ "$s" = cuda ]; then
      echo "install-deps: the cuda stage needs the CUDA Toolkit (nvcc, CCCL 3), which is missing at $cuda;" \
           "the other stages run without it: scripts/test.sh host clang asan tsan fuzz" >&2
      exit 1
    fi
  done
  echo "install-deps: no CUDA Toolkit at $cuda: the host stages use Debian's Thrust 1.17 (libthrust-dev, libcub-dev)"
fi
