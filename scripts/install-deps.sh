#!/usr/bin/env bash
# Installs what Loom's build needs and is missing: cmake, a C++20 compiler, GoogleTest, and
# clang for the fuzz target (`make fuzz`; optional elsewhere).
# The CUDA toolkit (nvcc, NVRTC, cuBLAS) cannot come from here: it must be installed.
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v clang++ >/dev/null 2>&1 || missing+=(clang)
if [ ! -f /usr/include/gtest/gtest.h ] && [ ! -f /usr/src/googletest/CMakeLists.txt ]; then
  missing+=(libgtest-dev)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "install-deps: missing ${missing[*]}; install them (Debian/Ubuntu: apt-get install ${missing[*]})" >&2
    # ninja is optional (the Makefile falls back to make), clang only for `make fuzz`; the
    # rest is not.
    for m in "${missing[@]}"; do [ "$m" = ninja-build ] || [ "$m" = clang ] || exit 1; done
  fi
fi

cuda_root=${CUDA_HOME:-/usr/local/cuda}
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x "$cuda_root/bin/nvcc" ]; then
  echo "install-deps: the CUDA toolkit (nvcc, NVRTC, cuBLAS) is required and was not found;" >&2
  echo "  install CUDA 12.5+ and put its bin/ on PATH (or set CUDA_HOME)" >&2
  exit 1
fi
