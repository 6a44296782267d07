python3 scripts/attention_bench.py --no-db --reps 20 --batches 1 8 --kv-heads 8 --sq 1 4 --sk 1024 8192 32768 --paged 64 > $OUT/paged-prewait.txt 2>&1
grep -E "^false|summary" $OUT/paged-prewait.txt | cut -c1-125
