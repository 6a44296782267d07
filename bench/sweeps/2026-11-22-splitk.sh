#!/usr/bin/env bash
# Split-K shapes for 128x128x16384 f32 (bench/NOTES.md, 2026-11-22, SIMT SGEMM and split-K's atomics): thread
# tiles with more ILP than 4x4, deeper splits, transposing cp.async.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build-device}
export LOOM_CACHE_DIR=/tmp/loom-cubin-cache
C="STAGE=cp_async,SLAB_KOUTER=1,PAD_SMEM=4,SPLITK_MODE=atomic"
OUT=${OUT:-/tmp} bash scripts/sweep.sh $B "matmul(A[128,16384]:f32, B[16384,128]:f32)" \
  "BM=64,BN=64,FM=4,FN=4,BK=16,STAGES=4,SPLITK=64,$C" \
  "BM=64,BN=64,FM=8,FN=8,BK=16,STAGES=4,SPLITK=128,$C" \
  "BM=64,BN=64,FM=8,FN=8,BK=16,STAGES=4,SPLITK=64,$C" \
  "BM=64,BN=64,FM=8,FN=4,BK=16,STAGES=4,SPLITK=64,$C" \
  "BM=64,BN=64,FM=4,FN=8,BK=16,STAGES=4,SPLITK=64,$C" \
  "BM=64,BN=64,FM=8,FN=4,BK=16,STAGES=4,SPLITK=128,$C" \
  "BM=64,BN=64,FM=8,FN=4,BK=32,STAGES=3,SPLITK=64,$C" \
  "BM=128,BN=64,FM=8,FN=8,BK=16,STAGES=4,SPLITK=64,$C" \
  "BM=128,BN=64,FM=8,FN=8,BK=16,STAGES=4,SPLITK=128,$C" \
  "BM=32,BN=64,FM=4,FN=8,BK=16,STAGES=4,SPLITK=64,$C" \
  "BM=64,BN=32,FM=8,FN=4,BK=16,STAGES=4,SPLITK=64,$C" \
  "BM=64,BN=64,FM=8,FN=4,BK=16,STAGES=2,SPLITK=64,STAGE=sync,SPLITK_MODE=atomic"
