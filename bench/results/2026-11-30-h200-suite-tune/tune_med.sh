# (1) GROUP_M A/B on the one-row pairs (the suite tune's one finding), three alternations;
# (2) the suite's weaker medium shapes tuned at BUDGET s each on every GPU.
set -u
G1="BM=64,BN=128,FM=1,FN=1,ATOM=wgmma_bf16,WGMMA_A=smem,WGMMA_ZERO=scale_d,ACC=f32,SWAP_AB=0,SPLITK=1,SPLITK_MODE=reduce,WM=1,WN=1,BK=64,STAGE=tma,SLAB_KOUTER=0,STAGES=8,PIPELINE=1,PAD_SMEM=0,SWIZZLE=128B,INTERLEAVE_LOADS=0,FRAG_BUFFERS=1,EPILOGUE=direct,UNROLL_K=32,MIN_BLOCKS=0,WARP_SPECIALIZE=1,CLUSTER_M=2,CLUSTER_N=1,CLUSTER_K=1,CONSUMERS=cooperative,PERSISTENT=0,STREAM_K=0,VECTORIZE=4"
for i in 1 2; do
  for g in 1 8; do
    python3 scripts/gemm_bench.py --no-db --reps 30 --knobs "$G1,GROUP_M=$g" \
      -c "linear(X[128,8192]:bf16, W[8192,8192]:bf16)" 2>&1 | grep -v '^#' | sed "s/^/GM$g /"
  done
  python3 scripts/gemm_bench.py --no-db --reps 30 -c "linear(X[128,8192]:bf16, W[8192,8192]:bf16)" \
     -c "linear(X[128,8192]:bf16, W[10240,8192]:bf16)" 2>&1 | grep -v '^#' | sed "s/^/DEF /"
  python3 scripts/gemm_bench.py --no-db --reps 30 --knobs "GROUP_M=8" -c "linear(X[128,8192]:bf16, W[8192,8192]:bf16)" \
     -c "linear(X[128,8192]:bf16, W[10240,8192]:bf16)" 2>&1 | grep -v '^#' | sed "s/^/DEF+GM8 /"
done > $OUT/groupm-ab.txt
cut -c1-120 $OUT/groupm-ab.txt
ng=$(nvidia-smi -L | wc -l); devs=$(seq -s, 0 $((ng - 1)))
timeout ${TUNE_S:-420} build-device/loom tune --suite .carry/tune_med.txt --budget $BUDGET --devices $devs --no-confirm \
  --db $OUT/tune-med.db --json > $OUT/tune-med.json 2> $OUT/tune-med.err
echo "tune rc=$?"
python3 - "$OUT/tune-med.json" <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for r in d["outcomes"]:
    du=r.get("default_us"); wu=r.get("best_us")
    ratio = (du/wu) if (du and wu) else float("nan")
    print("%-56s default %8s best %8s d/b %.3f tr %s %s" % (r["expression"][:56], "%.1f"%du if du else "-", "%.1f"%wu if wu else "-", ratio, r.get("trials"), (r.get("error") or "")[:50]))
PY
