# Causal varlen: the box order (main) against the packed order (cp), same defaults otherwise.
python3 scripts/attention_bench.py --varlen --reps 6 --no-db --masks true --mixes 4096,2048,1024,512,256,128 1023,777,3001,129,2048,1500 8192,512,512,512,512,512,512,512,512 1024,1024,1024,1024,1024,1024,1024,1024 300,17,512,999,64,1,2000,250,129,700,45,1024
