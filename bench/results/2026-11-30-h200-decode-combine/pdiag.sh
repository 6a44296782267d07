P="python3 scripts/attention_bench.py --no-db --reps 20 --batches 1 --kv-heads 8 --sq 1 4 --sk 8192 32768"
$P --paged 64 --ab COMBINE=kernel > $OUT/paged-ab.txt 2>&1
grep -E "^(B|1 )" $OUT/paged-ab.txt | cut -c1-140
$P --decode --ab COMBINE=kernel > $OUT/decode-ab.txt 2>&1
grep -E "^(B|1 )" $OUT/decode-ab.txt | cut -c1-140
grep -iE "^ *(loom|ab|#)" $OUT/decode-ab.txt | cut -c1-160 | head -20
