// GPU correctness of the Hopper GEMM path: ATOM=wgmma_* on TMA slabs in
// 128-byte swizzle spans (K-major A and B, N-major B in 64-column chunks), with and
// without warp specialization (producer warpgroup, full/empty mbarriers, setmaxnreg),
// persistent tiles, cooperative and ping-pong consumer warpgroups, over square and odd
// shapes, both majornesses, batch, fused epilogues and f16 / bf16 / tf32. Each case runs
// through run_expression: seeded inputs, output poisoned with NaN, fp64 reference,
// relative error under the dtype's threshold. Skips with the reason on a GPU-less machine
// (every case still compiles for sm_90a first).
// TMA needs every global row to be a multiple of 16 bytes: the odd shapes are odd in tile
// counts and edges, not in row pitch. SWAP_AB runs decode shapes as C^T = B^T A^T.
// The TMA-store epilogue's cases (EPILOGUE=tma_store: named barriers, stores overlapping
// the next tile, boxes clipped at the edges) are in tma_store_cases.h; the batched ones
// (rank-3 boxes, the persistent walk over (batch, tile) units) in wgmma_batched_cases.h.
#include <gtest/gtest.h>

#include "compile_first.h"
#include "driver/run.h"
#include "tma_store_cases.h"
#include "epilogue_operand_cases.h"
#include "wgmma_batched_cases.h"
#include "wgmma_rs_cases.h"
#include "wgmma_transpose_cases.h"
#include "runtime/device.h"

namespace loom {
namespace {

struct HopperCase {
  std::string expr;
  std::string knobs;
};

void PrintTo(const HopperCase& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs; }

class GpuHopperGemm : public ::testing::TestWithParam<HopperCase> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuHopperGemm, MatchesFp64Reference) {
  const HopperCase& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 21;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.program.cuda.find("wgmma"), std::string::npos);
}

const std::string kTma = "STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4";
const std::string kBf16 = "ATOM=wgmma_bf16," + kTma;
const std::string kF16 = "ATOM=wgmma_f16," + kTma;
const std::string kWs = ",WARP_SPECIALIZE=1";
const std::string kPersistent = ",WARP_SPECIALIZE=1,PERSISTENT=1,GROUP_M=8";
const std::string kPingPong = kPersistent + ",CONSUMERS=pingpong";

