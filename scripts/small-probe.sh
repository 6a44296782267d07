#!/usr/bin/env bash
# Small-launch probe in one call: builds `loom`, times knob variants of a few small GEMMs
# (event and graph replay, cold L2 by rotation) against cuBLAS, and with NCU=1 profiles
# the default's kernels and cuBLAS's (durations, launch stats). Logs under $OUT; a table last.
# Usage: bash scripts/small-probe.sh [variants-file]   (lines "EXPR@KNOBS"; default below)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-device}; mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
{ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$BUILD" -j "$(nproc)" --target loom; } > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
SK="matmul(A[128,16384]:bf16, B[16384,128]:bf16)"
if [ -n "${1:-}" ]; then mapfile -t variants < "$1"; else variants=(
  "$SK@"
  "linear(X[16,4096]:bf16, W[4096,4096]:bf16)@"
  "linear(X[64,4096]:bf16, W[4096,4096]:bf16)@"); fi
for v in "${variants[@]}"; do
  e=${v%%@*}; k=${v#*@}
  "$BUILD/loom" run -c "$e" --bench --reps ${REPS:-200} --knobs "$k" > "$OUT/run.txt" 2>&1
  cat "$OUT/run.txt" >> "$OUT/variants.txt"
  echo "$(grep -E '^Loom ' "$OUT/run.txt" | awk '{print $2" us "$4" | graph "$5" us "$6}') | $(grep -E '^cuBLAS ' "$OUT/run.txt" | awk '{print "cublas "$2" / graph "$5}') | $(grep -q "verify.*FAIL\|^loom:" "$OUT/run.txt" && echo FAIL) $e $k" >> "$OUT/table.txt"
done
if [ "${NCU:-0}" = 1 ]; then
  sec=(--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats)
  run=("$BUILD/loom" run -c "${NCU_EXPR:-$SK}" --bench --reps 8 --knobs "${NCU_KNOBS:-}")
  ncu --clock-control none "${sec[@]}" -k regex:'^k_' --launch-skip 6 --launch-count 2 "${run[@]}" > "$OUT/ncu-loom.txt" 2>&1
  ncu --clock-control none "${sec[@]}" -k regex:'^(?!k_)' --launch-skip 6 --launch-count 2 "${run[@]}" > "$OUT/ncu-cublas.txt" 2>&1
  for f in loom cublas; do
    echo "==== $f"; grep -E "^  [a-zA-Z_].*\(|Duration|Elapsed Cycles|SM Active Cycles|DRAM Throughput|Memory Throughput|Registers Per|Grid Size|Block Size|Cluster Size|Dynamic Shared|Waves Per SM|Achieved Occupancy" "$OUT/ncu-$f.txt" | head -40
  done
fi
echo "==== table (event us, ratio | graph us, ratio)"; cat "$OUT/table.txt"
