export LOOM_BIN=build-device/loom
python3 scripts/probes/gemm_sweep.py .carry/decode_cases.txt > $OUT/decode-sweep-1.txt 2>&1
python3 scripts/probes/gemm_sweep.py .carry/decode_cases.txt > $OUT/decode-sweep-2.txt 2>&1
python3 - <<'PY'
import os,re,collections
out=os.environ["OUT"]; d=collections.defaultdict(list)
for f in ("decode-sweep-1.txt","decode-sweep-2.txt"):
    for l in open(os.path.join(out,f)):
        m=re.match(r"BENCH (\S+)\s+loom\s+(\S+) torch\s+(\S+) ratio (\S+)\s+\S+ \S+(?: \S+)?\s*(.*?) \(\d+s\)",l)
        if m: d[(m.group(1),m.group(5).strip())].append(float(m.group(4)))
        elif l.startswith("ERR"): print(l[:160].rstrip())
for (n,o),v in sorted(d.items()): print("%-18s %-18s %s" % (n,o or "default"," ".join("%.3f"%x for x in v)))
PY
