# 2026-11-29 morning: D = 256 with the ping-pong over the overlap; decode, paged, varlen after K-ahead.
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 256 --masks false true --seqlens 1024 2048 4096 --variants base: pp:ATTN_PINGPONG=1
python3 scripts/attention_bench.py --decode --no-db --prewarm 8 --reps 10 --sk 1024 8192 32768 > $OUT/decode.txt 2>&1; grep -E "summary|^#" $OUT/decode.txt | tail -4
python3 scripts/attention_bench.py --paged 64 --reps 6 --sk 8192 32768 > $OUT/paged.txt 2>&1; grep -E "summary" $OUT/paged.txt | tail -3
python3 scripts/attention_bench.py --varlen --reps 6 --masks false true > $OUT/varlen.txt 2>&1; grep -vE "^\s*$|Warning|warn|scaled_dot" $OUT/varlen.txt | tail -14
