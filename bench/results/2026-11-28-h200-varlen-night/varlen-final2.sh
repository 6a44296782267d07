# V's clean-up by 16-byte stores over the rows past the sequence only: the evening's command, then odd lengths.
python3 scripts/attention_bench.py --varlen --reps 6
python3 scripts/attention_bench.py --varlen --reps 6 --no-db --masks false true --mixes 1023,1023,1023,1023,1023,1023,1023,1023 1024,1024,1024,1024,1024,1024,1024,1024 3001 300,17,512,999,64,1,2000,250,129,700,45,1024