INSTANTIATE_TEST_SUITE_P(
    Hopper, GpuHopperGemm,
    ::testing::Values(
        // TMA + wgmma, every thread waiting on the ring.
        HopperCase{"matmul(A[1024,1024]:bf16, B[1024,1024]:bf16)", kBf16 + ",WM=2,BN=128"},
        HopperCase{"matmul(A[1024,512]:f16, B[768,512]:f16.T)", kF16 + ",WM=2,BN=256"},
        HopperCase{"matmul(A[333,200]:bf16, B[200,520]:bf16)", kBf16 + ",WM=1,BN=64"},
        HopperCase{"matmul(A[1000,776]:f16, B[3000,776]:f16.T)", kF16 + ",WM=2,BN=128"},
        // Warp specialized: one and two consumer warpgroups.
        HopperCase{"matmul(A[2048,2048]:bf16, B[2048,2048]:bf16)", kBf16 + ",WM=1,BN=128" + kWs},
        HopperCase{"matmul(A[2048,1024]:bf16, B[1024,2048]:bf16)", kBf16 + ",WM=2,BN=256" + kWs},
        HopperCase{"matmul(A[777,336]:f16, B[336,1000]:f16)", kF16 + ",WM=2,BN=128" + kWs},
        HopperCase{"relu(linear(X[1000,512]:bf16, W[3000,512]:bf16, bias[3000]:bf16))",
                   kBf16 + ",WM=2,BN=128" + kWs},
        HopperCase{"bmm(A[4,300,256]:bf16, B[4,256,200]:bf16)", kBf16 + ",WM=2,BN=128" + kWs},
        // Persistent: more tiles than SMs, a ragged edge, and fewer tiles than SMs.
        HopperCase{"matmul(A[4096,1024]:bf16, B[1024,4096]:bf16)", kBf16 + ",WM=2,BN=128" + kPersistent},
        HopperCase{"matmul(A[2000,512]:f16, B[512,1496]:f16)", kF16 + ",WM=2,BN=256" + kPersistent},
        HopperCase{"matmul(A[256,2048]:bf16, B[2048,256]:bf16)", kBf16 + ",WM=2,BN=128" + kPersistent},
        HopperCase{"matmul(A[512,512]:bf16, B[512,512]:bf16, out=f32)", kBf16 + ",WM=2,BN=128" + kPersistent},
        // 2-CTA clusters along M sharing B by TMA multicast: N-major B split by chunks,
        // K-major B split by rows, persistent and not, a cluster half past M.
        HopperCase{"matmul(A[4096,1024]:bf16, B[1024,4096]:bf16)",
                   kBf16 + ",WM=2,BN=256,CLUSTER_M=2" + kPersistent},
        HopperCase{"matmul(A[2048,512]:f16, B[2048,512]:f16.T)", kF16 + ",WM=2,BN=128,CLUSTER_M=2" + kWs},
        HopperCase{"matmul(A[800,512]:bf16, B[512,1000]:bf16)",
                   kBf16 + ",WM=2,BN=256,CLUSTER_M=2" + kPersistent},
        // Fused epilogues over the persistent warp-specialized schedule: residual and
        // scaling, gelu over a bias, an f16 output of bf16 operands, batched silu.
        HopperCase{"mul(add(matmul(A[1000,512]:bf16, B[512,1000]:bf16), R[1000,1000]:bf16), 0.5)",
                   kBf16 + ",WM=2,BN=128" + kPersistent},
        HopperCase{"gelu(add(matmul(A[777,256]:f16, B[256,520]:f16), bias[520]:f16))",
                   kF16 + ",WM=2,BN=256,CLUSTER_M=2" + kPersistent},
        HopperCase{"matmul(A[512,512]:bf16, B[512,512]:bf16, out=f16)", kBf16 + ",WM=2,BN=128" + kPersistent},
        HopperCase{"silu(bmm(A[3,300,256]:bf16, B[3,256,200]:bf16))", kBf16 + ",WM=1,BN=128" + kWs},
        // Ping-pong consumers: each warpgroup takes every other 64x256 or 128x128 tile
        // (CTAs with 7 and 8, or 1 and 2 tiles), ragged edges, a fused epilogue, fewer
        // tiles than SMs (warpgroup 1 idle), and 2-CTA clusters.
        HopperCase{"matmul(A[4096,1024]:bf16, B[1024,4096]:bf16)", kBf16 + ",WM=2,BN=256" + kPingPong},
        HopperCase{"matmul(A[2000,512]:f16, B[512,1496]:f16)", kF16 + ",WM=2,FM=2,BN=128" + kPingPong},
        HopperCase{"relu(linear(X[1000,512]:bf16, W[3000,512]:bf16, bias[3000]:bf16))",
                   kBf16 + ",WM=2,FM=2,BN=128" + kPingPong},
        HopperCase{"matmul(A[256,2048]:bf16, B[2048,256]:bf16)", kBf16 + ",WM=2,BN=256" + kPingPong},
        HopperCase{"matmul(A[800,512]:bf16, B[512,1000]:bf16)",
                   kBf16 + ",WM=2,BN=256,CLUSTER_M=2" + kPingPong},
        HopperCase{"matmul(A[8192,1024]:f16, B[1024,8192]:f16)",
                   kF16 + ",WM=2,FM=2,BN=128,CLUSTER_M=2" + kPingPong},
        // Stream-K (STREAM_K=1): the last one to two waves split by K iterations, split
        // tiles finished by the part that arrives second. The sm_90a default kernel of the
        // shape it is for (13.58 waves on H100); 2-CTA clusters with the TMA-store
        // epilogue; capped grids (PERSISTENT_CTAS) for fractions of waves on small
        // shapes: ragged M, N and K, a fused bias and relu, an f32 output, a batch.
        HopperCase{"matmul(A[4096,4096]:bf16, B[4096,14336]:bf16)", "STREAM_K=1"},
        HopperCase{"matmul(A[4096,1024]:bf16, B[1024,4096]:bf16)",
                   kBf16 + ",WM=2,BN=256,CLUSTER_M=2,EPILOGUE=tma_store" + kPersistent +
                       ",STREAM_K=1"},
        HopperCase{"matmul(A[2000,520]:f16, B[520,1496]:f16)",
                   kF16 + ",WM=2,BN=256,PERSISTENT_CTAS=40" + kPersistent + ",STREAM_K=1"},
        HopperCase{"relu(linear(X[1000,776]:bf16, W[3000,776]:bf16, bias[3000]:bf16))",
                   kBf16 + ",WM=2,BN=128,PERSISTENT_CTAS=20,EPILOGUE=tma_store" + kPersistent +
                       ",STREAM_K=1"},
        HopperCase{"matmul(A[1000,776]:bf16, B[776,1000]:bf16, out=f32)",
                   kBf16 + ",WM=2,BN=128,PERSISTENT_CTAS=24" + kPersistent + ",STREAM_K=1"},
        HopperCase{"bmm(A[3,600,512]:bf16, B[3,512,400]:bf16)",
                   kBf16 + ",WM=2,BN=128,PERSISTENT_CTAS=6" + kPersistent + ",STREAM_K=1"},
        // The default's 192-wide tiles where 256 would leave the last round idle
        // (wave_width, families/wgmma.cpp): square, a long K, ragged N.
        HopperCase{"matmul(A[3072,4096]:bf16, B[4096,3072]:bf16)", ""},
        HopperCase{"matmul(A[2560,8192]:f16, B[8192,2304]:f16)", ""},
        HopperCase{"matmul(A[3000,1024]:bf16, B[1024,3000]:bf16)", ""},
        // The 64B and 32B swizzle modes' descriptors (K-major rows in chunks along K,
        // N-major B in narrower column chunks).
        HopperCase{"matmul(A[1000,512]:bf16, B[776,512]:bf16.T)",
                   "ATOM=wgmma_bf16,STAGE=tma,SWIZZLE=64B,BK=64,STAGES=4,WM=2,BN=128" + kWs},
        HopperCase{"matmul(A[777,256]:f16, B[256,1000]:f16)",
                   "ATOM=wgmma_f16,STAGE=tma,SWIZZLE=32B,BK=32,STAGES=4,WM=2,BN=128" + kWs},
        // tf32: K-major B only (B given transposed).
        HopperCase{"matmul(A[1024,512]:f32, B[1024,512]:f32.T)",
                   "ATOM=wgmma_tf32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=4,WM=2,BN=128" + kWs}));

