python3 scripts/gemm_bench.py --suite .carry/decode_suite.txt --reps 20 --no-db --out $OUT/dsuite-1.tsv > $OUT/dsuite-1.txt 2>&1
python3 scripts/gemm_bench.py --suite .carry/decode_suite.txt --reps 20 --no-db --out $OUT/dsuite-2.tsv > $OUT/dsuite-2.txt 2>&1
python3 - <<'PY'
import sys, os; sys.path.insert(0, "python"); import loom_torch as lt, torch
for e in ["linear(X[16,4096]:bf16, W[28672,4096]:bf16)", "linear(X[32,4096]:bf16, W[28672,4096]:bf16)", "linear(X[1,8192]:bf16, W[10240,8192]:bf16)"]:
    try:
        k = lt.loom.Kernel(e, "", 0, False, ""); print(e, [kv for kv in k.program.knobs.split(",") if kv.startswith("STAGES")])
    except Exception as ex: print(e, "knobs?", str(ex)[:100])
PY
grep -v "^#" $OUT/dsuite-1.txt | cut -c1-120; grep -v "^#" $OUT/dsuite-2.txt | cut -c1-120
