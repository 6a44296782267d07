"""Top SASS instructions by warp-stall samples from an ncu `--page source --csv` dump."""
import csv, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
i = next(k for k, r in enumerate(rows) if r and r[0] == "Address")
hdr, body = rows[i], rows[i + 1:]
ws, src, addr, ex = (hdr.index(n) for n in ("Warp Stall Sampling (All Samples)", "Source", "Address", "Instructions Executed"))
tot = sum(float(r[ws] or 0) for r in body)
n = int(sys.argv[2]) if len(sys.argv) > 2 else 25
print("total samples", tot, "instructions", len(body))
for k, r in enumerate(body):
    r.append(k)
for r in sorted(body, key=lambda r: -float(r[ws] or 0))[:n]:
    print(f"{float(r[ws]):8.0f} {100*float(r[ws])/tot:5.1f}% #{r[-1]:4d} exec {r[ex]:>7} {r[src].strip()[:80]}")
