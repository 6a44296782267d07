#!/usr/bin/env bash
# The closing GPU check of a stretch of work, in two calls of the device tool (each fits its 10 minutes):
#   PHASE=tests bash scripts/gpu-check.sh   build everything (loom_py included), every
#                                               GPU test, python/tests (pytest)
#   PHASE=bench bash scripts/gpu-check.sh   the Hopper GEMM shapes at their defaults against
#                                               cuBLAS (bench/cases/hopper-gemm-defaults.txt),
#                                               the attention table against FA2 and cuDNN
#                                               (D 64, 128, 256), `ladder flash`
# Both build first (a no-op when the machine kept build-device). Logs under $OUT; a short
# table last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-device}; mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
summary=()
note() { summary+=("$1"); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv > "$OUT/gpu.txt" 2>&1
# The header-only libraries the machine lacks come from .carry/deps (scripts/carry-deps.sh).
deps=(); [ -d .carry/deps/include ] && deps=(-DLOOM_DEPS_DIR="$PWD/.carry/deps")
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_PYTHON=ON "${deps[@]}" \
         -DPython_EXECUTABLE="$(which python3)" -Dnanobind_DIR="$(python3 -m nanobind --cmake_dir)" &&
       cmake --build "$BUILD" -j "$(nproc)"; } > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1
fi
note "build: ok (${COMMIT:-commit not given: set COMMIT=sha, the device copy of .git is not the tree})"
export LOOM_PY_PATH=$PWD/$BUILD

case "${PHASE:-tests}" in
tests)
  ctest --test-dir "$BUILD" -L gpu -j "${GPU_JOBS:-4}" --output-on-failure > "$OUT/gpu-tests.log" 2>&1
  note "gpu tests: $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log" | tail -1)"
  grep -E '^\s+[0-9]+ - .*\(Failed|Timeout|Exception' "$OUT/gpu-tests.log" | head -20 | while read -r l; do echo "  FAILED: $l"; done
  python3 -m pytest -q python/tests > "$OUT/pytest.log" 2>&1
  note "pytest python/tests: $(tail -1 "$OUT/pytest.log")"
  ;;
bench)
  mapfile -t cases < bench/cases/hopper-gemm-defaults.txt
  for arg in "${cases[@]}"; do
    e=${arg%%@*}; k=""; [ "$e" != "$arg" ] && k=${arg#*@}
    "$BUILD/loom" run -c "$e" --bench --knobs "$k" > "$OUT/run.txt" 2>&1
    cat "$OUT/run.txt" >> "$OUT/hopper-gemm-bench.txt"
    v=$(grep -q "verify (Loom.*PASS" "$OUT/run.txt" && echo PASS || echo FAIL)
    note "$(grep -E '^Loom ' "$OUT/run.txt" | awk '{printf "%9s us %6s", $2, $4; if (NF >= 6) printf " | graph %s us %s", $5, $6}') $v $arg"
  done
  python3 scripts/attention_bench.py --dims 64 128 256 > "$OUT/attention-table.txt" 2>&1
  note "attention table (loom/fa2, loom/cudnn per D, causal, seqlen):"
  while read -r l; do note "  $l"; done < <(grep -E '^(64|128|256) ' "$OUT/attention-table.txt" | awk '{print $1, $2, $3, $7, $8}')
  python3 scripts/attention_bench.py --ladder flash > "$OUT/ladder-flash.txt" 2>&1
  note "ladder flash: rc=$? (ladder-flash.txt)"
  ;;
esac
rm -f "$OUT/run.txt"
echo
echo "==== summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $(tail -1 "$OUT/gpu.txt"))"
for s in "${summary[@]}"; do echo "  $s"; done
