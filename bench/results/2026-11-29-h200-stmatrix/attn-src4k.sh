# Source-level (SASS) stall sampling of prefill attention at 4k no mask (16k tokens, D 128, bf16): Loom's default (stmatrix) and cuDNN's.
for who in loom cudnn; do
  ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight \
      -k regex:'attention|sdpa|flash|fmha|cudnn' --launch-skip 3 --launch-count 1 \
      -o "$OUT/src4k-$who" python3 .carry/attn-probe.py $who 4096 128 false > "$OUT/src4k-$who.log" 2>&1
  ncu --import "$OUT/src4k-$who.ncu-rep" --page source --csv --print-source sass > "$OUT/src4k-$who-sass.csv" 2> "$OUT/src4k-$who-sass.err"
  ncu --import "$OUT/src4k-$who.ncu-rep" --page details > "$OUT/src4k-$who-details.txt" 2>&1
  gzip -f "$OUT/src4k-$who-sass.csv"; rm -f "$OUT/src4k-$who.ncu-rep"
  grep -E "Duration|max err" "$OUT/src4k-$who.log" "$OUT/src4k-$who-details.txt" | head -4
  ls -la "$OUT"
done
