#!/usr/bin/env bash
# Loom's attention kernel against PyTorch's scaled_dot_product_attention (flash backend =
# FlashAttention-2, and cuDNN) over shared/BENCHMARK.md's attention table: bf16, 16384
# tokens (batch = 16384 / seqlen), 2048 / D heads, D 64 and 128, causal and not. Loom
# through `loom run --bench` (verified against fp64 first), PyTorch timed in one Python
# process per shape, back to back with Loom's run: compare ratios within a line only.
# Usage (GPU machine, after a build): bash scripts/attention-bench.sh [seqlens...]
#   LOOM=build/loom  KNOBS="BLOCK_M=128,WARPS=8"  DIMS="64 128"  MASKS="false true"
set -uo pipefail
cd "$(dirname "$0")/.."
LOOM=${LOOM:-build/loom}
SEQS=${*:-"512 1024 2048 4096 8192 16384"}
printf "%-4s %-6s %6s  %9s  %9s  %9s  %7s\n" D causal seqlen loom flash cudnn loom/fa2
for d in ${DIMS:-64 128}; do
  for causal in ${MASKS:-false true}; do
    for s in $SEQS; do
      b=$((16384 / s)); h=$((2048 / d))
      t="[$b,$h,$s,$d]:bf16"
      expr="attention(Q$t, K$t, V$t, causal=$causal)"
      out=$("$LOOM" run -c "$expr" --bench ${KNOBS:+--knobs "$KNOBS"} 2>&1)
      loom=$(echo "$out" | awk '$1 == "Loom" {print $3}')
      echo "$out" | grep -q "verify.*FAIL" && loom="FAIL"
      torch=$(python3 - "$b" "$h" "$s" "$d" "$causal" <<'PY' 2>/dev/null
import sys, torch
from torch.nn.attention import sdpa_kernel, SDPBackend
b, h, s, d = map(int, sys.argv[1:5]); causal = sys.argv[5] == "true"
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
flops = 4 * b * h * s * s * d / (2 if causal else 1)
res = []
for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
    try:
        with sdpa_kernel(be):
            f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            for _ in range(5): f()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ts = []
            for _ in range(30):
                start.record(); f(); end.record(); torch.cuda.synchronize()
                ts.append(start.elapsed_time(end))
            ts.sort()
            res.append("%.1f" % (flops / (ts[len(ts) // 2] * 1e-3) / 1e12))
    except Exception:
        res.append("-")
print(*res)
PY
)
      flash=$(echo "$torch" | awk '{print $1}'); cudnn=$(echo "$torch" | awk '{print $2}')
      ratio=$(awk -v l="$loom" -v f="$flash" 'BEGIN { if (l+0 > 0 && f+0 > 0) printf "%.2f", l / f; else print "-" }')
      printf "%-4s %-6s %6s  %9s  %9s  %9s  %7s\n" "$d" "$causal" "$s" "$loom" "${flash:--}" "${cudnn:--}" "$ratio"
    done
  done
done
