P="python3 scripts/attention_bench.py --no-db --reps 6 --batches 2 --kv-heads 8 --sq 2048 --sk 2048"
$P --paged 16
$P --paged 64
