# mbarrier try_wait with a suspend-time hint (CUTLASS's ClusterBarrier::wait form) against without: tree a / b.
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 128 256 --masks false true --seqlens 1024 4096 --variants base:
