#!/usr/bin/env bash
# compute-sanitizer over one kernel of every family (tests/gpu/family_cases.h: SIMT,
# mma.sync, the wgmma GEMM in 2-CTA clusters, the TMA-store epilogue, split-K, stream-K,
# the swapped decode GEMM, attention on mma.sync and on wgmma) at odd shapes, with each
# of memcheck (out-of-bounds and misaligned accesses, leaks), racecheck (shared-memory
# hazards), synccheck (illegal barrier use) and initcheck (reads of uninitialized device
# memory). Runs on the GPU machine after a build:
#   BUILD=build-device OUT=/tmp/out bash scripts/sanitize.sh
# Each tool's log goes to $OUT/sanitize-<tool>.log; the last lines are a table of tool,
# errors and the tests' verdict. Exit 1 when any tool reports an error or a test fails.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/loom-sanitize}
mkdir -p "$OUT"
bin="$BUILD/gpu_test_families"
[ -x "$bin" ] || { echo "sanitize: $bin not built (cmake --build $BUILD --target gpu_test_families)" >&2; exit 2; }
command -v compute-sanitizer >/dev/null || { echo "sanitize: compute-sanitizer not on PATH" >&2; exit 2; }
# Fresh NVRTC compiles are not what is checked; the kernels are. A private cubin cache
# keeps the runs from touching the user's.
export LOOM_CACHE_DIR=${LOOM_CACHE_DIR:-$OUT/cubin-cache}
status=0
table=()
for tool in memcheck racecheck synccheck initcheck; do
  extra=()
  case $tool in
    memcheck) extra=(--leak-check full) ;;
    racecheck) extra=(--racecheck-report hazard) ;;
  esac
  log="$OUT/sanitize-$tool.log"
  start=$(date +%s)
  compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit 20 \
    "$bin" --gtest_brief=0 > "$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  summary=$(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY)' "$log" | tr '\n' ' ')
  tests=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tr '\n' ' ')
  [ "$rc" = 0 ] || status=1
  table+=("$(printf '%-10s exit %-3s %4ss  %s %s' "$tool" "$rc" "$secs" "$summary" "$tests")")
done
echo "compute-sanitizer over $bin ($(compute-sanitizer --version | grep -o 'Version.*' | head -1)):"
printf '%s\n' "${table[@]}"
exit $status
