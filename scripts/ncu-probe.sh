#!/usr/bin/env bash
# Hardware counters of one Loom kernel and of cuBLAS's kernel for the same GEMM, in one call:
# builds `loom` only, then ncu (clocks left alone) on the 4th launch of each. Logs under $OUT.
# Environment: EXPR (a matmul expression), KNOBS (Loom knobs; empty = defaults),
# SECTIONS (ncu sections, default SpeedOfLight WarpStateStats SchedulerStats MemoryWorkloadAnalysis).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-device}; mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
EXPR=${EXPR:-"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)"}
SECTIONS=${SECTIONS:-"SpeedOfLight WarpStateStats SchedulerStats MemoryWorkloadAnalysis LaunchStats Occupancy"}
{ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$BUILD" -j "$(nproc)" --target loom; } > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
sec=(); for s in $SECTIONS; do sec+=(--section "$s"); done
run=("$BUILD/loom" run -c "$EXPR" --bench --reps 8 --knobs "${KNOBS:-}")
ncu --clock-control none "${sec[@]}" -k regex:'^k_' --launch-skip 3 --launch-count 1 "${run[@]}" > "$OUT/ncu-loom.txt" 2>&1
echo "loom rc=$?"
ncu --clock-control none "${sec[@]}" -k regex:'^(?!k_)' --launch-skip 3 --launch-count 1 "${run[@]}" > "$OUT/ncu-cublas.txt" 2>&1
echo "cublas rc=$?"
for f in loom cublas; do
  echo "==== $f"; grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Registers Per|Shared Memory Config|Block Size|Grid Size|Cluster|Stall|Warp Cycles Per Issued|Issued Warp Per|No Eligible|L2 Hit" "$OUT/ncu-$f.txt" | head -40
done
