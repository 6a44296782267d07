B=build-device
timeout 90 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 --print-limit 6 $B/gpu_test_attention_wgmma --gtest_filter='Persistent/*/0_*' > $OUT/racecheck-dense-causal-walk.log 2>&1
echo "racecheck dense rc=$? $(grep -E '^========= (RACECHECK SUMMARY)' $OUT/racecheck-dense-causal-walk.log) $(grep -E '^\[  (PASSED|FAILED)' $OUT/racecheck-dense-causal-walk.log | tr '\n' ' ')"
grep -E "Potential|Read Thread|Write Thread" $OUT/racecheck-dense-causal-walk.log | head -6
