// The GPU cases of wgmma with A from registers (WGMMA_A=regs, k:026), shared by the GPU
// test (tests/gpu/test_hopper_gemm.cpp) and the CPU test that compiles each for sm_90a and
// checks ptxas' spills (tests/cpu/driver/test_wgmma_compile.cpp): 16-bit K-major A
// (ldmatrix .x4), M-major A through SWAP_AB (.x4.trans), tf32 with a row-major B run
// swapped and tf32 with A given transposed (32-bit ld.shared of the M-major A, its slab
// rows in 128-byte chunks; raw, TF32_ROUND=none, or rounded, rna), ragged shapes, bias
// epilogues, f32 outputs and the warp-specialized, persistent, cluster and ping-pong
// schedules.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom::wgmma_rs_test {

struct Case {
  std::string expr;
  std::string knobs;
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs; }

inline std::vector<Case> cases() {
  const std::string ws = ",WARP_SPECIALIZE=1", persistent = ",WARP_SPECIALIZE=1,PERSISTENT=1,GROUP_M=8";
  const std::string bf16 = "ATOM=wgmma_bf16,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,WGMMA_A=regs";
  const std::string tf32_regs = "ATOM=wgmma_tf32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=4,WGMMA_A=regs";
  const std::string tf32 = tf32_regs + ",SWAP_AB=1";
  return {
      // 16-bit, K-major A: every thread on the ring; warp-specialized; the large schedule
      // (persistent 2-CTA clusters of 128x256 tiles); ping-pong consumers.
      {"matmul(A[1000,512]:bf16, B[776,512]:bf16.T)", bf16 + ",WM=2,BN=128"},
      {"matmul(A[777,336]:bf16, B[336,1000]:bf16)", bf16 + ",WM=2,BN=128" + ws},
      {"matmul(A[4096,1024]:bf16, B[1024,4096]:bf16)", bf16 + ",WM=2,BN=256,CLUSTER_M=2" + persistent},
      {"matmul(A[2000,512]:bf16, B[512,1496]:bf16)",
       bf16 + ",WM=2,FM=2,BN=128" + persistent + ",CONSUMERS=pingpong"},
      // 16-bit M-major A: swapped, B [K, N] row-major is the swapped problem's A
      // (ldmatrix .trans from 128-byte chunks of its 256-byte slab rows).
      {"matmul(A[300,512]:f16, B[512,1000]:f16)",
       "ATOM=wgmma_f16,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,SWAP_AB=1,WGMMA_A=regs,WM=2,BN=128" + ws},
      // tf32, B row-major (the defaults' orientation for it): ragged, f32 out, bias, the
      // large schedule (persistent 2-CTA clusters of 128x256 tiles).
      {"matmul(A[1000,520]:f32, B[520,776]:f32)", tf32 + ",WM=2,BN=128" + ws},
      {"relu(add(matmul(A[333,200]:f32, B[200,1000]:f32), bias[1000]:f32))", tf32 + ",WM=1,BN=64" + ws},
      {"matmul(A[4096,1024]:f32, B[1024,4096]:f32)", tf32 + ",WM=2,BN=256,CLUSTER_M=2" + persistent},
      {"matmul(A[1000,520]:tf32, B[520,2056]:tf32)", tf32 + ",WM=2,BN=256,CLUSTER_M=2" + persistent},
      // Swapped through the TMA store: the whole transposed tile, each warpgroup a column
      // band of C.
      {"matmul(A[1000,520]:tf32, B[520,2056]:tf32)",
       tf32 + ",WM=2,BN=128,CLUSTER_M=2,EPILOGUE=tma_store,EPI_BUFFERS=0" + persistent},
      // tf32, A given transposed (M-major) with a K-major B: unswapped, A in registers; the
      // large schedule with the TMA-store epilogue.
      {"matmul(A[520,1000]:f32.T, B[776,520]:f32.T)",
       tf32_regs + ",WM=2,BN=128" + ws},
      {"gelu(add(matmul(A[1024,2056]:tf32.T, B[1000,1024]:tf32.T), bias[1000]:tf32))",
       tf32_regs + ",WM=2,BN=256,CLUSTER_M=2,EPILOGUE=tma_store,EPI_BUFFERS=2" + persistent},
      // TF32_ROUND=rna: the register fills round each value to nearest (cvt.rna; the
      // default, none, passes the raw f32 bits, which the tensor core truncates), swapped
      // ragged, the large swapped schedule, A given transposed.
      {"matmul(A[1000,520]:f32, B[520,776]:f32)", tf32 + ",WM=2,BN=128,TF32_ROUND=rna" + ws},
      {"matmul(A[1000,520]:tf32, B[520,2056]:tf32)",
       tf32 + ",WM=2,BN=256,CLUSTER_M=2,TF32_ROUND=rna" + persistent},
      {"matmul(A[1024,2056]:tf32.T, B[1000,1024]:tf32.T)",
       tf32_regs + ",WM=2,BN=256,CLUSTER_M=2,EPILOGUE=tma_store,EPI_BUFFERS=2,TF32_ROUND=rna" +
           persistent},
      // WGMMA_FILLS=slab: each slab's fragments filled at once (two sets by slab parity),
      // the slab's wgmmas one group: the large swapped schedule, A given transposed.
      {"matmul(A[1000,520]:tf32, B[520,2056]:tf32)",
       tf32 + ",WM=2,BN=256,CLUSTER_M=2,WGMMA_FILLS=slab" + persistent},
      {"matmul(A[1024,2056]:tf32.T, B[1000,1024]:tf32.T)",
       tf32_regs + ",WM=2,BN=256,CLUSTER_M=2,EPILOGUE=tma_store,EPI_BUFFERS=2,WGMMA_FILLS=slab" +
           persistent},
      // tf32 K-major A from registers (ldmatrix b32 view), unswapped.
      {"matmul(A[1024,512]:f32, B[1024,512]:f32.T)",
       "ATOM=wgmma_tf32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=4,WGMMA_A=regs,WM=2,BN=128" + ws},
  };
}

}  // namespace loom::wgmma_rs_test
