# 2026-11-29: causal varlen on the overlap tile by default; the varlen table both masks, and odd mixes.
python3 scripts/attention_bench.py --varlen --reps 6 --masks false true > $OUT/varlen.txt 2>&1; grep -vE "Warning|warn\(|scaled_dot|^\s*$" $OUT/varlen.txt | cut -c1-120 | tail -12
python3 scripts/attention_bench.py --varlen --reps 6 --no-db --masks true --mixes 1024,1024,1024,1024,1024,1024,1024,1024 300,17,512,999,64,1,2000,250,129,700,45,1024 --ab ATTN_OVERLAP=0 2>&1 | grep -vE "Warning|warn\(|scaled_dot|^\s*$" | cut -c1-120 | tail -8
