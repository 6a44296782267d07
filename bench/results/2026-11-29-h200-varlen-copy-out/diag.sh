set -x
L128=$(python3 -c "print(','.join(['128']*32))")
python3 scripts/attention_bench.py --varlen --no-db --reps 6 --masks true false --mixes 8192 4096,4096 1024,1024,1024,1024,1024,1024,1024,1024 $L128
python3 scripts/attention_bench.py --paged 64 --no-db --reps 6 --batches 2 8 --kv-heads 8 32 --sq 2048 --sk 2048
python3 scripts/attention_bench.py --paged 64 --no-db --reps 6 --batches 2 8 --kv-heads 8 32 --sq 2048 --sk 2048 --knobs ATTN_STMATRIX=1