// Medium GEMMs on a 6-deep ring in 2-CTA clusters, and outputs whose rows TMA cannot
// store (bench/NOTES.md, 2026-11-28, 2-CTA clusters on medium and batched GEMMs): the
// medium default (128 x 128, 6 slabs, TMA-store strips) alone and in clusters along M and
// N, ragged edges with a cluster half past M or N, the ragged bmm in clusters, and the
// large schedule with direct stores for an odd N (the LM head's class, its default).
const std::string kMedium6 =
    "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=6,"
    "EPILOGUE=tma_store,EPI_BUFFERS=2" + kPersistent;
INSTANTIATE_TEST_SUITE_P(
    ClusterMedium, GpuHopperGemm,
    ::testing::Values(
        HopperCase{"linear(X[512,4096]:bf16, W[4096,4096]:bf16)", ""},
        HopperCase{"linear(X[512,4096]:bf16, W[4096,4096]:bf16)", "CLUSTER_M=2"},
        HopperCase{"linear(X[512,4096]:bf16, W[4096,4096]:bf16)", "CLUSTER_N=2"},
        HopperCase{"linear(X[600,1000]:bf16, W[1160,1000]:bf16)", kMedium6 + ",CLUSTER_M=2"},
        HopperCase{"linear(X[600,1000]:bf16, W[1160,1000]:bf16)", kMedium6 + ",CLUSTER_N=2"},
        HopperCase{"bmm(A[8,1000,776]:bf16, B[8,776,1000]:bf16)", "CLUSTER_M=2"},
        HopperCase{"bmm(A[8,1000,776]:bf16, B[8,776,1000]:bf16)", "CLUSTER_N=2"},
        HopperCase{"linear(X[1024,768]:bf16, W[8191,768]:bf16)", ""},
        HopperCase{"linear(X[1000,512]:bf16, W[4097,512]:bf16)", ""}));

