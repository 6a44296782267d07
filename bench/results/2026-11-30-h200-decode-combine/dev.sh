#!/usr/bin/env bash
# Device helper (not part of the repo): build the named targets, then run STEPS.
#   TARGETS="loom loom_py gpu_test_x" STEPS="gtest:BIN:FILTER sh:FILE py:ARGS" OUT=$OUT bash .carry/dev.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
t0=$(date +%s)
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_PYTHON=ON \
         -DLOOM_DEPS_DIR="$PWD/.carry/deps" -DPython_EXECUTABLE="$(which python3)" \
         -Dnanobind_DIR="$(python3 -m nanobind --cmake_dir)" &&
       cmake --build "$BUILD" -j "$(nproc)" --target ${TARGETS:-loom loom_py}; } > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"
export LOOM_PY_PATH=$PWD/$BUILD
i=0
for st in ${STEPS:-}; do
  i=$((i+1)); kind=${st%%:*}; rest=${st#*:}
  t1=$(date +%s)
  case $kind in
    gtest) bin=${rest%%:*}; filt=${rest#*:}
           timeout ${STEP_S:-300} "$BUILD/$bin" --gtest_filter="$filt" > "$OUT/step$i-$bin.log" 2>&1
           echo "step $i $bin $filt: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/step$i-$bin.log" | tr '\n' ' ') ($(( $(date +%s) - t1 )) s)"
           grep -E '^\[  FAILED  \]' "$OUT/step$i-$bin.log" | head -10 ;;
    sh) timeout ${STEP_S:-300} bash "$rest" > "$OUT/step$i-sh.log" 2>&1
        echo "step $i sh $rest: rc=$? ($(( $(date +%s) - t1 )) s)"; tail -n ${SH_TAIL:-40} "$OUT/step$i-sh.log" ;;
  esac
done
