#!/usr/bin/env bash
# What a newcomer waits for on this machine: clone the repository afresh, then run CI's
# steps (`make run`, `make test`, `make fuzz` as .ci/run does, warnings as errors, no
# ccache), stamping every output line with the seconds since the clone.
#   bash scripts/time-fresh-clone.sh [REPO] [WORKDIR]   (defaults: this checkout, /tmp/loom-fresh)
# Logs: WORKDIR/{run,test,fuzz}.log; the totals in WORKDIR/times.txt and on stdout. The
# bars (docs/testing.md): the demo's first line within 5 minutes, `make test` within 25.
set -uo pipefail
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
work=${2:-/tmp/loom-fresh}
rm -rf "$work" && mkdir -p "$work"
git clone -q "$repo" "$work/src" || exit 1
cd "$work/src" || exit 1
export PATH="/usr/local/cuda/bin:$PATH" CMAKE_ARGS="-DLOOM_WERROR=ON"
SECONDS=0
stamp() { while IFS= read -r l; do echo "$SECONDS $l"; done; }
step() {  # name, then the command
  local name=$1 t0=$SECONDS rc; shift
  ( "$@" 2>&1 ) | stamp > "$work/$name.log"
  rc=${PIPESTATUS[0]}
  echo "$name: exit $rc, done at $SECONDS s after the clone ($((SECONDS - t0)) s)" | tee -a "$work/times.txt"
}
step run make run
first=$(grep -m1 ' == Loom' "$work/run.log" | cut -d' ' -f1)
echo "make run: the demo's first line at ${first:-?} s" | tee -a "$work/times.txt"
step test make test
step fuzz make fuzz FUZZ_SECONDS=300 FUZZ_FLAGS=-seed=1
