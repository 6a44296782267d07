B=build-device
timeout 150 $B/gpu_test_attention_paged > $OUT/gpu-tests-paged.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu-tests-paged.txt | tr '\n' ' ')"; grep -E "^\[  FAILED|^\[ RUN" $OUT/gpu-tests-paged.txt | tail -2
timeout 250 bash .carry/pwalk1.sh > $OUT/paged-walk.txt 2>&1; echo "pwalk1 rc=$?"
grep -E "^(false|true) |ab ATTN|summary" $OUT/paged-walk.txt | cut -c1-120
timeout 150 bash .carry/pwalk2.sh > $OUT/paged-walk-causal.txt 2>&1; echo "pwalk2 rc=$?"
grep -E "^(false|true) |ab ATTN|summary" $OUT/paged-walk-causal.txt | cut -c1-120
