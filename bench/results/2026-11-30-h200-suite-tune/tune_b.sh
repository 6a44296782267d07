# The suite's remaining medium shapes tuned at BUDGET s each on every GPU (the tuner with
# set-up allowances and interleaved final pairs); text report and JSON.
set -u
ng=$(nvidia-smi -L | wc -l); devs=$(seq -s, 0 $((ng - 1)))
cp tune/shipped/h200.db $OUT/shipped-h200-b.db
timeout ${TUNE_S:-480} build-device/loom tune --suite .carry/tune_b.txt --budget $BUDGET --devices $devs --no-confirm \
  --db $OUT/tune-b.db --export-shipped $OUT/shipped-h200-b.db --json > $OUT/tune-b.json 2> $OUT/tune-b.err
echo "tune rc=$?"
python3 - "$OUT/tune-b.json" <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for r in d["outcomes"]:
    du=r.get("default_us"); wu=r.get("best_us")
    ratio = (du/wu) if (du and wu) else float("nan")
    print("%-58s def %8s best %8s d/b %.3f tr %s p %s %s" % (r["expression"][:58], "%.1f"%du if du else "-", "%.1f"%wu if wu else "-", ratio, r.get("trials"), r.get("final_pairs"), (r.get("error") or r.get("default_note") or "")[:60]))
PY
