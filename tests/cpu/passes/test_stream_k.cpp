// Stream-K (STREAM_K=1, t:048): a persistent warp-specialized wgmma kernel's last one to
// two waves split by K iterations over its CTAs, the two parts of a split tile meeting
// through the f32 workspace and a counter per boundary and consumer warpgroup. After
// every pass the program runs on the interpreter and is compared with the naive Loop IR:
// at Tile IR as one thread per block, then the producer and the consumer warpgroups as
// concurrent tasks, with the blocks of the kernel run last to first (the counter, not
// the order, must pick who finishes a tile). The small targets give T / P a fraction,
// so units start and end inside tiles; the shapes are ragged in M, N and K.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::count;
using passcheck::sm90a_with_sms;

// 128 x 64 tiles of two cooperative consumer warpgroups, 64-deep slabs through a 2-deep ring.
const std::string kStreamK =
    "ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,GROUP_M=2,"
    "WARP_SPECIALIZE=1,PERSISTENT=1,STREAM_K=1";

TEST(StreamK, EveryPassMatchesWithUnitsInsideTiles) {
  // 2 x 5 = 10 tiles of 3 slabs (K = 168: the last slab 40 deep) on 4 CTAs: one whole
  // wave, then 6 tiles' 18 slabs as 4, 5, 4 and 5 per CTA: CTA 0 takes tile 4 and the
  // first slab of tile 5, CTA 1 the rest of tile 5 and tile 6, CTA 2 tile 7 and the head
  // of tile 8, CTA 3 its tail and tile 9. M = 200 and N = 264 are ragged too.
  CompileState s = passcheck::check_every_pass("matmul(A[200,168]:bf16, B[168,264]:bf16)",
                                               Knobs::parse(kStreamK), 61, {}, {},
                                               std::nullopt, sm90a_with_sms(4));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.grid[0].const_value(), 4);
  EXPECT_EQ(count(k.body, StmtKind::TileArrive), 1);
  EXPECT_TRUE(s.kernel.has_tensor("streamk_ws"));
  EXPECT_TRUE(s.kernel.tensor("streamk_count").zero_init);
  // The workspace and the counter are the kernel's.
  EXPECT_NE(std::find(k.params.begin(), k.params.end(), "streamk_ws"), k.params.end());
  EXPECT_NE(std::find(k.params.begin(), k.params.end(), "streamk_count"), k.params.end());
}

TEST(StreamK, EveryPassMatchesWithABiasReluEpilogueAndTheTmaStore) {
  // The epilogue runs in the part that arrives second only: a fused bias and relu must
  // see the whole sum, and the streamed TMA store (per-warpgroup owners, their named
  // barriers) sits under the arrival's answer. 2 x 3 tiles of 2 slabs on 4 CTAs, no whole
  // wave: 3 slabs per CTA, tiles 1 and 4 split.
  passcheck::check_every_pass(
      "relu(linear(X[200,104]:bf16, W[136,104]:bf16, bias[136]:bf16))",
      Knobs::parse(kStreamK + ",EPILOGUE=tma_store,EPI_BUFFERS=2"), 67, {}, {}, std::nullopt,
      sm90a_with_sms(4));
}

TEST(StreamK, EveryPassMatchesWithTheStagedStripsIntoAnOddPitch) {
  // EPILOGUE=smem (k:053's strips copied out by each owner's threads) under the arrival's
  // answer: N = 137 (odd rows: scalar copies), a bias + relu, tiles 1 and 4 split.
  passcheck::check_every_pass(
      "relu(linear(X[200,104]:bf16, W[137,104]:bf16, bias[137]:bf16))",
      Knobs::parse(kStreamK + ",EPILOGUE=smem,EPI_BUFFERS=2"), 71, {}, {}, std::nullopt,
      sm90a_with_sms(4));
}

TEST(StreamK, EveryPassMatchesInTwoCtaClusters) {
  // Clusters along M share B by multicast: a unit is the cluster's, each CTA's warpgroups
  // arrive on counters of their own. 2 x 3 cluster tiles of 256 x 64 (2 slabs each) on 4
  // clusters: 3 slabs per cluster, tiles 1 and 4 split; M = 400 leaves the last row of
  // clusters' second CTA partly past M.
  passcheck::check_every_pass(
      "matmul(A[400,104]:bf16, B[104,136]:bf16)",
      Knobs::parse(kStreamK + ",CLUSTER_M=2,EPILOGUE=tma_store"), 71, {}, {}, std::nullopt,
      sm90a_with_sms(8));
}

TEST(StreamK, WholeWavesLeaveTheProgramAlone) {
  auto tile_ir = [](const std::string& knobs, int sm) {
    CompileState s;
    s.graph = parse_expression("matmul(A[256,128]:bf16, B[128,256]:bf16)");
    s.knobs = Knobs::parse(knobs);
    s.target = sm90a_with_sms(sm);
    run_pipeline(s, "t:050_multibuffer");
    return print(s.tile);
  };
  // 2 x 4 tiles: on 4 CTAs two whole waves; on 8 one.
  EXPECT_EQ(tile_ir(kStreamK, 4), tile_ir(passcheck::knobs_over(kStreamK, "STREAM_K=0"), 4));
  EXPECT_EQ(tile_ir(kStreamK, 8), tile_ir(passcheck::knobs_over(kStreamK, "STREAM_K=0"), 8));
  EXPECT_NE(tile_ir(kStreamK, 3), tile_ir(passcheck::knobs_over(kStreamK, "STREAM_K=0"), 3));
}

TEST(StreamK, RefusesKernelsWithoutPersistentCooperativeUnits) {
  const std::string mm = "matmul(A[300,300]:bf16, B[300,200]:bf16)";
  auto fails = [&](const std::string& knobs, const std::string& names) {
    const std::string e = passcheck::error_of(mm, knobs, sm90a_with_sms(5));
    EXPECT_NE(e.find(names), std::string::npos) << knobs << ": " << e;
  };
  fails(passcheck::knobs_over(kStreamK, "PERSISTENT=0"), "PERSISTENT=1");
  fails(passcheck::knobs_over(kStreamK, "WARP_SPECIALIZE=0"), "WARP_SPECIALIZE=1");
  fails(kStreamK + ",SPLITK=2", "SPLITK=1");
  fails("ATOM=wgmma_bf16,WM=2,WN=1,BM=64,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
        "WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong,STREAM_K=1",
        "CONSUMERS=cooperative");
}

}  // namespace
}  // namespace loom
