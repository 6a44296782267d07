B=build-device
F='*/case31:*/case32:*/case33:*/case34:*/case35'
for tool in racecheck synccheck memcheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report hazard"
  timeout 75 compute-sanitizer --tool $tool $extra --error-exitcode 99 --print-limit 20 $B/gpu_test_attention_paged --gtest_filter="$F" > $OUT/sanitize-paged-walk-$tool.log 2>&1
  echo "$tool rc=$? $(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY)' $OUT/sanitize-paged-walk-$tool.log | tr '\n' ' ') $(grep -E '^\[  (PASSED|FAILED)' $OUT/sanitize-paged-walk-$tool.log | tr '\n' ' ')"
done
