// The CLUSTER_K cases of tests/gpu/test_cluster_k.cpp: split-K reduced inside a cluster
// through distributed shared memory (l:022, k:057), alone and with SPLITK across clusters,
// warp-specialized or not, swap-AB decode, a K that leaves slices empty, a bias, f16 and
// f32 outputs. Shared with a CPU test that compiles each with NVRTC for sm_90a (and checks
// ptxas' spill report), so the GPU run is left with the numerics. Every TMA operand row
// is a multiple of 16 bytes.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom::cluster_k {

struct Case {
  std::string expr;
  std::string knobs;  // empty: the shipped defaults
};

inline void PrintTo(const Case& c, std::ostream* os) {
  *os << c.expr << " knobs " << (c.knobs.empty() ? "(defaults)" : c.knobs);
}

inline const std::string kWs =
    "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,WARP_SPECIALIZE=1";
inline const std::string kDecode =
    "ATOM=wgmma_bf16,SWAP_AB=1,WM=1,WN=1,FM=1,FN=1,STAGE=tma,SWIZZLE=128B,BK=128,"
    "EPILOGUE=direct,WARP_SPECIALIZE=1";

inline std::vector<Case> cases() {
  std::vector<Case> v;
  // The skinny shape: its default, then the cluster alone and across clusters.
  const std::string skinny = "matmul(A[128,16384]:bf16, B[16384,128]:bf16)";
  v.push_back({skinny, ""});
  // (CLUSTER_K=2 here leaves each thread 32 cells of its 64 x 128 slice to sum, and ptxas
  // spills 12 B: not a case until the reduction loads vectors.)
  for (int c : {4, 8}) v.push_back({skinny, kWs + ",CLUSTER_K=" + std::to_string(c)});
  v.push_back({skinny, kWs + ",CLUSTER_K=8,SPLITK=16,SPLITK_MODE=reduce"});
  v.push_back({skinny, kWs + ",CLUSTER_K=4,SPLITK=32,SPLITK_MODE=reduce"});
  v.push_back({"matmul(A[128,16384]:bf16, B[16384,128]:bf16, out=f32)",
               kWs + ",CLUSTER_K=8,SPLITK=16,SPLITK_MODE=atomic"});
  // Decode (swap-AB): its defaults, and 64 weight tiles x 2 CTAs at M = 16 and 64.
  for (const char* m : {"16", "64"}) {
    const std::string e = std::string("matmul(A[") + m + ",4096]:bf16, B[4096,4096]:bf16)";
    v.push_back({e, ""});
    v.push_back({e, kDecode + ",BN=" + m + ",STAGES=6,CLUSTER_K=2"});
  }
  v.push_back({"matmul(A[16,4096]:bf16, B[4096,4096]:bf16)", kDecode + ",BN=16,STAGES=8,CLUSTER_K=4"});
  // Ragged: K = 5000 in 8 slices of whole slabs (the last one short), partial tiles,
  // f16; no warp specialization; a fused bias and activation applied once.
  v.push_back({"matmul(A[200,5000]:f16, B[5000,136]:f16)",
               "ATOM=wgmma_f16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
               "WARP_SPECIALIZE=1,CLUSTER_K=8"});
  v.push_back({"matmul(A[256,4160]:bf16, B[256,4160]:bf16.T)",
               "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
               "CLUSTER_K=4"});
  v.push_back({"relu(linear(X[256,8192]:bf16, W[384,8192]:bf16, bias[384]:bf16))",
               kWs + ",CLUSTER_K=4,SPLITK=2"});
  return v;
}

}  // namespace loom::cluster_k
