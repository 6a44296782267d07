# ATTN_ROW_CHAINS A/B (D 128 / 256, both masks) and the D = 256 causal overlap below 4096 keys (after K-ahead).
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 128 256 --masks false true --seqlens 1024 4096 16384 --variants base: rc2:ATTN_ROW_CHAINS=2 rc4:ATTN_ROW_CHAINS=4 rc8:ATTN_ROW_CHAINS=8
OV=ATTN_OVERLAP=1+ATTN_PERSISTENT=1+ATTN_PEEL_MASK=1
$P --dims 256 --masks true --seqlens 1024 2048 4096 --variants base: ov:$OV ov64:$OV+BLOCK_N=64
