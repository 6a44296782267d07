#!/usr/bin/env bash
# The Hopper GEMM on the GPU in one call: build, the wgmma atom and Hopper GEMM GPU tests, the
# Hopper ladder and the SASS of its last rung. Logs under $OUT; a short table last.
# Environment: SHAPE (ladder shape, default 4096x4096x4096), DTYPE (bf16), LADDER=0, BENCH
# ("EXPR@KNOBS|..." extra loom run --bench cases), BENCH_FILE (the same, one case per line,
# e.g. bench/cases/hopper-gemm-defaults.txt),
# SKIP_TESTS=1, TESTS (GPU test binaries to run; default the wgmma atom and Hopper GEMM ones),
# RUN_FLAGS (extra `loom run` flags for the BENCH cases, e.g. --no-db).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-device}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
summary=()
note() { summary+=("$1"); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$BUILD" -j "$(nproc)"; } > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1
fi
note "build: ok"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  for t in ${TESTS:-gpu_test_wgmma_atoms gpu_test_hopper_gemm}; do
    timeout 300 "$BUILD/$t" > "$OUT/$t.log" 2>&1
    note "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/$t.log" | tr '\n' ' ')"
  done
fi
if [ "${LADDER:-1}" = 1 ]; then
  "$BUILD/loom" ladder hopper --shape "${SHAPE:-4096x4096x4096}" --dtype "${DTYPE:-bf16}" > "$OUT/ladder.txt" 2>&1
  note "ladder hopper: rc=$?"
fi
IFS='|' read -ra cases <<< "${BENCH:-}"
if [ -n "${BENCH_FILE:-}" ]; then mapfile -t more < "$BENCH_FILE"; cases+=("${more[@]}"); fi
for c in "${cases[@]}"; do
  e=${c%%@*}; k=""; [ "$e" != "$c" ] && k=${c#*@}
  # shellcheck disable=SC2086
  "$BUILD/loom" run -c "$e" --bench --knobs "$k" ${RUN_FLAGS:-} >> "$OUT/bench.txt" 2>&1
  note "bench (rc=$?): $c -> $(grep -E '^Loom ' "$OUT/bench.txt" | tail -1 | awk '{print $2" us "$4 (NF >= 6 ? " (graph "$5" us "$6")" : "")}')"
done
last=$(grep -E '^ *[0-9]' "$OUT/ladder.txt" | tail -1)
if "$BUILD/loom" compile -c "matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)" \
     --knobs "ATOM=wgmma_bf16,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,GROUP_M=8,WM=2,BN=128,WARP_SPECIALIZE=1,PERSISTENT=1" \
     --cubin "$OUT/kernel.cubin" -o "$OUT/kernel.cu" > /dev/null 2>&1; then
  cuobjdump --dump-sass "$OUT/kernel.cubin" > "$OUT/kernel.sass" 2>&1
  note "sass: HGMMA=$(grep -c HGMMA "$OUT/kernel.sass") UTMALDG=$(grep -c UTMALDG "$OUT/kernel.sass") LDL/STL=$(grep -cE 'LDL|STL' "$OUT/kernel.sass")"
fi
echo; [ -f "$OUT/ladder.txt" ] && tail -15 "$OUT/ladder.txt"
echo "==== summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $(cat "$OUT/gpu.txt"))"
for s in "${summary[@]}"; do echo "  $s"; done
