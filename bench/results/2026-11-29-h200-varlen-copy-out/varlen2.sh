set -x
python3 scripts/attention_bench.py --varlen --no-db --reps 6
L128=$(python3 -c "print(','.join(['128']*32))")
python3 scripts/attention_bench.py --varlen --no-db --reps 6 --masks true --mixes 8192 1024,1024,1024,1024,1024,1024,1024,1024 1023,1023,1023,1023,1023,1023,1023,1023 $L128
