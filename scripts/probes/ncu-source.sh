#!/usr/bin/env bash
# Per-SASS-instruction stall samples of one Loom kernel (ncu source page, CSV) for
# "EXPR@KNOBS" ($1), written to $OUT/source-$2.csv; the top-25 instructions by samples last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/loom-device}; mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
cmake --build "$BUILD" -j "$(nproc)" --target loom > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
v=$1; e=${v%%@*}; k=${v#*@}
ncu --clock-control none --section SourceCounters --section WarpStateStats -k regex:"${KREGEX:-^k_matmul}" --launch-skip 6 --launch-count 1 \
    --page source --print-source sass --csv "$BUILD/loom" run -c "$e" --bench --reps 8 --knobs "$k" > "$OUT/source-$2.csv" 2> "$OUT/source-$2.err"
python3 scripts/probes/source_top.py "$OUT/source-$2.csv"
