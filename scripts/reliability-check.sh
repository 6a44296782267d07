#!/usr/bin/env bash
# The GPU half of docs/reliability.md in one call on the GPU machine: build the GPU tests
# it needs, run every family's kernel verified (gpu_test_families), with NaN/inf inputs
# (gpu_test_nan_inf) and past 2^31 elements (gpu_test_large_tensors), then
# scripts/sanitize.sh (compute-sanitizer's four tools). Logs go to $OUT; a table last.
#   OUT=/tmp/out bash scripts/reliability-check.sh        (SKIP_LARGE=1, SKIP_SANITIZE=1)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-reliability}
BUILD=${BUILD:-build-device}
mkdir -p "$OUT"
export LOOM_CACHE_DIR=${LOOM_CACHE_DIR:-/tmp/loom-cubin-cache}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
targets=(loom gpu_test_families gpu_test_nan_inf gpu_test_large_tensors)
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_PYTHON=OFF &&
       cmake --build "$BUILD" --target "${targets[@]}" -j "$(nproc)"; } > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1
fi
summary=("gpu: $(cat "$OUT/gpu.txt")" "commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+dirty')")
status=0
run_test() {  # name binary
  local log="$OUT/$1.log" start rc
  start=$(date +%s)
  "$BUILD/$1" > "$log" 2>&1
  rc=$?
  [ $rc = 0 ] || status=1
  summary+=("$(printf '%-24s exit %s %4ss  %s' "$1" "$rc" "$(( $(date +%s) - start ))" \
    "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tr '\n' ' ')")")
  grep -E '^\[  FAILED  \]|Failure|FAIL:' "$log" | head -20
}
run_test gpu_test_families
run_test gpu_test_nan_inf
[ "${SKIP_LARGE:-0}" = 1 ] || run_test gpu_test_large_tensors
if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  BUILD="$BUILD" OUT="$OUT" bash scripts/sanitize.sh > "$OUT/sanitize-table.txt" 2>&1 || status=1
  summary+=("$(cat "$OUT/sanitize-table.txt")")
fi
printf '%s\n' "${summary[@]}"
exit $status