// The one-row pairs (families/wgmma_candidates.h; the H200's default for BN >= 128):
// 64-row CTAs in 2-CTA clusters along M sharing W's slab, one consumer warpgroup, a deep
// ring, direct stores. Its 6144-wide set at a shorter K (the ring wraps 3 times), ragged
// rows (the upper CTA holds 36 of 100), a ragged N and K (the last pair 8 columns wide, the
// last slab partial), and a fused bias and relu.
const std::string kPairs =
    "ATOM=wgmma_bf16,BM=64,WM=1,WN=1,FM=1,FN=1,STAGE=tma,SWIZZLE=128B,BK=64,GROUP_M=1,"
    "EPILOGUE=direct,WARP_SPECIALIZE=1,CONSUMER_REGS=0,CLUSTER_M=2";
INSTANTIATE_TEST_SUITE_P(
    OneRowPairs, GpuHopperGemm,
    ::testing::Values(
        HopperCase{"linear(X[128,2048]:bf16, W[6144,2048]:bf16)", kPairs + ",BN=96,STAGES=10"},
        HopperCase{"linear(X[100,1000]:bf16, W[1000,1000]:bf16)", kPairs + ",BN=96,STAGES=10"},
        HopperCase{"relu(linear(X[128,1024]:bf16, W[2056,1024]:bf16, bias[2056]:bf16))",
                   kPairs + ",BN=128,STAGES=8"}));

// The TMA store's strip buffers as a ring across the persistent tile loop (EPI_BUFFERS a
// multiple >= 2 of a tile's strips, k:053): two and three tiles' worth, EPI_SYNC=2, plain
// stores, an f32 output, ragged M and N, a fused bias and relu, 2-CTA clusters, and the
// store-bound Q.K^T bmm (K = 64 and 128) at sizes the fp64 reference checks quickly, each
// with enough tiles per CTA on 132 SMs (or clusters on 66) that every buffer group is
// reused: 3 to 6 tiles per CTA.
const std::string kRing =
    "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,"
    "EPILOGUE=tma_store" + kPersistent;
INSTANTIATE_TEST_SUITE_P(
    StripRing, GpuHopperGemm,
    ::testing::Values(
        HopperCase{"bmm(Q[8,1024,128]:f16, K[8,128,1024]:f16)", "EPI_BUFFERS=4"},
        HopperCase{"bmm(Q[32,512,64]:bf16, K[32,64,520]:bf16)", "EPI_BUFFERS=6"},
        HopperCase{"bmm(Q[48,512,64]:f16, K[48,64,512]:f16)", "EPI_BUFFERS=8,STAGES=2"},
        HopperCase{"relu(linear(X[2000,136]:bf16, W[3000,136]:bf16, bias[3000]:bf16))",
                   kRing + ",STAGES=5,EPI_BUFFERS=4"},
        HopperCase{"linear(X[2000,200]:bf16, W[4040,200]:bf16)",
                   kRing + ",STAGES=5,EPI_BUFFERS=4,CLUSTER_M=2,EPI_SYNC=2,STMATRIX=0"},
        HopperCase{"matmul(A[2000,136]:bf16, B[136,3000]:bf16, out=f32)",
                   kRing + ",STAGES=3,EPI_BUFFERS=8"},
        // The large schedule's 224-wide tiles (512 x 28672 x 4096's default): 7 strips of
        // 32 columns through 2 buffers, a 2-CTA cluster, ragged M and N.
        HopperCase{"linear(X[600,512]:bf16, W[3000,512]:bf16)",
                   "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=224,STAGE=tma,SWIZZLE=128B,BK=64,"
                   "STAGES=4,EPILOGUE=tma_store,EPI_BUFFERS=2,CLUSTER_M=2" + kPersistent}));

