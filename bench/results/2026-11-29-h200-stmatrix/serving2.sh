# 2026-11-29 (stmatrix, loop ranges): varlen and paged after the codegen's loop ranges (their wgmma kernels' addresses changed).
python3 scripts/attention_bench.py --varlen --reps 6 --masks false true > $OUT/varlen.txt 2>&1; grep -vE "Warning|warn\(|scaled_dot|^\s*$" $OUT/varlen.txt | cut -c1-120 | tail -12
python3 scripts/attention_bench.py --paged 64 --reps 6 --sk 8192 32768 > $OUT/paged.txt 2>&1; grep -E "summary" $OUT/paged.txt | tail -3
