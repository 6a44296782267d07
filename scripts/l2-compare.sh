#!/usr/bin/env bash
# The cold-L2 methods side by side on the GPU (src/bench/timing_plan.h): each case of
# CASES_FILE (default bench/cases/hopper-gemm-defaults.txt, "EXPR[@KNOBS]" per line) timed
# with `loom run --bench --l2 M` for each M of METHODS (default "rotate read flush"; auto
# picks rotate under L2 and read above). Build first unless SKIP_BUILD=1. Logs under $OUT,
# a table last: method, event µs and ratio, graph µs and ratio (launches under 20 µs).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-device}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
         cmake --build "$BUILD" -j "$(nproc)" --target loom; } > "$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1
  fi
fi
mapfile -t cases < "${CASES_FILE:-bench/cases/hopper-gemm-defaults.txt}"
table=()
for arg in "${cases[@]}"; do
  e=${arg%%@*}
  knobs=""
  [ "$e" != "$arg" ] && knobs=${arg#*@}
  for m in ${METHODS:-rotate read flush}; do
    log="$OUT/l2-$m.txt"
    "$BUILD/loom" run -c "$e" --bench --knobs "$knobs" --l2 "$m" > "$OUT/l2-one.txt" 2>&1
    rc=$?
    cat "$OUT/l2-one.txt" >> "$log"
    # Rows: Backend µs TFLOP/s vs [graph µs, graph vs] (src/bench/report.h).
    row=$(awk -v m="$m" '
      /^L2:/ { sub(/^L2: +/, ""); l2 = $1 " " $2 " " $3 " " $4 }
      /^cuBLAS/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { cu = $i; break }
                  cug = (NF >= 6) ? $(NF - 1) : "-" }
      /^Loom / { ev = $2; r = $4; g = (NF >= 6) ? $5 : "-"; gr = (NF >= 6) ? $6 : "-" }
      END { printf "%-6s loom %7s us (cuBLAS %7s) %6s | graph %6s us (cuBLAS %6s) %6s | %s",
            m, ev, cu, r, g, cug, gr, l2 }' "$OUT/l2-one.txt")
    table+=("rc=$rc  $e  $row")
  done
done
rm -f "$OUT/l2-one.txt"
printf '%s\n' "${table[@]}" | tee "$OUT/l2-compare.txt"
