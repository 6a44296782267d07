// The GPU cases of batched GEMMs on the Hopper path (ATOM=wgmma_*: rank-3 and rank-4 TMA
// boxes of one batch entry, rank-2 maps for an operand shared by every entry, the
// persistent walk over (batch, tile) units of t:027), shared by the
// GPU test (tests/gpu/test_hopper_gemm.cpp, suite Batched) and the CPU test that compiles
// each for sm_90a without spills (tests/cpu/driver/test_wgmma_batched_compile.cpp).
// Every operand row is a multiple of 16 bytes (TMA's row stride); M, N and K are ragged
// against the tile, batch counts odd, so boxes hang over an entry's edges (zero-filled
// per entry, never the next entry's rows).
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom::wgmma_batched_test {

struct Case {
  std::string expr;
  std::string knobs;  // "" = the sm_90a defaults (which must choose wgmma)
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs; }

// The large schedule (rung 5 of `loom ladder hopper`) with the direct epilogue, BN wide.
// At BN=256 the direct epilogue spilled 24 B at M = 1000, K = 512 (N = 768 or 776),
// batched or not (matmul(A[1000,512], B[512,776]) too): the ragged-M cases take BN=128.
inline std::string persistent(const std::string& dtype, int bn = 256) {
  return "ATOM=wgmma_" + dtype + ",WM=2,WN=1,FM=1,FN=1,BN=" + std::to_string(bn) +
         ",STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,"
         "EPILOGUE=direct";
}

inline std::vector<Case> cases() {
  return {
      // The defaults: f16 (512 units in 2-CTA clusters), a ragged bf16 batch of 7
      // (M = 1000, N = 296 against 128 x 256 tiles, K = 776).
      {"bmm(A[64,512,640]:f16, B[64,640,512]:f16)", ""},
      {"bmm(A[7,1000,776]:bf16, B[7,776,296]:bf16)", ""},
      // Batch counts 1, 3, 7; fewer units than SMs; a capped grid whose CTAs walk across
      // entries (21 units on 5 CTAs); K-major B with a ragged K (264: a 8-deep last slab).
      {"bmm(A[1,1000,512]:bf16, B[1,512,776]:bf16)", persistent("bf16", 128)},
      {"bmm(A[3,300,256]:bf16, B[3,256,200]:bf16)", persistent("bf16", 128)},
      {"bmm(A[7,300,264]:f16, B[7,200,264]:f16.T)", persistent("f16", 128) + ",PERSISTENT_CTAS=5"},
      // 2-CTA clusters sharing B by multicast, a cluster half past M (700 rows), a fused
      // bias and relu, 8 CTAs over 5 x 3 x 3 cluster units.
      {"relu(add(bmm(A[5,700,512]:f16, B[5,512,520]:f16), bias[520]:f16))",
       persistent("f16", 128) + ",CLUSTER_M=2,PERSISTENT_CTAS=8"},
      // An f32 output; ping-pong consumers over the folded walk.
      {"bmm(A[3,256,128]:bf16, B[3,128,264]:bf16, out=f32)", persistent("bf16")},
      {"bmm(A[5,384,256]:bf16, B[5,256,520]:bf16)",
       persistent("bf16") + ",PERSISTENT_CTAS=7,CONSUMERS=pingpong"},
      // An operand shared by every entry (a rank-2 tensor map, boxes without the batch):
      // B, then A against a K-major batched B; B multicast within 2-CTA clusters.
      {"matmul(A[5,700,512]:bf16, W[512,520]:bf16)", persistent("bf16", 128)},
      {"matmul(W[300,256]:f16, B[7,200,256]:f16.T)", persistent("f16", 128)},
      {"matmul(A[3,512,256]:f16, W[256,512]:f16)", persistent("f16") + ",CLUSTER_M=2"},
      // Rank 4 (B, H, M, K) x (B, H, K, N): rank-4 boxes, ragged N; and against a shared
      // weight.
      {"matmul(A[2,3,300,128]:bf16, B[2,3,128,264]:bf16)", persistent("bf16", 128)},
      {"matmul(A[2,5,256,128]:f16, W[128,384]:f16)", persistent("f16")},
      // The defaults of a rank-4 and a broadcast shape, and the explicit schedule on the
      // bench's attention-shaped rank 4 (K = 128: its default is mma.sync).
      {"matmul(A[2,8,512,1024]:bf16, B[2,8,1024,512]:bf16)", ""},
      {"matmul(A[16,1024,1024]:bf16, W[1024,1024]:bf16)", ""},
      {"matmul(A[8,16,512,128]:bf16, B[8,16,128,512]:bf16)", persistent("bf16")},
  };
}

// Broadcast and rank 4 on the paths before wgmma (mma.sync, SIMT): the GPU test only.
inline std::vector<Case> other_path_cases() {
  return {
      {"matmul(A[5,300,256]:bf16, W[256,200]:bf16)", "ATOM=mma_bf16"},
      {"matmul(W[300,256]:f16, B[3,200,256]:f16.T)", "ATOM=mma_f16"},
      {"matmul(A[2,3,129,72]:f16, B[2,3,72,100]:f16)", "ATOM=mma_f16"},
      {"matmul(A[2,3,129,72]:f32, B[2,3,72,100]:f32)", ""},
      {"matmul(W[129,72]:f32, B[4,72,100]:f32)", ""},
  };
}

}  // namespace loom::wgmma_batched_test
