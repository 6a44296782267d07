P="python3 scripts/attention_bench.py --no-db --reps 6 --batches 2 8 --kv-heads 8 --sq 2048 --sk 2048"
$P --paged 64
$P --paged 256
$P --paged 256 --knobs ATTN_OVERLAP=0,ATTN_STMATRIX=1
