# D 256 at 1k / 2k after stmatrix: the overlap without a mask (FA3's hdim-256 form), the causal walk without it, the ping-pong.
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 256 --masks false --seqlens 1024 2048 16384 --variants base: ov:ATTN_OVERLAP=1 ovp:ATTN_OVERLAP=1+ATTN_PEEL_MASK=1 pp:ATTN_PINGPONG=1
$P --dims 256 --masks true --seqlens 1024 2048 --variants base: nov:ATTN_OVERLAP=0 pp:ATTN_PINGPONG=1 np:ATTN_PEEL_MASK=0
