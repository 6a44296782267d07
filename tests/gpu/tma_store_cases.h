// The GPU cases of the TMA-store epilogue (EPILOGUE=tma_store, k:053), shared by the GPU
// test (tests/gpu/test_hopper_gemm.cpp) and the CPU test that compiles each for sm_90a
// and checks ptxas' spills (tests/cpu/driver/test_wgmma_compile.cpp). Every output row is
// a multiple of 16 bytes (the tensor map's row stride); M and N are ragged against the
// tile so boxes hang over both edges, where the tensor map clips them.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom::tma_store_test {

struct Case {
  std::string expr;
  std::string knobs;
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs; }

// Rung 6 of `loom ladder hopper`: 128 x 256 tiles, 2 consumer warpgroups, persistent,
// warp-specialized; STAGES=3 leaves room for the 64 KB output tile.
inline std::string rung6(const std::string& dtype) {
  return "ATOM=wgmma_" + dtype + ",WM=2,WN=1,FM=1,FN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,"
         "STAGES=3,GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store";
}

// Rung 6 since 2026-11-22: the tile streamed through 2 strip buffers per consumer
// warpgroup (EPI_BUFFERS=2, 32 KB, stmatrix for 16-bit outputs), which keeps STAGES=4.
inline std::string rung6_strips(const std::string& dtype) {
  return "ATOM=wgmma_" + dtype + ",WM=2,WN=1,FM=1,FN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,"
         "STAGES=4,GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2";
}

// The strip-buffered epilogue: the new large-wgmma defaults' shapes and every epilogue
// and output type it composes with.
inline std::vector<Case> strip_cases() {
  return {
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", rung6_strips("bf16") + ",CLUSTER_M=2"},
      {"matmul(A[2048,1024]:f16, B[1024,2048]:f16)", rung6_strips("f16")},
      {"relu(linear(X[1000,512]:bf16, W[3000,512]:bf16, bias[3000]:bf16))", rung6_strips("bf16")},
      {"add(matmul(A[1000,256]:bf16, B[256,1000]:bf16), R[1000,1000]:bf16)", rung6_strips("bf16")},
      {"mul(matmul(A[1000,256]:bf16, B[256,1000]:bf16), 0.5)", rung6_strips("bf16")},
      // f32 outputs: 32-column strips, plain stores, still STAGES=4.
      {"matmul(A[1000,512]:bf16, B[512,1000]:bf16, out=f32)", rung6_strips("bf16")},
      {"matmul(A[1000,512]:f32, B[1000,512]:f32.T)",
       "ATOM=wgmma_tf32,WM=2,WN=1,FM=1,FN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=4,"
       "GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2"},
      {"matmul(A[800,512]:bf16, B[512,1000]:bf16)", rung6_strips("bf16") + ",CLUSTER_M=2"},
      // BN=192 in a cluster of 2: B's three 64-column chunks split by rows among the ranks,
      // and three strips through two buffers (hung at 8192x8192x1024 before the fix).
      {"matmul(A[1024,1024]:bf16, B[1024,1000]:bf16)",
       "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=192,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
       "GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2,CLUSTER_M=2"},
      // Not specialized, one warpgroup of two m64n64 atoms.
      {"matmul(A[333,200]:bf16, B[200,520]:bf16)",
       "ATOM=wgmma_bf16,WM=1,FN=2,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
       "EPILOGUE=tma_store,EPI_BUFFERS=2"},
  };
}

// The tile transition (2026-11-22): WGMMA_ZERO=scale_d (no zeroing loop; the tile's
// first k-step issues wgmma with scale-d 0) and EPI_SYNC=1 (one named barrier per strip)
// are the defaults every case above runs; these add the old forms for A/B and the edges
// of the new ones: a tile of one k-slab (scale-d 0 on its only slab's first step), four
// strip buffers (bulk.wait.read 2), 32-column f32 strips, register A (split-K and
// ping-pong: tests/gpu/test_hopper_gemm.cpp).
inline std::vector<Case> transition_cases() {
  return {
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)",
       rung6_strips("bf16") + ",CLUSTER_M=2,WGMMA_ZERO=explicit,EPI_SYNC=2"},
      {"matmul(A[2048,1024]:f16, B[1024,2048]:f16)", rung6_strips("f16") + ",EPI_SYNC=2"},
      {"matmul(A[2048,1024]:f16, B[1024,2048]:f16)", rung6_strips("f16") + ",WGMMA_ZERO=explicit"},
      {"matmul(A[1000,64]:bf16, B[64,1000]:bf16)", rung6_strips("bf16")},
      {"matmul(A[1000,512]:bf16, B[512,1000]:bf16)",
       "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=3,"
       "GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=4"},
      {"matmul(A[1000,512]:bf16, B[512,1000]:bf16, out=f32)", rung6_strips("bf16") + ",CLUSTER_M=2"},
      {"matmul(A[1000,512]:bf16, B[512,1000]:bf16)",
       "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
       "GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2,WGMMA_A=regs"},
  };
}