// The sm_90a defaults for `:tf32` in every majorness, at shapes with a wave of the large
// schedule's tiles and ragged edges: both K-major (TMA, shared A), B [K, N] (swapped, B^T
// in registers), A given transposed (A in registers), both M-/N-major (TMA-staged and
// transposed in shared memory with a wave of the large schedule's tiles, else the threads'
// transposing copies); a fused bias.
INSTANTIATE_TEST_SUITE_P(
    Tf32Defaults, GpuHopperGemm,
    ::testing::Values(HopperCase{"matmul(A[1000,520]:tf32, B[2056,520]:tf32.T)", ""},
                      HopperCase{"matmul(A[1000,520]:tf32, B[520,2056]:tf32)", ""},
                      HopperCase{"matmul(A[520,2056]:tf32.T, B[1000,520]:tf32.T)", ""},
                      HopperCase{"matmul(A[520,2056]:tf32.T, B[520,1000]:tf32)", ""},
                      HopperCase{"relu(add(matmul(A[1000,520]:tf32, B[520,2056]:tf32), "
                                 "bias[2056]:tf32))",
                                 ""}));

// wgmma with A from registers (WGMMA_A=regs): tests/gpu/wgmma_rs_cases.h.
class GpuHopperGemmRegsA : public ::testing::TestWithParam<wgmma_rs_test::Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuHopperGemmRegsA, MatchesFp64Reference) {
  const wgmma_rs_test::Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 29;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.program.cuda.find("_rs"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Hopper, GpuHopperGemmRegsA, ::testing::ValuesIn(wgmma_rs_test::cases()));

// tf32 operands that are not K-major, TMA-staged and transposed in shared memory by the
// threads (SLAB_A / SLAB_B = kinner with STAGE=tma): tests/gpu/wgmma_transpose_cases.h.
class GpuHopperGemmTransposed : public ::testing::TestWithParam<wgmma_transpose_test::Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuHopperGemmTransposed, MatchesFp64Reference) {
  const wgmma_transpose_test::Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 31;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.program.cuda.find("loom::bar_sync(15, "), std::string::npos);
  EXPECT_EQ(r.program.cuda.find("_rs("), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Hopper, GpuHopperGemmTransposed,
                         ::testing::ValuesIn(wgmma_transpose_test::cases()));

// SWAP_AB (decode): C^T = B^T A^T, the weight's N on wgmma's M, the small M on its N;
// the transposed direct store. BM/WM tile N, BN tiles M.
const std::string kSwap = ",SWAP_AB=1,WN=1,FM=1,FN=1";

INSTANTIATE_TEST_SUITE_P(
    SwapAb, GpuHopperGemm,
    ::testing::Values(
        // The sm_90a decode defaults (SWAP_AB=1, 64 x M atoms, BK=128, a deep ring).
        HopperCase{"linear(X[16,4096]:bf16, W[4096,4096]:bf16)", ""},
        HopperCase{"linear(X[64,4096]:bf16, W[4096,4096]:bf16)", ""},
        HopperCase{"matmul(A[16,4096]:bf16, B[4096,4096]:bf16)", ""},
        HopperCase{"matmul(A[1,4096]:f16, B[4096,2048]:f16, out=f32)", ""},
        // The tall tile (128 weight rows a CTA: N = 10240 on 132 SMs), its ring 8 deep on
        // a fast-DRAM card (an H200), as deep as fits elsewhere.
        HopperCase{"linear(X[16,8192]:bf16, W[10240,8192]:bf16)", ""},
        // Ragged M over the atom's N (16 of 24 columns in the second tile; 20 of 24),
        // ragged N and K, every thread waiting on the ring and warp specialized.
        HopperCase{"matmul(A[24,1024]:f16, B[1024,2048]:f16)", kF16 + kSwap + ",WM=1,BN=16"},
        HopperCase{"matmul(A[20,520]:bf16, B[520,1096]:bf16)", kBf16 + kSwap + ",WM=1,BN=24" + kWs},
        // A bias indexed by the output column (the swapped GEMM's row).
        HopperCase{"relu(linear(X[24,2048]:bf16, W[3000,2048]:bf16, bias[3000]:bf16))",
                   kBf16 + kSwap + ",WM=1,BN=24" + kWs},
        // Two consumer warpgroups (BM=128: M-major A in two chunks), BK=128 (K chunks).
        HopperCase{"matmul(A[32,2048]:bf16, B[2048,4096]:bf16)",
                   "ATOM=wgmma_bf16,STAGE=tma,SWIZZLE=128B,BK=128,STAGES=4" + kSwap +
                       ",WM=2,BN=32" + kWs},
        HopperCase{"linear(X[48,4096]:f16, W[1024,4096]:f16)",
                   "ATOM=wgmma_f16,STAGE=tma,SWIZZLE=128B,BK=128,STAGES=6" + kSwap +
                       ",WM=1,BN=48" + kWs},
        // The transposed tile through the TMA store, whole (EPI_BUFFERS=0): ragged M.
        HopperCase{"matmul(A[20,1024]:bf16, B[1024,2048]:bf16)",
                   kBf16 + kSwap + ",WM=1,BN=24,CLUSTER_K=1,EPILOGUE=tma_store,EPI_BUFFERS=0" + kWs}));

