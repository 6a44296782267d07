set -x
python3 -c "import torch; p=torch.cuda.get_device_properties(0); print('L2 bytes', p.L2_cache_size)"
python3 scripts/attention_bench.py --varlen --no-db --reps 6
L128=$(python3 -c "print(','.join(['128']*32))")
python3 scripts/attention_bench.py --varlen --no-db --reps 6 --masks true --mixes 8192 1024,1024,1024,1024,1024,1024,1024,1024 1023,1023,1023,1023,1023,1023,1023,1023 $L128
python3 scripts/attention_bench.py --no-db --reps 10 --dims 128 --masks true --seqlens 1024 4096 16384
