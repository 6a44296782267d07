#!/usr/bin/env bash
# ncu of Loom's kernels for a list of "EXPR@KNOBS" lines (file $1): one report per line under
# $OUT/ncu-N.txt with SpeedOfLight, LaunchStats, Occupancy, WarpStateStats, and a digest last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/loom-device}; mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
{ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$BUILD" -j "$(nproc)" --target loom; } > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
mapfile -t variants < "$1"
sec=(--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis)
i=0
for v in "${variants[@]}"; do
  e=${v%%@*}; k=${v#*@}; i=$((i+1))
  ncu --clock-control none "${sec[@]}" -k regex:"${KREGEX:-^k_}" --launch-skip 6 --launch-count 2 \
      "$BUILD/loom" run -c "$e" --bench --reps 8 --knobs "$k" > "$OUT/ncu-$i.txt" 2>&1
  echo "==== $i: $v"
  grep -E "^  [a-zA-Z_].*\(|Duration|Elapsed Cycles|SM Active Cycles|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Registers Per|Grid Size|Block Size|Cluster Size|Dynamic Shared|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" "$OUT/ncu-$i.txt" | head -40
done
