B=build-device
timeout 130 $B/gpu_test_attention_paged > $OUT/gpu-tests-paged.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu-tests-paged.txt | tr '\n' ' ')"; grep -E "^\[  FAILED" $OUT/gpu-tests-paged.txt | head -5
P="python3 scripts/attention_bench.py --no-db --reps 8 --batches 2 8 --kv-heads 8 --sq 2048 --sk 2048"
for pg in 16 32; do
  timeout 50 $P --paged $pg --masks true --ab ATTN_SCHEDULE=dynamic 2>&1 | grep -v Warning | grep -v "return torch" >> $OUT/paged-causal-final.txt
done
grep -E "^(false|true) |ab ATTN|summary" $OUT/paged-causal-final.txt | cut -c1-120
