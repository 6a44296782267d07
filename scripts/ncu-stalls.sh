#!/usr/bin/env bash
# Warp stall reasons (per issued instruction) of one Loom kernel and of cuBLAS's kernel for
# the same GEMM: where the warps wait. Needs a build from scripts/ncu-probe.sh (or builds
# loom). Environment: EXPR, KNOBS as in ncu-probe.sh. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-device}; mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
EXPR=${EXPR:-"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)"}
[ -x "$BUILD/loom" ] || { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$BUILD" -j "$(nproc)" --target loom; } > "$OUT/build.log" 2>&1
run=("$BUILD/loom" run -c "$EXPR" --bench --reps 8 --knobs "${KNOBS:-}")
m='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|smsp__inst_executed.sum|sm__cycles_active.avg|smsp__cycles_active.avg'
ncu --clock-control none --metrics "$m" -k regex:'^k_' --launch-skip 3 --launch-count 1 "${run[@]}" > "$OUT/stalls-loom.txt" 2>&1
ncu --clock-control none --metrics "$m" -k regex:'^(?!k_)' --launch-skip 3 --launch-count 1 "${run[@]}" > "$OUT/stalls-cublas.txt" 2>&1
for f in loom cublas; do
  echo "==== $f"
  grep -E "^ +(smsp|sm)__" "$OUT/stalls-$f.txt" | awk '$NF+0 >= 0.05 || /inst_executed|cycles_active/' | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//'
done
