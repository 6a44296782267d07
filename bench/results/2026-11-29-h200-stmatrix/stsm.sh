# O to shared memory by stmatrix (the default now) against 4-byte stores; D 256 / 64 with the TMA store (now by stmatrix).
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 128 --masks false true --seqlens 1024 2048 4096 16384 --variants base: sts:ATTN_STMATRIX=0
$P --dims 96 --masks false true --seqlens 1024 4096 --variants base: sts:ATTN_STMATRIX=0
$P --dims 256 --masks false true --seqlens 1024 2048 4096 16384 --variants base: st:ATTN_TMA_STORE=1
$P --dims 64 --masks false true --seqlens 1024 4096 --variants base: st:ATTN_TMA_STORE=1
