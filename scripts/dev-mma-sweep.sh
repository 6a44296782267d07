set -u
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > $OUT/build.log 2>&1 && cmake --build build-device -j16 >> $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
E="matmul(A[4096,4096]:f16, B[4096,4096]:f16)"
X="ATOM=mma_f16,STAGE=cp_async,PAD_SMEM=0,SWIZZLE=xor"
OUT=$OUT bash scripts/sweep.sh build-device "$E" "ATOM=mma_f16" "$X,BK=64,STAGES=3" "$X,BK=32,STAGES=3" "$X,BK=32,STAGES=4" "$X,BK=64,STAGES=3,GROUP_M=8" "$X,BK=64,STAGES=3,WM=2,WN=4,FM=4,FN=8" "$X,BK=64,STAGES=2"
E8="matmul(A[8192,8192]:f16, B[8192,8192]:f16)"
OUT=$OUT bash scripts/sweep.sh build-device "$E8" "$X,BK=64,STAGES=3" "$X,BK=64,STAGES=3,GROUP_M=8"
