// The GPU cases of wgmma on slabs the block's threads fill (STAGE=cp_async with
// ATOM=wgmma_*, t:040 / k:015 / k:050), shared by the GPU test
// (tests/gpu/test_hopper_cp_async.cpp) and the CPU test that compiles each for sm_90a
// and checks ptxas' spills (tests/cpu/driver/test_wgmma_cp_async_compile.cpp): ragged N
// and K whose rows TMA cannot address (odd 16-bit rows through loads and shared stores,
// 4-byte-aligned rows through narrow cp.async), both 16-bit dtypes, N-major B in chunks,
// tf32 with B K-major and N-major (transposed into the K-major slab while written), the
// cp.async producer warpgroup (WARP_SPECIALIZE=1), and the sm_90a defaults that now choose
// this path (empty knobs).
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom::wgmma_cp_async_test {

struct Case {
  std::string expr;
  std::string knobs;
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs; }

inline std::vector<Case> cases() {
  const std::string ring = ",STAGE=cp_async,SWIZZLE=128B,VECTORIZE=8,WN=1,FM=1,FN=1";
  const std::string bf16 = "ATOM=wgmma_bf16,BK=64,STAGES=4" + ring;
  const std::string f16 = "ATOM=wgmma_f16,BK=64,STAGES=4" + ring;
  const std::string tf32 = "ATOM=wgmma_tf32,BK=32,STAGES=4" + ring;
  return {
      // Odd N: B's rows through registers, A by 16-byte cp.async (the mixed ring).
      {"matmul(A[1000,512]:bf16, B[512,777]:bf16)",
       "ATOM=wgmma_bf16,BK=32,STAGES=4" + ring + ",WM=2,BN=128"},
      {"matmul(A[1000,333]:f16, B[333,777]:f16)", f16 + ",WM=1,BN=64"},
      // Odd K: both operands through registers; a 3-deep ring.
      {"matmul(A[777,333]:bf16, B[333,1000]:bf16)", "ATOM=wgmma_bf16,BK=64,STAGES=3" + ring + ",WM=2,BN=128"},
      // N = 1000: 2000-byte rows, 16-byte aligned, so cp.async; N = 1002: 4-byte copies.
      {"matmul(A[1000,512]:f16, B[512,1000]:f16)", f16 + ",WM=2,BN=128"},
      {"matmul(A[1000,512]:bf16, B[512,1002]:bf16)", bf16 + ",WM=2,BN=64"},
      // K-major B (given transposed) with a ragged K, 64-byte spans.
      {"matmul(A[1000,333]:bf16, B[777,333]:bf16.T)",
       "ATOM=wgmma_bf16,BK=32,STAGE=cp_async,SWIZZLE=64B,STAGES=4,WM=2,WN=1,BN=128"},
      // The cp.async producer warpgroup (WARP_SPECIALIZE=1): one and two consumer
      // warpgroups, odd rows through the producer's registers, tf32 transposed, a short K.
      {"matmul(A[1000,512]:bf16, B[512,777]:bf16)",
       "ATOM=wgmma_bf16,BK=32,STAGES=4" + ring + ",WM=2,BN=64,WARP_SPECIALIZE=1"},
      {"matmul(A[2048,1024]:bf16, B[1024,2047]:bf16)",
       "ATOM=wgmma_bf16,BK=32,STAGES=4" + ring + ",WM=2,BN=128,WARP_SPECIALIZE=1"},
      {"matmul(A[1000,333]:f16, B[333,777]:f16)",
       "ATOM=wgmma_f16,BK=32,STAGES=4" + ring + ",WM=1,BN=64,WARP_SPECIALIZE=1"},
      {"matmul(A[1000,512]:tf32, B[512,777]:tf32)", tf32 + ",WM=2,BN=128,WARP_SPECIALIZE=1"},
      {"matmul(A[1000,64]:bf16, B[64,1002]:bf16)", bf16 + ",WM=2,BN=64,WARP_SPECIALIZE=1"},
      // Persistent tiles: each CTA's ring drained and refilled per tile.
      {"matmul(A[2048,512]:bf16, B[512,2047]:bf16)",
       "ATOM=wgmma_bf16,BK=32,STAGES=4" + ring + ",WM=2,BN=128,GROUP_M=8,PERSISTENT=1"},
      // A fused epilogue and an f32 output.
      {"relu(add(matmul(A[1000,512]:bf16, B[512,777]:bf16), bias[777]:bf16))",
       "ATOM=wgmma_bf16,BK=32,STAGES=4" + ring + ",WM=2,BN=128"},
      // BK=64 with B's odd rows staged in registers (32 a thread; the default's BK=32 holds
      // 16): where ptxas spills first, so a narrower tile.
      {"matmul(A[1000,512]:bf16, B[512,777]:bf16)", bf16 + ",WM=2,BN=64"},
      {"matmul(A[513,256]:f16, B[256,999]:f16, out=f32)", f16 + ",WM=1,BN=64"},
      // tf32: B K-major, and B [K, N] transposed into the K-major slab (SLAB_B=kinner, the
      // default for wgmma_tf32 on thread-filled slabs).
      {"matmul(A[1000,512]:tf32, B[777,512]:tf32.T)", tf32 + ",WM=2,BN=128"},
      {"matmul(A[1000,512]:tf32, B[512,777]:tf32)", tf32 + ",WM=2,BN=128"},
      {"matmul(A[512,333]:tf32, B[333,1000]:tf32)", tf32 + ",WM=1,BN=128,SLAB_B=kinner"},
      // A given transposed (M-major) too: both slabs transposed while written.
      {"matmul(A[333,512]:tf32.T, B[333,1000]:tf32)", tf32 + ",WM=1,BN=128"},
      // Realigned 16-byte copies (REALIGN=1, ir/realign.h): odd rows as aligned chunks
      // shifted into place. Odd N (B's last chunk straddling the tensor's end at 333x777:
      // read element by element), odd K (both operands), BK=64, K-major B with odd K,
      // M-major A with odd M, a batch, the cp.async producer warpgroup.
      {"matmul(A[1000,512]:bf16, B[512,777]:bf16)",
       "ATOM=wgmma_bf16,BK=32,STAGES=4" + ring + ",WM=2,BN=128,REALIGN=1"},
      {"matmul(A[1000,333]:f16, B[333,777]:f16)", f16 + ",WM=1,BN=64,REALIGN=1"},
      {"matmul(A[777,333]:bf16, B[333,1000]:bf16)",
       "ATOM=wgmma_bf16,BK=64,STAGES=3" + ring + ",WM=2,BN=128,REALIGN=1"},
      {"matmul(A[2048,2048]:bf16, B[2048,2047]:bf16)", bf16 + ",WM=2,BN=128,GROUP_M=8,REALIGN=1"},
      {"matmul(A[2048,2047]:f16, B[2047,2048]:f16)",
       "ATOM=wgmma_f16,BK=32,STAGES=4" + ring + ",WM=2,BN=128,GROUP_M=8,REALIGN=1"},
      {"matmul(A[1000,333]:bf16, B[777,333]:bf16.T)",
       "ATOM=wgmma_bf16,BK=32,STAGE=cp_async,SWIZZLE=64B,STAGES=4,WM=2,WN=1,BN=128,REALIGN=1"},
      {"matmul(A[333,1001]:f16.T, B[333,777]:f16)",
       "ATOM=wgmma_f16,BK=32,STAGES=4" + ring + ",WM=2,BN=128,REALIGN=1"},
      {"matmul(A[3,200,333]:bf16, B[3,333,77]:bf16)",
       "ATOM=wgmma_bf16,BK=32,STAGES=4" + ring + ",WM=1,BN=64,REALIGN=1"},
      {"matmul(A[1000,512]:bf16, B[512,777]:bf16)",
       "ATOM=wgmma_bf16,BK=32,STAGES=4" + ring + ",WM=2,BN=64,WARP_SPECIALIZE=1,REALIGN=1"},
      // The sm_90a defaults: ragged 16-bit GEMMs and tf32 of either B layout with a wave of
      // 128x128 tiles (smaller ones keep mma.sync), a fused bias, M-major A.
      {"matmul(A[2048,2048]:bf16, B[2048,2047]:bf16)", ""},
      {"matmul(A[2000,333]:f16, B[333,1777]:f16)", ""},
      // A wave of 64x64 tiles only: the one-warpgroup form, BK = 64 in a 3-deep ring, both
      // operands' odd rows realigned (B's last chunk straddling the tensor's end), and bf16
      // with a fused bias.
      {"matmul(A[1000,333]:f16, B[333,777]:f16)", ""},
      {"relu(add(matmul(A[1000,333]:bf16, B[333,777]:bf16), bias[777]:bf16))", ""},
      // Neither K-major with rows TMA cannot address (A's 2047 columns; with 16-byte rows the
      // default transposes both in shared memory after TMA: wgmma_transpose_cases.h).
      {"matmul(A[1024,2047]:tf32.T, B[1024,2048]:tf32)", ""},
      {"matmul(A[2048,1024]:tf32, B[2048,1024]:tf32.T)", ""},
      {"matmul(A[2000,333]:tf32, B[333,1777]:tf32)", ""},
      {"matmul(A[333,2000]:tf32.T, B[1777,333]:tf32.T)", ""},
      {"relu(add(matmul(A[2000,513]:bf16, B[513,2000]:bf16), bias[2000]:bf16))", ""},
      {"matmul(A[333,2001]:f16.T, B[333,1777]:f16)", ""},
      // K odd with aligned output rows (REALIGN=1): the TMA-store epilogue and persistent
      // tiles on the threads' ring.
      {"matmul(A[2048,2047]:bf16, B[2047,1024]:bf16)",
       "ATOM=wgmma_bf16,BK=32,STAGES=4" + ring + ",WM=2,BN=128,GROUP_M=8,REALIGN=1,"
       "EPILOGUE=tma_store,EPI_BUFFERS=2,PERSISTENT=1"},
  };
}

}  // namespace loom::wgmma_cp_async_test
