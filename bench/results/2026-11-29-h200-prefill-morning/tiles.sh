# D = 128 no mask: 176 / 144 keys with the peeled mask against the default (128); D = 256: O through the TMA store, 64 keys.
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 128 --masks false --seqlens 1024 4096 16384 --variants base: n176:BLOCK_N=176+ATTN_PEEL_MASK=1 n144:BLOCK_N=144+ATTN_PEEL_MASK=1 n176u:BLOCK_N=176
$P --dims 256 --masks false true --seqlens 1024 2048 4096 16384 --variants base: st:ATTN_TMA_STORE=1 n64:BLOCK_N=64
