P="python3 scripts/attention_bench.py --no-db --reps 20 --batches 1 8 --kv-heads 8 32 --sq 1 4 --sk 1024 8192 32768"
$P --paged 64 --ab COMBINE=last_cta > $OUT/paged-combine.txt 2>&1
grep -E "^false|summary|ab COMBINE" $OUT/paged-combine.txt | cut -c1-125
$P --decode > $OUT/decode-final.txt 2>&1
grep -E "^(B|1 |8 )|summary" $OUT/decode-final.txt | cut -c1-112
