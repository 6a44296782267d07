# Odd lengths: the peeled mask's cost on the overlap tile (varlen and dense).
P="python3 scripts/attention_bench.py --varlen --reps 6 --no-db --masks false"
$P --mixes 1023,1023,1023,1023,1023,1023,1023,1023 1024,1024,1024,1024,1024,1024,1024,1024 1100,1100,1100,1100,1100,1100,1100,1100 3001 --ab ATTN_PEEL_MASK=0 ATTN_PEEL_MASK=0+ATTN_PERSISTENT=0
$P --knobs ATTN_PEEL_MASK=1 --mixes 1023,1023,1023,1023,1023,1023,1023,1023 3001
