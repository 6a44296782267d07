#!/usr/bin/env bash
# One call on the GPU machine: build Loom, run the GPU tests and the CPU tests, run the
# benchmark, check the SASS, and print a short table last. Logs go to $OUT (the device
# tool brings that folder back). Usage: bash scripts/device-check.sh [bench expressions...]
# Environment: SKIP_CPU=1, SKIP_GPU_TESTS=1, LADDERS, TUNE, TUNE_SUITE, TUNE_BUDGET (below).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-device}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache

summary=()
note() { summary+=("$1"); }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$BUILD" -j "$(nproc)"; } > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  echo "BUILD FAILED"
  exit 1
fi
note "build: ok"

if [ "${SKIP_GPU_TESTS:-0}" != 1 ]; then
  ctest --test-dir "$BUILD" -L gpu --output-on-failure > "$OUT/gpu-tests.log" 2>&1
  note "gpu tests: $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log" | tail -1)"
fi
if [ "${SKIP_CPU:-0}" != 1 ]; then
  ctest --test-dir "$BUILD" -L cpu -j "$(nproc)" --output-on-failure > "$OUT/cpu-tests.log" 2>&1
  note "cpu tests: $(grep -E 'tests passed|tests failed' "$OUT/cpu-tests.log" | tail -1)"
fi

exprs=("$@")
[ ${#exprs[@]} -eq 0 ] && exprs=("matmul(A[4096,4096]:f32, B[4096,4096]:f32)")
i=0
for arg in "${exprs[@]}"; do
  i=$((i + 1))
  # EXPR or EXPR@KNOBS (e.g. "matmul(A[4096,4096]:f16, B[4096,4096]:f16)@ATOM=mma_f16")
  e=${arg%%@*}
  knobs=""
  [ "$e" != "$arg" ] && knobs=${arg#*@}
  "$BUILD/loom" run -c "$e" --bench --knobs "$knobs" > "$OUT/bench-$i.txt" 2>&1
  rc=$?
  cat "$OUT/bench-$i.txt" >> "$OUT/bench.txt"
  rm "$OUT/bench-$i.txt"
  ratio=$(grep -E '^Loom ' "$OUT/bench.txt" | tail -1 | awk '{print $4 (NF >= 6 ? " (graph " $6 ")" : "")}')
  note "bench $i (rc=$rc): $arg -> Loom vs cuBLAS ${ratio:-n/a}"
done

# Ladders named in $LADDERS (e.g. "sgemm splitk hgemm+--dtype+bf16": '+' separates a
# ladder's own options), all into one log.
for l in ${LADDERS:-}; do
  # shellcheck disable=SC2086
  "$BUILD/loom" ladder ${l//+/ } >> "$OUT/ladders.txt" 2>&1
  note "ladder ${l//+/ }: rc=$? (see ladders.txt)"
done

# Tuning runs: TUNE="EXPR|EXPR" and/or TUNE_SUITE=FILE, TUNE_BUDGET seconds per expression
# (default 120), TUNE_ARGS extra options; winners go into $OUT/tuning.db (not the
# machine's default database), the report into tune.txt, progress into tune-progress.txt.
tune_args=(--budget "${TUNE_BUDGET:-120}" --db "$OUT/tuning.db")
# shellcheck disable=SC2206
tune_args+=(${TUNE_ARGS:-})
if [ -n "${TUNE:-}" ]; then
  IFS='|' read -ra tunes <<< "$TUNE"
  for e in "${tunes[@]}"; do
    "$BUILD/loom" tune -c "$e" "${tune_args[@]}" >> "$OUT/tune.txt" 2>> "$OUT/tune-progress.txt"
    note "tune (rc=$?): $e"
  done
fi
if [ -n "${TUNE_SUITE:-}" ]; then
  "$BUILD/loom" tune --suite "$TUNE_SUITE" "${tune_args[@]}" >> "$OUT/tune.txt" 2>> "$OUT/tune-progress.txt"
  note "tune suite $TUNE_SUITE: rc=$? (see tune.txt)"
fi
if [ -f "$OUT/tune.txt" ]; then
  while read -r line; do note "  $line"; done < <(grep -E '^== |^  best|^  default|^  loom run|not tuned' "$OUT/tune.txt" | cut -c1-160)
fi

# SASS of the first expression's kernels: the instructions we meant, and no local memory.
first=${exprs[0]}
first_knobs=""
[ "${first%%@*}" != "$first" ] && first_knobs=${first#*@}
if "$BUILD/loom" compile -c "${first%%@*}" --knobs "$first_knobs" --cubin "$OUT/kernel.cubin" -o "$OUT/kernel.cu" > /dev/null 2>&1 &&
   cuobjdump --dump-sass "$OUT/kernel.cubin" > "$OUT/kernel.sass" 2>&1; then
  note "sass: FFMA=$(grep -c FFMA "$OUT/kernel.sass") HMMA=$(grep -c HMMA "$OUT/kernel.sass") LDSM=$(grep -c LDSM "$OUT/kernel.sass") LDGSTS=$(grep -c LDGSTS "$OUT/kernel.sass") LDG=$(grep -c 'LDG\.' "$OUT/kernel.sass") LDL/STL=$(grep -cE 'LDL|STL' "$OUT/kernel.sass")"
else
  note "sass: not dumped (see $OUT/kernel.sass)"
fi

echo
echo "==== summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $(head -2 "$OUT/gpu.txt" | tail -1))"
for s in "${summary[@]}"; do echo "  $s"; done
