// Small tiles, 2-D clusters and split-K in one launch on the CPU (the Hopper GEMM's skinny
// and decode organizations): 64 x 32 wgmma tiles of one consumer warpgroup, CLUSTER_M x
// CLUSTER_N clusters whose A slabs are multicast along a cluster row and B slabs along a
// cluster column (k:015's rank-digit masks), SPLITK_MODE=partials (plain partial tiles,
// the last CTA of a tile sums them: k:058), swapped decode with the cluster across the
// small dimension, deep rings. After every pass the program runs on the interpreter and is
// compared with the naive Loop IR. Plus the IR's shape and the errors of what cannot be.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {

// One consumer warpgroup of one m64n32k16 atom, 64-deep slabs, a producer warpgroup.
// (The interpreter runs every CTA's threads: the shapes are as small as the feature allows.)
const std::string kTile32 =
    "ATOM=wgmma_bf16,WM=1,WN=1,FM=1,FN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
    "EPILOGUE=direct,WARP_SPECIALIZE=1";
const std::string k2x4 = kTile32 + ",CLUSTER_M=2,CLUSTER_N=4";

// The multicast TMA loads of a kernel: (slab, mask) pairs.
std::vector<std::pair<std::string, Expr>> multicasts(const KernelOp& k) {
  std::vector<std::pair<std::string, Expr>> v;
  walk(k.body, [&](const Stmt& x) {
    if (x.kind == StmtKind::TmaLoad && !(x.multicast.is_const() && x.multicast.const_value() == 0))
      v.push_back({x.tensor, x.multicast});
  });
  return v;
}

int64_t mask_at(const Expr& mask, int64_t m_cta, int64_t n_cta) {
  return mask.eval({{"m_cta", m_cta}, {"n_cta", n_cta}});
}

TEST(Cluster2d, TwoByFourClusterWithSplitKPartialsMatchesEveryPass) {
  // One 2 x 4 cluster of 64 x 32 tiles per split, two splits of two slabs each.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[128,256]:bf16, B[256,128]:bf16)",
      Knobs::parse(k2x4 + ",SPLITK=2,SPLITK_MODE=partials"), 61);
  ASSERT_EQ(s.kernel.kernels.size(), 1u) << "the partials are summed in the split kernel";
  const KernelOp& k = s.kernel.kernels[0];
  EXPECT_EQ(k.cluster[0], 8);
  // rank = m_cta * 4 + n_cta. A (64 rows of M, shared by a cluster row) is loaded in four
  // 16-row parts, each multicast to the row of CTAs with the loader's m_cta; B (32
  // columns of N, shared by a cluster column) in two 32-row parts to the column.
  auto mc = multicasts(k);
  ASSERT_EQ(mc.size(), 2u);
  for (const auto& [slab, mask] : mc) {
    if (slab == "A_s") {
      EXPECT_EQ(mask_at(mask, 0, 3), 0x0f);
      EXPECT_EQ(mask_at(mask, 1, 2), 0xf0);
    } else {
      EXPECT_EQ(slab, "B_s");
      EXPECT_EQ(mask_at(mask, 1, 0), 0x11);
      EXPECT_EQ(mask_at(mask, 0, 3), 0x88);
    }
  }
}

TEST(Cluster2d, RaggedShapesWithSplitKPartialsMatchEveryPass) {
  // Partial tiles along M and N (a cluster's last CTAs past the edge), a short last split.
  passcheck::check_every_pass("matmul(A[120,200]:bf16, B[200,104]:bf16)",
                              Knobs::parse(k2x4 + ",SPLITK=2,SPLITK_MODE=partials"), 67);
  // K-major B, a fused bias and activation (run once, by the CTA that sums), f32 output.
  passcheck::check_every_pass("relu(linear(X[72,128]:bf16, W[40,128]:bf16, bias[40]:bf16))",
                              Knobs::parse(kTile32 + ",CLUSTER_M=2,CLUSTER_N=2,SPLITK=2,"
                                                     "SPLITK_MODE=partials"),
                              71);
  passcheck::check_every_pass("matmul(A[64,192]:bf16, B[192,64]:bf16, out=f32)",
                              Knobs::parse(kTile32 + ",CLUSTER_N=2,SPLITK=3,SPLITK_MODE=partials"),
                              73);
}

