#!/usr/bin/env bash
# Installs what Loom's build needs and is missing: cmake, a C++20 compiler, GoogleTest, the
# header-only nlohmann/json and {fmt} (or .carry/deps/include from scripts/carry-deps.sh),
# clang for the fuzz target (`make fuzz`; optional elsewhere), and python3's jsonschema
# for the --json tests (optional: tests/json/validate_json.py has a built-in engine).
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

carried=.carry/deps/include
[ -f /usr/include/nlohmann/json.hpp ] || [ -f "$carried/nlohmann/json.hpp" ] || missing+=(nlohmann-json3-dev)
[ -f /usr/include/fmt/format.h ] || [ -f "$carried/fmt/format.h" ] || missing+=(libfmt-dev)
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import jsonschema' >/dev/null 2>&1 &&
   ! dpkg -s python3-jsonschema >/dev/null 2>&1; then
  missing+=(python3-jsonschema)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "install-deps: missing ${missing[*]}; install them (Debian/Ubuntu: apt-get install ${missing[*]})" >&2
    # ninja is optional (the Makefile falls back to make), clang only for `make fuzz`; the
    # rest is not.
    # python3-jsonschema is optional too (the tests validate with a built-in engine then).
    for m in "${missing[@]}"; do
      [ "$m" = ninja-build ] || [ "$m" = clang ] || [ "$m" = python3-jsonschema ] || exit 1
    done
  fi
fi

cuda_root=${CUDA_HOME:-/usr/local/cuda}
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x "$cuda_root/bin/nvcc" ]; then
  echo "install-deps: the CUDA toolkit (nvcc, NVRTC, cuBLAS) is required and was not found;" >&2
  echo "  install CUDA 12.5+ and put its bin/ on PATH (or set CUDA_HOME)" >&2
  exit 1
fi