// The same knobs without the TMA-store epilogue (run by tests/gpu/test_hopper_gemm.cpp's
// GpuTileTransition): the old zeroing loop under ping-pong and cooperative consumers,
// and scale-d under split-K (each split's slab loop starts at 0).
inline std::vector<Case> transition_gemm_cases() {
  const std::string bf16 = "ATOM=wgmma_bf16,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,WM=2,BN=256";
  const std::string persistent = ",WARP_SPECIALIZE=1,PERSISTENT=1,GROUP_M=8";
  return {
      {"matmul(A[4096,1024]:bf16, B[1024,4096]:bf16)",
       bf16 + persistent + ",CONSUMERS=pingpong,WGMMA_ZERO=explicit"},
      {"matmul(A[2000,512]:f16, B[512,1496]:f16)",
       "ATOM=wgmma_f16,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,WM=2,BN=256" + persistent +
           ",WGMMA_ZERO=explicit"},
      {"matmul(A[256,4096]:bf16, B[4096,512]:bf16)",
       bf16 + ",WARP_SPECIALIZE=1,SPLITK=4,SPLITK_MODE=reduce"},
  };
}

inline std::vector<Case> cases() {
  const std::string tma = "STAGE=tma,SWIZZLE=128B,BK=64,EPILOGUE=tma_store";
  std::vector<Case> out = {
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", rung6("bf16")},
      {"matmul(A[2048,1024]:f16, B[1024,2048]:f16)", rung6("f16")},
      // Ragged M with a fused bias + relu: the bias loads past N are predicated off.
      {"relu(linear(X[1000,512]:bf16, W[3000,512]:bf16, bias[3000]:bf16))", rung6("bf16")},
      // Ragged N, and a residual read through the same predicates.
      {"matmul(A[2000,512]:f16, B[512,1496]:f16)", rung6("f16")},
      {"add(matmul(A[1000,256]:bf16, B[256,1000]:bf16), R[1000,1000]:bf16)", rung6("bf16")},
      // f32 output: 32-column strips, two boxes per 64 columns.
      {"matmul(A[512,512]:bf16, B[512,512]:bf16, out=f32)",
       "ATOM=wgmma_bf16,WM=2,BN=128,STAGES=4,WARP_SPECIALIZE=1,PERSISTENT=1,GROUP_M=8," + tma},
      // 2-CTA clusters (multicast B), a cluster half past M.
      {"matmul(A[800,512]:bf16, B[512,1000]:bf16)", rung6("bf16") + ",CLUSTER_M=2"},
      {"matmul(A[4096,1024]:bf16, B[1024,4096]:bf16)", rung6("bf16") + ",CLUSTER_M=2"},
      // Not persistent; not specialized (everyone waits on the ring, one warpgroup).
      {"matmul(A[2048,2048]:bf16, B[2048,2048]:bf16)",
       "ATOM=wgmma_bf16,WM=1,BN=128,STAGES=4,WARP_SPECIALIZE=1," + tma},
      {"matmul(A[333,200]:bf16, B[200,520]:bf16)", "ATOM=wgmma_bf16,WM=1,BN=64,STAGES=4," + tma},
  };
  for (const Case& c : strip_cases()) out.push_back(c);
  for (const Case& c : transition_cases()) out.push_back(c);
  return out;
}

// EPILOGUE=smem on the warp-specialized schedule (k:053's strips copied out by the owners'
// threads): rows no tensor map can address — odd N (scalar copies), N = 4100 (8-byte
// copies), GPT-2's LM head (the default there), a fused epilogue, an f32 output, one buffer
// (two barriers a strip), the ring across tiles, a 2-CTA cluster, a bmm with odd columns.
inline std::vector<Case> staged_cases() {
  const std::string ws = "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
                         "GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=smem";
  return {
      {"linear(X[2048,768]:bf16, W[50257,768]:bf16)", ""},
      {"linear(X[1000,4096]:bf16, W[1001,4096]:bf16)", ws + ",BN=128,EPI_BUFFERS=2"},
      {"gelu(linear(X[3000,1024]:bf16, W[4100,1024]:bf16, b[4100]:bf16))", ws + ",BN=128,EPI_BUFFERS=2"},
      {"relu(linear(X[777,512]:bf16, W[1337,512]:bf16, bias[1337]:bf16))",
       ws + ",BN=256,EPI_BUFFERS=2,CLUSTER_M=2"},
      {"linear(X[1000,512]:bf16, W[999,512]:bf16)", ws + ",BN=128,EPI_BUFFERS=1"},
      {"linear(X[1000,512]:bf16, W[999,512]:bf16)", ws + ",BN=128,EPI_BUFFERS=4"},
      {"matmul(A[1000,512]:bf16, B[999,512]:bf16.T, out=f32)", ws + ",BN=128,EPI_BUFFERS=2"},
      {"linear(X[1000,512]:f16, W[999,512]:f16)",
       "ATOM=wgmma_f16,WM=2,WN=1,FM=1,FN=1,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=3,GROUP_M=8,"
       "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=smem,BN=256,EPI_BUFFERS=0"},
      {"bmm(A[4,500,256]:bf16, B[4,333,256]:bf16.T)", ws + ",BN=128,EPI_BUFFERS=2"},
  };
}

}  // namespace loom::tma_store_test
