# 2026-11-29: the producer's K one block ahead of V (the overlap's split release).
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 128 256 --masks false true --seqlens 1024 4096 --variants base:
python3 scripts/attention_bench.py --varlen --reps 6 --masks false
