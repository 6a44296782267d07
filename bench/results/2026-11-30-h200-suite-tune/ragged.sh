# The staged strip epilogue (EPILOGUE=smem on warp-specialized wgmma) on rows TMA cannot
# address: verified outputs and an interleaved A/B against the direct epilogue.
set -u
LM="linear(X[2048,768]:bf16, W[50257,768]:bf16)"
B="python3 scripts/gemm_bench.py --no-db --reps 20"
for i in 1 2; do
  $B -c "$LM" 2>&1 | grep -v '^#' | sed 's/^/DEFAULT /'
  $B --knobs EPILOGUE=direct -c "$LM" 2>&1 | grep -v '^#' | sed 's/^/DIRECT  /'
done
$B --knobs "ATOM=mma_bf16,BM=128,BN=128,FM=4,FN=8,WM=2,WN=2,BK=64,STAGE=cp_async,STAGES=3,SWIZZLE=xor,EPILOGUE=smem,VECTORIZE=8,GROUP_M=1" -c "$LM" 2>&1 | grep -v '^#' | sed 's/^/MMASYNC /'
# correctness on other odd pitches, explicit knobs (f32 output, fused bias + gelu, N = 4100)
$B --knobs "EPILOGUE=smem,EPI_BUFFERS=2,WARP_SPECIALIZE=1,PERSISTENT=1,WM=2,WN=1,FM=1,FN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,ATOM=wgmma_bf16" \
   -c "linear(X[1000,4096]:bf16, W[1001,4096]:bf16)" -c "gelu(linear(X[3000,1024]:bf16, W[4100,1024]:bf16, b[4100]:bf16))" 2>&1 | grep -v '^#' | sed 's/^/STAGED  /'
