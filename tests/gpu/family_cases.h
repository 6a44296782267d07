// One representative kernel of every family Loom generates, at odd shapes (ragged against
// every tile, so predicated edges and clipped boxes run): the cases the reliability checks
// run — tests/gpu/test_families.cpp (verified against fp64, and what
// scripts/sanitize.sh runs under compute-sanitizer's memcheck, racecheck, synccheck and
// initcheck), tests/gpu/test_nan_inf.cpp (NaN and Inf inputs) — and that
// tests/cpu/driver/test_family_cases.cpp compiles with NVRTC for sm_90a on every CPU run,
// checking that each case still builds the family it names (a default that moves would
// otherwise leave a family untested without anyone noticing).
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom::family_test {

struct Case {
  std::string family;  // test name part
  std::string expr;
  std::string knobs;
  // Knob values the compiled kernel must record (CompileState::used_knobs): what makes
  // it this family.
  std::vector<std::pair<std::string, std::string>> must_use;
};

inline void PrintTo(const Case& c, std::ostream* os) {
  *os << c.family << ": " << c.expr << " knobs " << (c.knobs.empty() ? "(defaults)" : c.knobs);
}

inline std::vector<Case> cases() {
  const std::string tma = "STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4";
  const std::string persistent = ",WARP_SPECIALIZE=1,PERSISTENT=1,GROUP_M=8";
  return {
      {"simt", "relu(matmul(A[67,45]:f32, B[45,71]:f32))", "ATOM=fma", {{"ATOM", "fma"}}},
      {"mma_sync", "add(linear(X[67,72]:f16, W[70,72]:f16, bias[70]:f16), R[67,70]:f16)",
       "ATOM=mma_f16", {{"ATOM", "mma_f16"}}},
      {"wgmma_cluster", "matmul(A[800,512]:bf16, B[512,1000]:bf16)",
       "ATOM=wgmma_bf16," + tma + ",WM=2,BN=256,CLUSTER_M=2" + persistent,
       {{"ATOM", "wgmma_bf16"}, {"CLUSTER_M", "2"}, {"PERSISTENT", "1"}}},
      {"tma_store", "relu(matmul(A[333,200]:bf16, B[200,520]:bf16))",
       "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=256," + tma + persistent +
           ",EPILOGUE=tma_store,EPI_BUFFERS=2",
       {{"ATOM", "wgmma_bf16"}, {"EPILOGUE", "tma_store"}}},
      {"split_k", "matmul(A[200,5000]:f16, B[5000,136]:f16)",
       "ATOM=wgmma_f16,WM=2,WN=1,BN=128," + tma + ",WARP_SPECIALIZE=1,SPLITK=7,SPLITK_MODE=fixup",
       {{"ATOM", "wgmma_f16"}, {"SPLITK", "7"}, {"SPLITK_MODE", "fixup"}}},
      {"stream_k", "matmul(A[1000,520]:f16, B[520,1496]:f16)",
       "ATOM=wgmma_f16," + tma + ",WM=2,BN=256,PERSISTENT_CTAS=40" + persistent + ",STREAM_K=1",
       {{"ATOM", "wgmma_f16"}, {"STREAM_K", "1"}}},
      {"swap_decode", "matmul(A[20,520]:bf16, B[520,1096]:bf16)",
       "ATOM=wgmma_bf16," + tma + ",SWAP_AB=1,WN=1,FM=1,FN=1,WM=1,BN=24,WARP_SPECIALIZE=1",
       {{"ATOM", "wgmma_bf16"}, {"SWAP_AB", "1"}}},
      {"attention_mma_sync",
       "attention(Q[1,2,77,64]:f16, K[1,2,100,64]:f16, V[1,2,100,64]:f16, causal=true)",
       "ATTN_MMA=mma_sync", {{"ATTN_MMA", "mma_sync"}}},
      {"attention_wgmma",
       "attention(Q[2,4,130,128]:bf16, K[2,2,200,128]:bf16, V[2,2,200,128]:bf16)", "ATTN_MMA=wgmma",
       {{"ATTN_MMA", "wgmma"}}},
  };
}

}  // namespace loom::family_test
