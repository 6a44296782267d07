// The GPU cases of the transposing TMA stage (k:015: SLAB_A / SLAB_B = kinner with
// STAGE=tma): tf32 operands that are not K-major — B [K, N] as given, A given transposed,
// both — land in a staging slab by TMA and the threads write them K-major for the
// shared-A wgmma. Shared by the GPU test (tests/gpu/test_hopper_gemm.cpp, against the fp64
// reference) and the CPU test that compiles each for sm_90a and checks ptxas' spills
// (tests/cpu/driver/test_wgmma_compile.cpp): ragged shapes, a bias epilogue, the
// warp-specialized, persistent and cluster schedules, the TMA store, 2-, 3- and 4-slot rings
// (BK = 16 with the 64-byte swizzle), the 4096^3 forms the benchmark measures, and the
// sm_90a default for neither operand K-major.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom::wgmma_transpose_test {

struct Case {
  std::string expr;
  std::string knobs;
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs; }

inline std::vector<Case> cases() {
  const std::string tf32 = "ATOM=wgmma_tf32,WGMMA_A=smem,SWAP_AB=0,STAGE=tma";
  const std::string k32 = ",BK=32,SWIZZLE=128B", k16 = ",BK=16,SWIZZLE=64B";
  const std::string large = ",WM=2,WN=1,FM=1,FN=1,WARP_SPECIALIZE=1,PERSISTENT=1,GROUP_M=8";
  const std::string store = ",EPILOGUE=tma_store,EPI_BUFFERS=2";
  return {
      // B [K, N]: every thread on the ring; warp-specialized; ragged M, N, K and a bias.
      {"matmul(A[1000,520]:f32, B[520,776]:f32)", tf32 + k32 + ",SLAB_B=kinner,WM=1,BN=64,STAGES=2"},
      {"relu(add(matmul(A[333,200]:tf32, B[200,1000]:tf32), bias[1000]:tf32))",
       tf32 + k32 + ",SLAB_B=kinner,WM=2,BN=128,STAGES=3,WARP_SPECIALIZE=1"},
      // The large schedule's forms: 128x256 with 2 slots, 128x256 at BK = 16 with 4, 128x128
      // with 4; 2-CTA clusters (the staging box of B multicast by rows), the TMA store.
      {"matmul(A[4096,4096]:tf32, B[4096,4096]:tf32)",
       tf32 + k32 + large + store + ",SLAB_B=kinner,BN=256,STAGES=2,CLUSTER_M=2"},
      {"matmul(A[2048,4096]:tf32, B[4096,8192]:tf32)",
       tf32 + k16 + large + store + ",SLAB_B=kinner,BN=256,STAGES=4,CLUSTER_M=2"},
      {"matmul(A[1000,1032]:tf32, B[1032,2056]:tf32)",
       tf32 + k32 + large + store + ",SLAB_B=kinner,BN=128,STAGES=4,CLUSTER_M=2"},
      // A given transposed (its staging slab [BK][BM]), K-major B: 3 slots.
      {"matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32.T)",
       tf32 + k32 + large + store + ",SLAB_A=kinner,BN=256,STAGES=3,CLUSTER_M=2"},
      {"gelu(add(matmul(A[1024,2056]:tf32.T, B[1000,1024]:tf32.T), bias[1000]:tf32))",
       tf32 + k32 + large + ",SLAB_A=kinner,BN=128,STAGES=3,EPILOGUE=direct"},
      // Neither K-major: both transposed.
      {"matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32)",
       tf32 + k32 + large + store + ",SLAB_A=kinner,SLAB_B=kinner,BN=256,STAGES=2,CLUSTER_M=2"},
      {"matmul(A[520,1000]:f32.T, B[520,776]:f32)",
       tf32 + k32 + ",SLAB_A=kinner,SLAB_B=kinner,WM=2,BN=128,STAGES=2,WARP_SPECIALIZE=1"},
      // The sm_90a default for neither K-major (BK = 16, 4 slots), as knobs and as the
      // default itself, ragged.
      {"matmul(A[2048,3072]:tf32.T, B[2048,4096]:tf32)",
       tf32 + k16 + large + store + ",SLAB_A=kinner,SLAB_B=kinner,BN=256,STAGES=4,CLUSTER_M=2"},
      {"matmul(A[1032,4000]:tf32.T, B[1032,3000]:tf32)", ""},
  };
}

}  // namespace loom::wgmma_transpose_test
