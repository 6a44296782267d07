set -u
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > $OUT/build.log 2>&1 && cmake --build build-device -j16 >> $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
ctest --test-dir build-device -R "GpuMmaGemm" --output-on-failure > $OUT/mma-tests.log 2>&1; grep -E "tests passed|tests failed" $OUT/mma-tests.log
E="matmul(A[4096,4096]:f32, B[4096,4096]:f32)"
T="ATOM=mma_tf32,WM=2,WN=2,FM=4,FN=8,STAGE=cp_async"
OUT=$OUT bash scripts/sweep.sh build-device "$E" "ATOM=mma_tf32" "$T,BK=32,STAGES=3,SWIZZLE=xor,PAD_KOUTER=8" "$T,BK=16,STAGES=4,SWIZZLE=xor,PAD_KOUTER=8" "$T,BK=32,STAGES=3,SWIZZLE=xor,SLAB_B=kinner" "$T,BK=32,STAGES=2,SWIZZLE=xor,PAD_KOUTER=8" "$T,BK=32,STAGES=3,SWIZZLE=xor,PAD_KOUTER=8,EPILOGUE=smem" "$T,BK=32,STAGES=3,PAD_SMEM=4,PAD_KOUTER=8,EPILOGUE=smem"
