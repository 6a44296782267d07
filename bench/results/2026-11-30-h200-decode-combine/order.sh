P="python3 scripts/attention_bench.py --no-db --reps 20 --batches 1 8 --kv-heads 8 32 --sq 1 4"
$P --sk 1024 8192 32768 --paged 64 --ab SPLIT_ORDER=ranges COMBINE=kernel SPLIT_ORDER=ranges,COMBINE=kernel > $OUT/paged-order.txt 2>&1
grep -vE "Warning|return torch|utcnow|datetime" $OUT/paged-order.txt | cut -c1-150
$P --sk 1024 8192 32768 --decode --ab COMBINE=kernel SPLIT_ORDER=strided > $OUT/decode-order.txt 2>&1
grep -E "^(B|1 |8 )|summary" $OUT/decode-order.txt | cut -c1-130
