#!/usr/bin/env bash
# Attention knob probe in one call: builds loom + loom_py (nanobind), prints each variant's
# kernel line (registers, spills) from `loom compile`, then times every variant against
# FlashAttention-2 and cuDNN in one process (scripts/attention_bench.py). Logs under $OUT.
# Usage: bash scripts/attention-probe.sh [variants-file]   (one knob string per line; an
#        empty line is the default). Env: DIMS (128), MASKS (false true), SEQLENS (2048 8192).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-device}; mkdir -p "$OUT"
BUILD=${BUILD:-build-py}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
{ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_PYTHON=ON \
    -DPython_EXECUTABLE="$(which python3)" -Dnanobind_DIR="$(python3 -m nanobind --cmake_dir)" &&
  cmake --build "$BUILD" -j "$(nproc)" --target loom loom_py; } > "$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; exit 1; }
export LOOM_PY_PATH=$PWD/$BUILD
if [ -n "${1:-}" ]; then mapfile -t variants < "$1"; else variants=(""); fi
for k in "${variants[@]}"; do
  for d in ${DIMS:-128}; do
    t="[4,16,4096,$d]:bf16"
    echo "== D=$d knobs='$k'" >> "$OUT/kernels.txt"
    "$BUILD/loom" compile -c "attention(Q$t, K$t, V$t, causal=false)" --knobs "$k" --cubin "$OUT/x.cubin" \
      > "$OUT/compile.txt" 2>&1
    grep -E "^ *k_[a-z_0-9]+ +[0-9]|^ *kernel +regs|^loom:|rror" "$OUT/compile.txt" | head -5 >> "$OUT/kernels.txt"
  done
  python3 scripts/attention_bench.py --dims ${DIMS:-128} --masks ${MASKS:-false true} \
    --seqlens ${SEQLENS:-2048 8192} --knobs "$k" > "$OUT/bench.txt" 2>&1
  { echo "==== knobs='$k'"; cat "$OUT/bench.txt"; } >> "$OUT/variants.txt"
  { echo "==== knobs='$k'"; grep -vE "^#" "$OUT/bench.txt" | tail -8; } >> "$OUT/table.txt"
done
rm -f "$OUT/x.cubin" "$OUT/compile.txt" "$OUT/bench.txt"
echo "==== kernels"; cat "$OUT/kernels.txt"
echo "==== table"; cat "$OUT/table.txt"
