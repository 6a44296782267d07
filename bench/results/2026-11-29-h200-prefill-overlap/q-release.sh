# 2026-11-29: Q's slot released after the last S with the overlap; the overlap under the causal walk at D = 128.
P="python3 scripts/attention_bench.py --reps 8 --warmup 2 --no-db"
OV=ATTN_OVERLAP=1+ATTN_PERSISTENT=1+ATTN_PEEL_MASK=1
$P --dims 128 --masks false true --seqlens 512 1024 2048 4096 16384 --prewarm 16 \
   --variants base: ov:$OV noov:ATTN_OVERLAP=0
$P --dims 256 --masks false true --seqlens 1024 --variants base:
$P --gqa 32:8 --masks true --seqlens 2048
python3 scripts/attention_bench.py --varlen --reps 6 --masks false