class GpuTmaStoreEpilogue : public ::testing::TestWithParam<tma_store_test::Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuTmaStoreEpilogue, MatchesFp64Reference) {
  const tma_store_test::Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 23;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.program.cuda.find("tma_store_2d"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(TmaStore, GpuTmaStoreEpilogue,
                         ::testing::ValuesIn(tma_store_test::cases()));

// EPILOGUE=smem on warp-specialized kernels (tma_store_cases.h, staged_cases): the strips
// copied out by the consumers' threads into rows no tensor map can address.
class GpuStagedStripEpilogue : public ::testing::TestWithParam<tma_store_test::Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuStagedStripEpilogue, MatchesFp64Reference) {
  const tma_store_test::Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 31;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_EQ(r.program.state.used_knobs.at("EPILOGUE"), "smem");
  EXPECT_EQ(r.program.cuda.find("tma_store_2d"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(StagedStrips, GpuStagedStripEpilogue,
                         ::testing::ValuesIn(tma_store_test::staged_cases()));

// Epilogue operands loaded by TMA during the mainloop (epilogue_operand_cases.h): the
// residual and the gate read from their shared strips, no global loads of them left.
class GpuEpilogueOperands : public ::testing::TestWithParam<tma_store_test::Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuEpilogueOperands, MatchesFp64Reference) {
  const tma_store_test::Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 29;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_EQ(r.program.state.used_knobs.at("EPI_LOAD"), "tma");
}

INSTANTIATE_TEST_SUITE_P(EpilogueOperands, GpuEpilogueOperands,
                         ::testing::ValuesIn(epilogue_operand_test::cases()));

// WGMMA_ZERO's old form and scale-d under split-K (tma_store_cases.h).
class GpuTileTransition : public ::testing::TestWithParam<tma_store_test::Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuTileTransition, MatchesFp64Reference) {
  const tma_store_test::Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 29;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
}

INSTANTIATE_TEST_SUITE_P(TileTransition, GpuTileTransition,
                         ::testing::ValuesIn(tma_store_test::transition_gemm_cases()));

// Batched GEMMs (wgmma_batched_cases.h): the sm_90a defaults and explicit persistent
// schedules over odd batch counts and ragged entries.
class GpuBatchedGemm : public ::testing::TestWithParam<wgmma_batched_test::Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuBatchedGemm, MatchesFp64Reference) {
  const wgmma_batched_test::Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 31;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.program.cuda.find("wgmma"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Batched, GpuBatchedGemm, ::testing::ValuesIn(wgmma_batched_test::cases()));

// Shared operands and rank 4 on mma.sync and SIMT.
class GpuBatchedOtherPaths : public ::testing::TestWithParam<wgmma_batched_test::Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuBatchedOtherPaths, MatchesFp64Reference) {
  const wgmma_batched_test::Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 37;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
}

INSTANTIATE_TEST_SUITE_P(BatchedOtherPaths, GpuBatchedOtherPaths,
                         ::testing::ValuesIn(wgmma_batched_test::other_path_cases()));

}  // namespace
}  // namespace loom
