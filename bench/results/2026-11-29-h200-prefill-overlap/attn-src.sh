# Source-level (SASS) stall sampling of prefill attention at 1k no mask (16k tokens, D 128, bf16): Loom's default and cuDNN's.
for who in loom cudnn; do
  ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight \
      -k regex:'attention|sdpa|flash|fmha|cudnn' --launch-skip 3 --launch-count 1 \
      -o "$OUT/src-$who" python3 .carry/attn-probe.py $who 1024 128 false > "$OUT/src-$who.log" 2>&1
  ncu --import "$OUT/src-$who.ncu-rep" --page source --csv --print-source sass > "$OUT/src-$who-sass.csv" 2> "$OUT/src-$who-sass.err"
  ncu --import "$OUT/src-$who.ncu-rep" --page details > "$OUT/src-$who-details.txt" 2>&1
  gzip -f "$OUT/src-$who-sass.csv"; rm -f "$OUT/src-$who.ncu-rep"
  grep -E "Duration|max err" "$OUT/src-$who.log" "$OUT/src-$who-details.txt" | head -4
  ls -la "$OUT"
done
