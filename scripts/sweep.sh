#!/usr/bin/env bash
# Runs `loom run --bench` on one expression for several knob sets (one per argument
# after the expression) and prints one summary line each: a quick search by hand.
# Usage: scripts/sweep.sh BUILD_DIR EXPR KNOBS1 [KNOBS2 ...]   (logs under $OUT if set)
set -uo pipefail
build=$1; expr=$2; shift 2
out=${OUT:-/tmp}
i=0
for knobs in "$@"; do
  i=$((i + 1))
  log="$out/sweep-$i.txt"
  "$build/loom" run -c "$expr" --bench --knobs "$knobs" > "$log" 2>&1
  rc=$?
  verify=$(grep -o 'verify (Loom[^:]*): [A-Z]*' "$log" | awk '{print $NF}')
  line=$(grep -E '^Loom ' "$log")
  printf '%-60s rc=%s %s | %s\n' "$knobs" "$rc" "${verify:-?}" "${line:-$(tail -1 "$log")}"
done
