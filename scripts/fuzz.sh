#!/usr/bin/env bash
# Runs fuzz_pipeline (fuzz/fuzz_pipeline.cpp) for a bounded time: libFuzzer over expression
# text, knob strings, targets and sizes through the whole pipeline to CUDA text.
#   scripts/fuzz.sh BUILD_DIR SECONDS [extra libFuzzer flags]
# The repository's corpus (fuzz/corpus) seeds the run and is never written: new inputs go
# to BUILD_DIR/fuzz-corpus, findings to BUILD_DIR/fuzz-artifacts/ (crash-*, timeout-*,
# oom-*). Exit status: 0 when the time ran out with no finding, else libFuzzer's.
# Per input: 30 s and 4 GB at most (a hang or a runaway allocation is a finding).
# `make fuzz` builds the target first; FUZZ_SECONDS sets the time (CI: .ci/run).
set -euo pipefail
build=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS [libFuzzer flags]}
seconds=${2:?usage: scripts/fuzz.sh BUILD_DIR SECONDS [libFuzzer flags]}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$build/fuzz-corpus" "$build/fuzz-artifacts"
echo "fuzz: fuzz_pipeline for ${seconds} s (corpus $build/fuzz-corpus + fuzz/corpus)"
# ASan: no leak check (the pipeline's caches live for the process); abort on the first
# report so the input is saved.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
"$build/fuzz_pipeline" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
  -max_len=4096 -dict="$root/fuzz/loom.dict" -artifact_prefix="$build/fuzz-artifacts/" \
  -print_final_stats=1 "$@" "$build/fuzz-corpus" "$root/fuzz/corpus" || status=$?
if [ "$status" != 0 ]; then
  echo "fuzz: FAILED (exit $status); the input is in $build/fuzz-artifacts/:" >&2
  ls -l "$build/fuzz-artifacts/" >&2
  echo "  replay: $build/fuzz_pipeline $build/fuzz-artifacts/<file>" >&2
  exit "$status"
fi
echo "fuzz: no finding in ${seconds} s"
