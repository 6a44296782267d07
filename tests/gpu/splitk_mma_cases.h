// The split-K cases on tensor-core tiles of tests/gpu/test_splitk_mma.cpp (mma.sync and
// wgmma, the reduce, atomic and fixup combines). Shared with a CPU test that compiles
// each with NVRTC (and checks ptxas' spill report), so the GPU run is left with the
// numerics. Every TMA operand row is a multiple of 16 bytes.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom::splitk_mma {

struct Case {
  std::string expr;
  std::string knobs;  // empty: the shipped defaults (sm_90a: wgmma + split-K fixup)
  bool wgmma = true;  // sm_90a only; mma.sync cases compile for sm_80 too
};

inline void PrintTo(const Case& c, std::ostream* os) {
  *os << c.expr << " knobs " << (c.knobs.empty() ? "(defaults)" : c.knobs);
}

inline const std::string kWs =
    "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,WARP_SPECIALIZE=1";

inline std::vector<Case> cases() {
  std::vector<Case> v;
  // The shape: the default, then fixup at the split counts around it, the other
  // combines, an f32 output.
  const std::string skinny = "matmul(A[128,16384]:bf16, B[16384,128]:bf16)";
  v.push_back({skinny, ""});
  for (int s : {16, 32, 64, 128})
    v.push_back({skinny, kWs + ",SPLITK=" + std::to_string(s) + ",SPLITK_MODE=fixup"});
  v.push_back({skinny, kWs + ",SPLITK=32,SPLITK_MODE=reduce"});
  v.push_back({"matmul(A[128,16384]:bf16, B[16384,128]:bf16, out=f32)",
               kWs + ",SPLITK=32,SPLITK_MODE=atomic"});
  v.push_back({"matmul(A[128,16384]:bf16, B[16384,128]:bf16, out=f32)",
               kWs + ",SPLITK=64,SPLITK_MODE=fixup"});
  // A fused bias and activation (applied once, by the CTA that finishes the tile), f16
  // with a K no chunk divides and partial tiles, 2-CTA clusters, no warp specialization.
  v.push_back({"relu(linear(X[256,8192]:bf16, W[384,8192]:bf16, bias[384]:bf16))",
               kWs + ",SPLITK=8,SPLITK_MODE=fixup"});
  v.push_back({"matmul(A[200,5000]:f16, B[5000,136]:f16)",
               "ATOM=wgmma_f16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
               "WARP_SPECIALIZE=1,SPLITK=7,SPLITK_MODE=fixup"});
  v.push_back({"matmul(A[384,4096]:bf16, B[4096,256]:bf16)",
               kWs + ",CLUSTER_M=2,SPLITK=4,SPLITK_MODE=reduce"});
  v.push_back({"matmul(A[256,4096]:bf16, B[256,4096]:bf16.T)",
               "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
               "SPLITK=8,SPLITK_MODE=fixup"});
  // mma.sync tiles.
  const std::string mma = "ATOM=mma_bf16,WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=cp_async,STAGES=3";
  v.push_back({"matmul(A[128,8192]:bf16, B[8192,128]:bf16)", mma + ",SPLITK=16,SPLITK_MODE=fixup", false});
  v.push_back({"matmul(A[128,8192]:bf16, B[8192,128]:bf16)", mma + ",SPLITK=16", false});
  v.push_back({"matmul(A[128,8192]:bf16, B[8192,128]:bf16, out=f32)",
               mma + ",SPLITK=16,SPLITK_MODE=atomic", false});
  v.push_back({"gelu(linear(X[100,3000]:f16, W[72,3000]:f16, bias[72]:f16))",
               "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=32,STAGE=cp_async,STAGES=3,SPLITK=5,"
               "SPLITK_MODE=fixup", false});
  return v;
}

}  // namespace loom::splitk_mma
