# 2026-11-29: the ping-pong's ring across the walk's units (overlap tile).
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db"
$P --dims 128 --masks false true --seqlens 1024 2048 4096 --prewarm 8 --variants base:
$P --gqa 32:8 --masks true --seqlens 2048
python3 scripts/attention_bench.py --varlen --reps 6 --masks false
