// GEMMs on wgmma with run-time sizes (tests/gpu/test_hopper_symbolic.cpp runs each at
// several sizes from one compiled plan; tests/cpu/driver/test_wgmma_symbolic_compile.cpp
// compiles each for sm_90a with NVRTC and checks ptxas spilled nothing). Empty knobs: the
// sm_90a default for a run-time M (families/wgmma.cpp, symbolic_m_wgmma_defaults: the large
// persistent schedule). The sizes are those of the GPU run: M = 1, 7, 64, 1000, 4097 for a
// run-time M, off-grid triples for M, N and K (N and K multiples of 8: TMA rows).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom {

struct SymbolicCase {
  std::string expr;
  std::string knobs;
  std::vector<std::string> runtime;                  // the size symbols given at execute()
  std::vector<std::map<std::string, int64_t>> sizes;  // one execute per entry
};

inline std::vector<std::map<std::string, int64_t>> token_counts() {
  return {{{"M", 1}}, {{"M", 7}}, {{"M", 64}}, {{"M", 1000}}, {{"M", 4097}}};
}

// The large class's organization, spelled out: persistent, warp-specialized, 2-CTA clusters
// along M, the strip-buffered TMA store.
inline const std::string kSymbolicLarge =
    "ATOM=wgmma_bf16,WM=2,WN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,GROUP_M=8,"
    "WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2,EPILOGUE=tma_store,EPI_BUFFERS=2";

inline std::vector<SymbolicCase> symbolic_cases() {
  return {
      // The default for a run-time M on sm_90a, and the same schedule spelled out.
      {"matmul(A[M,4096]:bf16, B[4096,4096]:bf16)", "", {"M"}, token_counts()},
      {"matmul(A[M,1024]:bf16, B[1024,2048]:bf16)", kSymbolicLarge, {"M"}, token_counts()},
      // linear's [N, K] weight with a fused bias and gelu, f16, the default.
      {"gelu(linear(X[M,512]:f16, W[1032,512]:f16, bias[1032]:f16))", "", {"M"}, token_counts()},
      // Every size at run time: explicit knobs (the defaults keep SIMT for a run-time N or
      // K, whose row alignment is unknown when compiling).
      {"matmul(A[M,K]:bf16, B[K,N]:bf16)",
       "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,GROUP_M=8,"
       "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2",
       {"M", "N", "K"},
       {{{"M", 7}, {"N", 136}, {"K", 200}},
        {{"M", 1000}, {"N", 1032}, {"K", 4104}},
        {{"M", 4097}, {"N", 520}, {"K", 72}}}},
      // One CTA per tile (no persistent walk), N-major B given transposed, a run-time K.
      {"matmul(A[M,K]:f16, B[384,K]:f16.T)",
       "ATOM=wgmma_f16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
       "WARP_SPECIALIZE=1",
       {"M", "K"},
       {{{"M", 1}, {"K", 64}}, {{"M", 300}, {"K", 1000}}, {{"M", 4097}, {"K", 2056}}}},
  };
}

}  // namespace loom
