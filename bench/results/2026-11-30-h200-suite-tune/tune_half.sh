# Tune one half of the model suite on every GPU present; records into $OUT/tune-$HALF.db,
# winners merged into a copy of the shipped H200 file. HALF=a|b, BUDGET seconds per shape.
set -u
grep -v '^\s*#' bench/suites/models.txt | grep -v '^\s*$' > /tmp/all.txt
n=$(wc -l < /tmp/all.txt); h=$(( (n + 1) / 2 ))
if [ "$HALF" = a ]; then head -n $h /tmp/all.txt > /tmp/half.txt; else tail -n +$((h + 1)) /tmp/all.txt > /tmp/half.txt; fi
ng=$(nvidia-smi -L | wc -l); devs=$(seq -s, 0 $((ng - 1)))
cp tune/shipped/h200.db $OUT/shipped-h200-$HALF.db
echo "tuning $(wc -l < /tmp/half.txt) shapes on devices $devs, budget ${BUDGET}s"
build-device/loom tune --suite /tmp/half.txt --budget $BUDGET --devices $devs --no-confirm \
  --db $OUT/tune-$HALF.db --export-shipped $OUT/shipped-h200-$HALF.db --json > $OUT/tune-$HALF.json 2> $OUT/tune-$HALF.err
echo "rc=$?"
tail -5 $OUT/tune-$HALF.err
python3 - "$OUT/tune-$HALF.json" <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for r in d["outcomes"]:
    du=r.get("default_us"); wu=r.get("best_us")
    ratio = (du/wu) if (du and wu) else float("nan")
    print("%-66s dev%s default %8s best %8s  d/b %.3f tr %s %s" % (r["expression"][:66], r.get("device"), "%.1f"%du if du else "-", "%.1f"%wu if wu else "-", ratio, r.get("trials"), (r.get("error") or r.get("default_note") or "")[:50]))
PY
