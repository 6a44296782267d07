# After stmatrix: D 128 no mask at 4k / 16k (the >= 1.05 bar) and D 256 at 1k (the 1.00 bar): tiles, ring depth, rescale placement.
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 128 --masks false --seqlens 4096 16384 --variants base: n176:BLOCK_N=176 ks3:KV_STAGES=3 ous0:ATTN_O_UNDER_S=0 n112:BLOCK_N=112 n144:BLOCK_N=144
$P --dims 256 --masks false true --seqlens 1024 2048 --variants base: n64:BLOCK_N=64 n96:BLOCK_N=96 n48:BLOCK_N=48 ks3:KV_STAGES=3
