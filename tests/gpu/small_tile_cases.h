// The small-tile cases of tests/gpu/test_small_tiles.cpp (the Hopper GEMM's skinny and
// decode shapes, organized as cuBLAS's nvjet kernels are): 64 x 32 (and 64 x 16, 64 x 8) wgmma
// tiles of one consumer warpgroup, 2-D clusters (CLUSTER_M x CLUSTER_N, A multicast along
// N and B along M), deep rings (STAGES up to 16), split-K whose partial tiles the last CTA
// of a tile sums in the same launch (SPLITK_MODE=partials), and swapped decode with the
// cluster across the small dimension sharing the weight tile. Shared with a CPU test that
// compiles each with NVRTC for sm_90a (and checks ptxas' spill report), so the GPU run is
// left with the numerics. Every TMA operand row is a multiple of 16 bytes.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom::small_tile {

struct Case {
  std::string expr;
  std::string knobs;  // empty: the shipped defaults
};

inline void PrintTo(const Case& c, std::ostream* os) {
  *os << c.expr << " knobs " << (c.knobs.empty() ? "(defaults)" : c.knobs);
}

// One consumer warpgroup of one m64nBNk16 atom, 64-deep slabs in a deep ring, a producer
// warpgroup.
inline std::string small(const std::string& atom, int bn, int stages) {
  return "ATOM=" + atom + ",WM=1,WN=1,FM=1,FN=1,BN=" + std::to_string(bn) +
         ",STAGE=tma,SWIZZLE=128B,BK=64,STAGES=" + std::to_string(stages) +
         ",EPILOGUE=direct,WARP_SPECIALIZE=1";
}
// cuBLAS's 128x128x16384 organization: 64 x 32 tiles in 2 x 4 clusters, K split S ways.
inline std::string skinny(int splits) {
  return small("wgmma_bf16", 32, 8) + ",CLUSTER_M=2,CLUSTER_N=4,SPLITK=" +
         std::to_string(splits) + ",SPLITK_MODE=partials";
}
// cuBLAS's decode organization: swapped, 64-row weight tiles, a 2-CTA cluster across the
// small dimension sharing each weight slab.
inline std::string decode(int bn, int stages) {
  return small("wgmma_bf16", bn, stages) + ",SWAP_AB=1,CLUSTER_N=2";
}

inline std::vector<Case> cases() {
  std::vector<Case> v;
  // The skinny shape, 11 splits (88 CTAs: cuBLAS's count) and 16 (128 CTAs).
  const std::string sk = "matmul(A[128,16384]:bf16, B[16384,128]:bf16)";
  v.push_back({sk, skinny(11)});
  v.push_back({sk, skinny(16)});
  // The 2-D cluster without split-K, persistent; 1-D clusters along N alone.
  v.push_back({"matmul(A[512,1024]:bf16, B[1024,512]:bf16)",
               small("wgmma_bf16", 32, 8) + ",CLUSTER_M=2,CLUSTER_N=4,PERSISTENT=1"});
  v.push_back({"matmul(A[256,2048]:f16, B[512,2048]:f16.T)",
               small("wgmma_f16", 64, 6) + ",CLUSTER_N=4"});
  // Ragged M, N, K (partial tiles, a short last split), K-major B, a fused bias and
  // activation, an f32 output.
  v.push_back({"matmul(A[120,2000]:bf16, B[2000,120]:bf16)", skinny(4)});
  v.push_back({"matmul(A[136,3000]:bf16, B[200,3000]:bf16.T)", skinny(6)});
  v.push_back({"relu(linear(X[128,4096]:bf16, W[128,4096]:bf16, bias[128]:bf16))", skinny(8)});
  v.push_back({"matmul(A[128,4096]:bf16, B[4096,128]:bf16, out=f32)", skinny(8)});
  // Decode: 64 weight tiles x 2 CTAs sharing each weight slab, 16 stages (M = 64: 32-wide
  // halves; M = 16: 8-wide halves), and with a bias.
  v.push_back({"matmul(A[64,4096]:bf16, B[4096,4096]:bf16)", decode(32, 16)});
  v.push_back({"matmul(A[16,4096]:bf16, B[4096,4096]:bf16)", decode(8, 16)});
  // 128 CTAs at M = 16 the other way: two K halves of each weight tile, no cluster.
  v.push_back({"matmul(A[16,4096]:bf16, B[4096,4096]:bf16)",
               small("wgmma_bf16", 16, 12) + ",SWAP_AB=1,SPLITK=2,SPLITK_MODE=partials"});
  v.push_back({"linear(X[64,4096]:bf16, W[4096,4096]:bf16, bias[4096]:bf16)", decode(32, 16)});
  v.push_back({"matmul(A[48,1024]:bf16, B[1024,1000]:bf16, out=f32)", decode(32, 8)});
  return v;
}

}  // namespace loom::small_tile
