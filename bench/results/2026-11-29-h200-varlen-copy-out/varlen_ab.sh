set -x
python3 scripts/attention_bench.py --varlen --no-db --reps 6 --ab ATTN_STMATRIX=1
python3 scripts/attention_bench.py --varlen --no-db --reps 6 --masks false --mixes 8192 1024,1024,1024,1024,1024,1024,1024,1024 1023,1023,1023,1023,1023,1023,1023,1023 --ab ATTN_STMATRIX=1
