P="python3 scripts/attention_bench.py --no-db --reps 8 --batches 2 8 --kv-heads 8 --sq 2048 --sk 2048 --masks true"
for pg in 16 64; do
  $P --paged $pg --ab ATTN_PERSISTENT=1 ATTN_PERSISTENT=1,ATTN_SCHEDULE=static 2>&1 | grep -v Warning | grep -v "return torch"
done
