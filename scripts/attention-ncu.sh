#!/usr/bin/env bash
# Hardware counters of Loom's attention kernel and of PyTorch's FlashAttention-2 kernel on
# one shape, in one call: builds `loom`, then ncu (clocks left alone) on one launch of each.
# Environment: SHAPE (B H S D, default "4 16 4096 128"), CAUSAL (true|false), KNOBS.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-device}; mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
{ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$BUILD" -j "$(nproc)" --target loom; } > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
read -r b h s d <<< "${SHAPE:-4 16 4096 128}"
causal=${CAUSAL:-false}
t="[$b,$h,$s,$d]:bf16"
sec=(--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy)
ncu --clock-control none "${sec[@]}" -k regex:'^k_' --launch-skip 2 --launch-count 1 \
  "$BUILD/loom" run -c "attention(Q$t, K$t, V$t, causal=$causal)" --bench --reps 5 --knobs "${KNOBS:-}" > "$OUT/ncu-loom-attn.txt" 2>&1
ncu --clock-control none "${sec[@]}" -k regex:'flash' --launch-skip 2 --launch-count 1 python3 - "$b" "$h" "$s" "$d" "$causal" > "$OUT/ncu-fa2.txt" 2>&1 <<'PY'
import sys, torch
from torch.nn.attention import sdpa_kernel, SDPBackend
b, h, s, d = map(int, sys.argv[1:5]); causal = sys.argv[5] == "true"
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    for _ in range(4): torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
torch.cuda.synchronize()
PY
for f in loom-attn fa2; do
  echo "==== $f"; grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Block Size|Grid Size|Dynamic Shared|Achieved Occupancy|Issue Slots Busy|Executed Ipc Active|Warp Cycles Per Issued|No Eligible|Shared Memory.*%|Bank|L1/TEX Hit|Stall" "$OUT/ncu-$f.txt" | head -30
done
