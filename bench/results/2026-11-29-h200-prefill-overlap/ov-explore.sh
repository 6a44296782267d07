# Exploration 2026-11-29: the overlap under the causal walk at D = 128; D = 256 at 1k; GQA causal.
P="python3 scripts/attention_bench.py --reps 8 --warmup 2 --no-db"
OV=ATTN_OVERLAP=1+ATTN_PERSISTENT=1+ATTN_PEEL_MASK=1
$P --dims 128 --masks true --seqlens 1024 2048 4096 8192 --prewarm 16 \
   --variants base: ov:$OV ovnp:ATTN_OVERLAP=1+ATTN_PERSISTENT=1 ovst:$OV+ATTN_SCHEDULE=static
$P --dims 256 --masks false true --seqlens 1024 --prewarm 8 \
   --variants base: n64:BLOCK_N=64 ov:$OV ov64:$OV+BLOCK_N=64
for k in "" ATTN_OVERLAP=1,ATTN_PERSISTENT=1,ATTN_PEEL_MASK=1; do
  echo "== gqa knobs: $k"
  $P --gqa 32:8 32:1 --masks true --seqlens 2048 4096 ${k:+--knobs $k}
done
