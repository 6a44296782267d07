# Causal varlen on the dense causal default's tile (2 x 64 by 128 keys, overlap, ping-pong, dynamic walk, peeled); no-mask 1k/2k schedule and store.
python3 scripts/attention_bench.py --varlen --reps 6 --no-db --masks true --mixes 4096,2048,1024,512,256,128 1023,777,3001,129,2048,1500 8192,512,512,512,512,512,512,512,512 1024,1024,1024,1024,1024,1024,1024,1024 --ab ATTN_OVERLAP=1+ATTN_WG=2+BLOCK_N=128+ATTN_PINGPONG=1+ATTN_PERSISTENT=1+ATTN_SCHEDULE=dynamic+ATTN_PEEL_MASK=1 2>&1 | grep -vE "Warning|warn\(|scaled_dot|^\s*$" | cut -c1-125
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 128 256 --masks false --seqlens 512 1024 2048 --variants base: dyn:ATTN_SCHEDULE=dynamic ts0:ATTN_TMA_STORE=0
