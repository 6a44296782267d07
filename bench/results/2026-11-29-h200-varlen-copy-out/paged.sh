P="python3 scripts/attention_bench.py --paged 64 --no-db --reps 6 --batches 2 8 --kv-heads 8 32 --sq 2048 --sk 2048"
$P --knobs ATTN_STMATRIX=1
$P --knobs ATTN_WG=2,BLOCK_N=128,ATTN_OVERLAP=1,ATTN_PINGPONG=1,ATTN_STMATRIX=1
$P --knobs ATTN_WG=2,BLOCK_N=128,ATTN_OVERLAP=1,ATTN_PINGPONG=1,ATTN_O_UNDER_S=1,ATTN_STMATRIX=1
python3 scripts/attention_bench.py --paged 16 --no-db --reps 6 --batches 2 --kv-heads 8 --sq 2048 --sk 2048 --knobs ATTN_WG=2,BLOCK_N=128,ATTN_OVERLAP=1,ATTN_PINGPONG=1,ATTN_STMATRIX=1
python3 scripts/attention_bench.py --paged 16 --no-db --reps 6 --batches 2 --kv-heads 8 --sq 2048 --sk 2048 --knobs ATTN_STMATRIX=1
