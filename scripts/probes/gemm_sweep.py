# A GEMM knob sweep against PyTorch: each line of the cases file is "name<TAB>expression<TAB>overrides"
# (K=V replaces the default's value, -K drops it; the default read from `loom compile --no-db -v`;
# overrides that start with "=" are passed as the explicit knobs alone, the rest from Loom's
# defaults for them, e.g. "=ATOM=wgmma_f16,BK=64" to leave the default's family).
# Every point is verified against torch first, then timed interleaved with a cold L2 (gemm_bench.py).
# Usage: LOOM_PY_PATH=build LOOM_BIN=build/loom python3 scripts/probes/gemm_sweep.py CASES
import argparse, os, re, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gemm_bench as gb
defaults = {}
def full(e, over):
    if e not in defaults:
        r = subprocess.run([os.environ.get("LOOM_BIN", "build/loom"), "compile", "-c", e, "--no-db", "-v", "-o", "/dev/null"],
                           capture_output=True, text=True)
        m = re.search(r"knobs ([A-Z0-9_=,a-z.]+)\):", r.stderr + r.stdout)
        defaults[e] = dict(kv.split("=", 1) for kv in m.group(1).split(","))
    if not over: return ""
    if over.startswith("="): return over[1:]
    d = dict(defaults[e]); [d.pop(kv[1:], None) if kv.startswith("-") else d.__setitem__(*kv.split("=", 1)) for kv in over.split(",")]
    return ",".join("%s=%s" % kv for kv in d.items())
flush = gb.lt.L2Flush()
for line in open(sys.argv[1]):
    if not line.strip() or line.startswith("#"): continue
    name, e, over = (line.rstrip("\n").split("\t") + [""])[:3]
    s = time.time()
    try:
        k = full(e, over.strip())
        r = gb.bench_one(e, argparse.Namespace(knobs=k, no_db=True, reps=10, warmup=2), flush)
    except Exception as ex:
        print("ERR   %-14s %s" % (name, (str(ex).splitlines() or [repr(ex)])[0][:200])); sys.stdout.flush(); continue
    if r["ok"]:
        print("BENCH %-14s loom %8.1f torch %8.1f ratio %.3f  %-28s %s (%.0fs)" % (name, r["loom_us"], r["torch_us"], r["ratio"], r["family"], over, time.time() - s))
    else:
        print("BENCH %-14s VERIFY FAILED %s" % (name, over))
    sys.stdout.flush()
