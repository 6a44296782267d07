#!/usr/bin/env bash
# Sweep behind bench/NOTES.md "2026-11-22 — why SIMT SGEMM stops at ~0.91×": transposing cp.async (SLAB_KOUTER=1)
# against the register double-buffered default, at 4096^3 and on the split-K shape.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
C="STAGE=cp_async,SLAB_KOUTER=1,PAD_SMEM=4,GROUP_M=8"
echo "== 4096^3"
OUT=${OUT:-/tmp}/s1 && mkdir -p $OUT && OUT=$OUT bash scripts/sweep.sh $B "matmul(A[4096,4096]:f32, B[4096,4096]:f32)" \
  "" \
  "BM=128,BN=128,FM=8,FN=8,BK=8,STAGES=4,MIN_BLOCKS=2,$C" \
  "BM=128,BN=128,FM=8,FN=8,BK=16,STAGES=3,MIN_BLOCKS=2,$C" \
  "BM=256,BN=128,FM=16,FN=8,BK=8,STAGES=4,$C" \
  "BM=128,BN=256,FM=8,FN=16,BK=8,STAGES=4,$C" \
  "BM=256,BN=128,FM=16,FN=8,WM=4,WN=2,BK=8,STAGES=4,$C" \
  "BM=128,BN=256,FM=8,FN=16,WM=2,WN=4,BK=8,STAGES=4,$C" \
  "BM=256,BN=128,FM=8,FN=16,BK=8,STAGES=4,$C"
echo "== split-K 128x128x16384"
OUT=${OUT%/s1}/s2 && mkdir -p $OUT && OUT=$OUT bash scripts/sweep.sh $B "matmul(A[128,16384]:f32, B[16384,128]:f32)" \
  "" \
  "BM=64,BN=64,FM=4,FN=4,BK=16,STAGES=4,SPLITK=64,SPLITK_MODE=atomic,$C" \
  "BM=64,BN=64,FM=4,FN=4,BK=16,STAGES=6,SPLITK=32,SPLITK_MODE=atomic,$C" \
  "BM=128,BN=128,FM=8,FN=8,BK=16,STAGES=4,SPLITK=128,SPLITK_MODE=atomic,$C" \
  "BM=64,BN=128,FM=4,FN=8,BK=16,STAGES=4,SPLITK=64,SPLITK_MODE=atomic,$C" \
  "BM=128,BN=64,FM=8,FN=4,BK=16,STAGES=4,SPLITK=64,SPLITK_MODE=atomic,$C" \
  "BM=64,BN=64,FM=4,FN=4,BK=16,STAGES=4,SPLITK=64,SPLITK_MODE=reduce,$C"
