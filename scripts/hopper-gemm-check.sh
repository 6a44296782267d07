#!/usr/bin/env bash
# The Hopper GEMM's closing check in one call: every GPU test, its shapes at their
# defaults (bench/cases/hopper-gemm-defaults.txt: the suite, tf32 with ATOM=wgmma_tf32) against
# cuBLAS, and the hopper ladder. Logs under $OUT; the ratios table last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-device}
mapfile -t cases < bench/cases/hopper-gemm-defaults.txt
SKIP_CPU=1 LADDERS="${LADDERS-hopper}" bash scripts/device-check.sh "${cases[@]}" > "$OUT/device-check.txt" 2>&1
grep -A40 '^==== summary' "$OUT/device-check.txt" | cut -c1-200
echo "---- defaults vs cuBLAS"
awk '/^expression:/{e=$2" "$3} /^Loom /{print e, $2" us", $4, (NF >= 6 ? "graph "$5" us "$6 : "")}' "$OUT/bench.txt"
