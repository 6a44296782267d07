#!/usr/bin/env bash
# Per-CTA timeline of Loom's decode kernel in graph replay: generates the kernel with
# `loom compile --ir cuda` for each knob set, inserts LOOM_TRACE stamps (start, after the
# consumer's mainloop, end), builds scripts/probes/trace_decode.cu around it and runs it.
# Usage (device, after building loom): bash scripts/probes/trace-decode.sh BUILD_DIR "KNOBS" ...
# An argument "KNOBS|SED" also edits the generated kernel with `sed -E SED` before the
# stamps go in (timing experiments only: e.g. drop the wgmma, or release slots early).
set -euo pipefail
cd "$(dirname "$0")"
B=$1; shift
OUT=${OUT:-/tmp}
E="linear(X[16,4096]:bf16, W[4096,4096]:bf16)"
i=0
for arg in "$@"; do
  i=$((i+1)); k=$OUT/kernel$i.cu
  knobs=${arg%%|*}; edit=""; [ "$knobs" != "$arg" ] && edit=${arg#*|}
  "$B/loom" compile -c "$E" --knobs "$knobs" --ir cuda > $k.raw 2>/dev/null
  if [ -n "$edit" ]; then sed -E "$edit" $k.raw > $k.edited && mv $k.edited $k.raw; fi
  name=$(grep -o 'k_matmul[_0-9]*' $k.raw | head -1)
  smem=$(grep -o 'loom_smem + [0-9]*);  // \[[0-9]*\] mbarriers' $k.raw | sed 's/loom_smem + \([0-9]*\));  \/\/ \[\([0-9]*\)\].*/\1 \2/' | awk '{print $1 + 8*$2}')
  gy=$("$B/loom" compile -c "$E" --knobs "$knobs" --ir kernel 2>/dev/null | grep -o 'grid([0-9]*, [0-9]*' | head -1 | sed 's/grid(//; s/, / /')
  # Stamps: after the shared-memory declaration (start), after the consumer's final
  # wgmma wait (mainloop end), before the kernel's closing brace (end).
  awk -v name="$name" '
    /extern __shared__/ && !s { print; print "  LOOM_TRACE_DECL;"; print "  LOOM_TRACE(0);"; s=1; next }
    /wgmma_wait_group<0>\(\);/ && !m { print; print "    LOOM_TRACE(1);"; m=1; next }
    /cluster_wait\(\);/ && s { print; w++; print "  LOOM_TRACE(" (w == 1 ? 4 : 5) ");"; next }
    /^}$/ && s && !e { print "  LOOM_TRACE(2);"; print "  LOOM_TRACE_FLUSH;"; print; e=1; next }
    { print }' $k.raw > $k
  { echo '#include "trace_hooks.h"'; cat $k; } > $k.traced.cu
  nvcc -cubin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../../src/codegen/device -I. -o $OUT/kernel$i.cubin $k.traced.cu
  nvcc -O3 -std=c++17 -DCUBIN="\"$OUT/kernel$i.cubin\"" -DKERNEL_NAME="\"$name\"" -DSMEM_BYTES=$smem -DGRID_X=${gy% *} \
    -DGRID_Y=${gy#* } -DDEC_M=16 -DDEC_N=4096 -DDEC_K=4096 -DXBOX_ROWS=16 -DTAG="\"v$i $knobs\"" -o $OUT/trace$i trace_decode.cu -lcuda
  [ -n "$edit" ] && echo "v$i edit: $edit"
  $OUT/trace$i
done
