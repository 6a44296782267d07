# Varlen diagnostics: the varlen form's own cost on one long sequence, the walk's schedules,
# the short tile, the peeled mask (H200, 2026-11-28 night).
P="python3 scripts/attention_bench.py --varlen --reps 6 --no-db --prewarm 8"
$P --masks false true --mixes 8192 4096,4096 1024,1024,1024,1024,1024,1024,1024,1024 \
   --ab ATTN_PERSISTENT=1 ATTN_PERSISTENT=1+ATTN_SCHEDULE=static ATTN_PEEL_MASK=1
$P --masks false --knobs ATTN_PERSISTENT=0,ATTN_TMA_STORE=0 --mixes 8192 4096,4096
$P --masks false true --ab ATTN_WG=2+BLOCK_M=128+BLOCK_N=128+ATTN_PINGPONG=1 ATTN_PERSISTENT=1+ATTN_SCHEDULE=static
