#!/usr/bin/env bash
# Kept for old command lines: the comparison now runs in one Python process
# (scripts/attention_bench.py, which says how to build the loom package). Seqlens as arguments;
# DIMS, MASKS and KNOBS as before.
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
if [ -n "${DIMS:-}" ]; then args+=(--dims $DIMS); fi
if [ -n "${MASKS:-}" ]; then args+=(--masks $MASKS); fi
if [ -n "${KNOBS:-}" ]; then args+=(--knobs "$KNOBS"); fi
if [ $# -gt 0 ]; then args+=(--seqlens "$@"); fi
exec python3 scripts/attention_bench.py ${args[@]+"${args[@]}"}