TEST(Cluster2d, PersistentTwoDimensionalClusterMatchesEveryPass) {
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 4;  // one persistent cluster of 2 x 2 walks both cluster tiles
  passcheck::check_every_pass("matmul(A[128,128]:bf16, B[128,128]:bf16)",
                              Knobs::parse(kTile32 + ",CLUSTER_M=2,CLUSTER_N=2,PERSISTENT=1"), 79,
                              {}, {}, std::nullopt, t);
}

TEST(Cluster2d, SwappedDecodeClusterAcrossTheSmallDimension) {
  // SWAP_AB: wgmma's M is the weight's N, and CLUSTER_N spans the swapped N = the
  // original M, so the two CTAs of a cluster share every weight slab.
  for (const auto& [m, bn] : {std::pair{16, 8}, std::pair{64, 32}}) {
    const std::string knobs = "ATOM=wgmma_bf16,SWAP_AB=1,WM=1,WN=1,FM=1,FN=1,BN=" +
                              std::to_string(bn) + ",STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                              "EPILOGUE=direct,WARP_SPECIALIZE=1,CLUSTER_N=2";
    CompileState s = passcheck::check_every_pass(
        "matmul(A[" + std::to_string(m) + ",256]:bf16, B[256,128]:bf16)", Knobs::parse(knobs),
        83);
    const KernelOp& k = s.kernel.kernels.at(0);
    EXPECT_EQ(k.cluster[0], 2);
    auto mc = multicasts(k);
    ASSERT_EQ(mc.size(), 1u);
    EXPECT_EQ(mc[0].second.const_value(), 0x3) << "the weight slab goes to both CTAs";
  }
  // 18 slabs through a 16-deep ring: the second lap's parities.
  passcheck::check_every_pass(
      "linear(X[64,1152]:bf16, W[64,1152]:bf16, bias[64]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,SWAP_AB=1,WM=1,WN=1,FM=1,FN=1,BN=32,STAGE=tma,"
                   "SWIZZLE=128B,BK=64,STAGES=16,EPILOGUE=direct,WARP_SPECIALIZE=1,CLUSTER_N=2"),
      89);
}

TEST(Cluster2d, NarrowBSlabTakesItsOwnSwizzleSpan) {
  // B [K, N] row-major, BN = 32 bf16: 64-byte rows take the 64B pattern under
  // SWIZZLE=128B, while A's 128-byte rows keep 128B.
  CompileState s = passcheck::compile_sm90a("matmul(A[128,256]:bf16, B[256,128]:bf16)", kTile32);
  EXPECT_EQ(s.kernel.tensor("B_s").swizzle.bits, 2);
  EXPECT_EQ(s.kernel.tensor("A_s").swizzle.bits, 3);
  const std::string e = passcheck::error_of("matmul(A[128,256]:bf16, B[256,128]:bf16)",
                                 "ATOM=wgmma_bf16,WM=1,WN=1,BN=8,STAGE=tma,SWIZZLE=128B,BK=64");
  EXPECT_NE(e.find("rows of 16 B"), std::string::npos) << e;
  EXPECT_NE(e.find("SWIZZLE=none"), std::string::npos) << e;
}

TEST(Cluster2d, ImpossibleKnobSetsAreNamed) {
  const std::string mm = "matmul(A[512,512]:bf16, B[512,512]:bf16)";
  std::string e = passcheck::error_of(mm, kTile32 + ",CLUSTER_M=4,CLUSTER_N=4");
  EXPECT_NE(e.find("portable limit is 8"), std::string::npos) << e;
  e = passcheck::error_of(mm, "ATOM=wgmma_bf16,WM=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=64,CLUSTER_N=2");
  EXPECT_NE(e.find("WARP_SPECIALIZE=1"), std::string::npos) << e;
  e = passcheck::error_of(mm, kTile32 + ",CLUSTER_N=3");
  EXPECT_NE(e.find("powers of two"), std::string::npos) << e;
  e = passcheck::error_of(mm, k2x4 + ",SPLITK=2,SPLITK_MODE=fixup");
  EXPECT_NE(e.find("SPLITK_MODE=partials"), std::string::npos) << e;
  // 16 stages of 64x64 + 64x256 bf16 slabs: 640 KB.
  e = passcheck::error_of(mm, "ATOM=wgmma_bf16,WM=1,WN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=16,"
                   "WARP_SPECIALIZE=1");
  EXPECT_NE(e.find("227 KB"), std::string::npos) << e;
  EXPECT_THROW(Knobs::parse("STAGES=17"), Error);
  EXPECT_NO_THROW(Knobs::parse("STAGES=16,CLUSTER_N=8"));
}

}  // namespace
}  // namespace loom
