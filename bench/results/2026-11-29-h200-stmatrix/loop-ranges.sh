# Shared addresses with the ranges of their loops (codegen term_range): a = stmatrix alone, b = with the ranges.
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 128 256 --masks false true --seqlens 1024 4096 16384 --variants base:
