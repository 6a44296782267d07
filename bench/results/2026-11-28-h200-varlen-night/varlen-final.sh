# Varlen's new defaults (no mask: the overlap tile under the dynamic packed walk, peeled;
# causal: the walk peeled), the evening's command, then more mixes and the odd-length probe.
python3 scripts/attention_bench.py --varlen --reps 6
python3 scripts/attention_bench.py --varlen --reps 6 --no-db --masks false --mixes 8192 1024,1024,1024,1024,1024,1024,1024,1024 128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128 300,17,512,999,64,1,2000,250,129,700,45,1024 3001 3001,3001 1023,1023,1023,1023,1023,1023,1023,1023 --ab ATTN_PERSISTENT=0
