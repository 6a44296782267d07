// The ACC=f16 GEMMs the GPU test runs (tests/gpu/test_mma_gemm.cpp), shared with the CPU
// test that compiles each for sm_90a and sm_80 without a GPU
// (tests/cpu/driver/test_compile_kernels.cpp), so every case here is known to compile,
// without spills, before it reaches a GPU. Each is {expression, knobs}.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace loom {

inline std::vector<std::pair<std::string, std::string>> acc_f16_gemm_cases() {
  const std::string tile = "ATOM=mma_f16,ACC=f16,WM=2,WN=2,FM=2,FN=4,BK=32,";
  const std::string sync = tile + "STAGE=sync,STAGES=2";
  const std::string async = tile + "STAGE=cp_async,STAGES=3";
  return {
      // The mma defaults: 4x4 atoms per warp on a ragged shape, 4x8 on an aligned one
      // (f16 output: each pair of accumulator values stored as one .b32).
      {"matmul(A[1000,333]:f16, B[333,777]:f16)", "ATOM=mma_f16,ACC=f16"},
      {"matmul(A[512,512]:f16, B[512,512]:f16)", "ATOM=mma_f16,ACC=f16"},
      // Odd shapes, both transports, both transposes, every output type.
      {"matmul(A[1000,333]:f16, B[333,777]:f16)", sync},
      {"matmul(A[333,1000]:f16.T, B[777,333]:f16.T)", async},
      {"matmul(A[333,1000]:f16.T, B[333,777]:f16, out=f32)", sync},
      {"matmul(A[1000,333]:f16, B[777,333]:f16.T, out=bf16)", async},
      // Fused epilogues on the unpacked accumulator.
      {"relu(add(matmul(A[1000,333]:f16, B[777,333]:f16.T), bias[777]:f32))", async},
      {"relu(add(matmul(A[1000,333]:f16, B[333,777]:f16, out=f32), bias[777]:f32))", sync},
      {"gelu(linear(X[1000,333]:f16, W[777,333]:f16, bias[777]:f16))", "ATOM=mma_f16,ACC=f16"},
      // Batch.
      {"bmm(A[4,129,72]:f16, B[4,72,100]:f16, out=f32)", sync},
      // Element-wise fragments, and double-buffered ones.
      {"matmul(A[1000,333]:f16, B[333,777]:f16)", async + ",LDMATRIX=0"},
      {"matmul(A[1000,333]:f16, B[333,777]:f16)", "ATOM=mma_f16,ACC=f16,FRAG_BUFFERS=2"},
      // A long reduction: 256 roundings of the running sum, where the threshold's
      // sqrt(K/16) growth is tested (f32 output, so no output rounding hides it).
      {"matmul(A[256,4096]:f16, B[4096,256]:f16, out=f32)", "ATOM=mma_f16,ACC=f16"},
  };
}

}  // namespace loom
