// GEMMs on wgmma with run-time sizes (tests/gpu/test_hopper_symbolic.cpp runs each at
// several sizes from one compiled plan; tests/cpu/driver/test_wgmma_symbolic_compile.cpp
// compiles each, every range's kernel included, for sm_90a with NVRTC and checks ptxas
// spilled nothing). Empty knobs: the sm_90a defaults (families/wgmma.cpp,
// symbolic_wgmma_defaults: the large persistent schedule; for a run-time M alone, a kernel
// per range of M, runtime_size_ranges, picked at each launch). The sizes are those of the
// GPU run: M = 1, 7, 64, 1000, 4097 for a run-time M (and each range's ends for the
// default's ranges), off-grid triples for M, N and K (N and K multiples of 8: TMA rows;
// tails in N and K against the 256-wide tiles and 64-deep slabs).
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

// Both ends of every range of the default's kernels (1..16, 17..48, 49..64, 65..80,
// 81..95, 96..128, 129..256, 257..512, 513.. at N = K = 4096; 384 is a top whose neighbour
// has its knobs) and the token counts above.
inline std::vector<std::map<std::string, int64_t>> range_ends() {
  std::vector<std::map<std::string, int64_t>> out;
  for (int64_t m : {1, 7, 16, 17, 48, 49, 64, 65, 80, 81, 95, 96, 128, 129, 256, 257, 384, 385,
                    512, 513, 1000, 4097})
    out.push_back({{"M", m}});
  return out;
}

// The large class's organization, spelled out: persistent, warp-specialized, 2-CTA clusters
// along M, the strip-buffered TMA store.
inline const std::string kSymbolicLarge =
    "ATOM=wgmma_bf16,WM=2,WN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,GROUP_M=8,"
    "WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2,EPILOGUE=tma_store,EPI_BUFFERS=2";

inline std::vector<SymbolicCase> symbolic_cases() {
  return {
      // The default for a run-time M on sm_90a (a kernel per range of M), and the large
      // schedule spelled out.
      {"matmul(A[M,4096]:bf16, B[4096,4096]:bf16)", "", {"M"}, range_ends()},
      {"matmul(A[M,1024]:bf16, B[1024,2048]:bf16)", kSymbolicLarge, {"M"}, token_counts()},
      // A residual read through the swapped decode tile's transposed cells: the default's
      // ranges at M = 1, 7, 64, 1000, 4097.
      {"add(matmul(A[M,1024]:bf16, B[1024,2048]:bf16), R[M,2048]:bf16)", "", {"M"},
       token_counts()},
      // linear's [N, K] weight with a fused bias and gelu, f16, the default.
      {"gelu(linear(X[M,512]:f16, W[1032,512]:f16, bias[1032]:f16))", "", {"M"}, token_counts()},
      // Every size at run time, the default (the large schedule) and explicit knobs.
      {"matmul(A[M,K]:bf16, B[K,N]:bf16)", "", {"M", "N", "K"},
       {{{"M", 1}, {"N", 136}, {"K", 200}},
        {{"M", 64}, {"N", 4104}, {"K", 4096}},
        {{"M", 1000}, {"N", 1032}, {"K", 4104}},
        {{"M", 4097}, {"N", 520}, {"K", 72}}}},
      {"gelu(linear(X[M,K]:f16, W[N,K]:f16, bias[N]:f16))", "", {"M", "N", "K"},
       {{{"M", 7}, {"N", 264}, {"K", 136}}, {{"M", 3000}, {"N", 1288}, {"K", 520}}}},
      {"matmul(A[M,K]:bf16, B[K,N]:bf16)",
       "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,GROUP_M=8,"
       "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2",
       {"M", "N", "K"},
       {{{"M", 7}, {"N", 136}, {"K", 200}},
        {{"M", 1000}, {"N", 1032}, {"K", 4104}},
        {{"M", 4097}, {"N", 520}, {"K", 72}}}},
      // Epilogue operands by TMA (EPI_LOAD=tma, k:056): the residual's and the gate's tensor
      // maps encoded at each launch from M (and from N and K below).
      {"add(linear(X[M,1024]:bf16, W[2048,1024]:bf16, b[2048]:bf16), R[M,2048]:bf16)",
       "ATOM=wgmma_bf16,WM=2,WN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=3,GROUP_M=8,"
       "WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_K=1,EPILOGUE=tma_store,EPI_BUFFERS=2,EPI_LOAD=tma,"
       "EPI_LOAD_BUFFERS=2",
       {"M"}, token_counts()},
      {"mul(silu(linear(X[M,K]:bf16, W[N,K]:bf16)), E0[M,N]:bf16)",
       "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,GROUP_M=8,"
       "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2,EPI_LOAD=tma",
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
