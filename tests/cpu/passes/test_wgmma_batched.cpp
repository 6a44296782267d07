// Batched GEMMs on the Hopper path (ATOM=wgmma_*): rank-3 TMA boxes of one batch entry
// (a box never straddles entries, so a ragged edge zero-fills per entry), and the
// persistent walk of t:027 over (batch, tile) work units; an operand shared by every
// entry (a rank-2 map) and rank 4's two batch dims. After every pass the program runs on
// the interpreter and is compared with the naive Loop IR, over ragged M, N, K and batch
// counts 1, 3 and 7, both dtypes and both majornesses of B.
#include <gtest/gtest.h>

#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {

// Small tiles keep the interpreter fast: one 64 x 64 atom per warpgroup, BK = one span.
const std::string kSmall = "WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2";
const std::string kPersistent = kSmall + ",WARP_SPECIALIZE=1,PERSISTENT=1";

// The lets of the kernel's persistent loop, by name.
std::map<std::string, std::string> persistent_lets(const KernelOp& k) {
  std::map<std::string, std::string> out;
  walk(k.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::For && s.axis == "persistent")
      for (const Stmt& x : s.body)
        if (x.kind == StmtKind::Let) out.emplace(x.var, x.value.str());
  });
  return out;
}

TEST(WgmmaBatched, EveryPassMatchesTheReferenceOverBatchCounts) {
  // One CTA per (batch, tile): the box [1, rows, cols] of entry b; M and N ragged, so the
  // last tile of each entry reads past its rows (zero-filled, never the next entry's).
  for (int batch : {1, 3, 7}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const std::string b = std::to_string(batch);
    passcheck::check_every_pass("bmm(A[" + b + ",70,64]:bf16, B[" + b + ",64,72]:bf16)",
                                Knobs::parse("ATOM=wgmma_bf16," + kSmall), 41 + batch);
  }
  passcheck::check_every_pass("bmm(A[3,64,96]:f16, B[3,100,96]:f16.T)",
                              Knobs::parse("ATOM=wgmma_f16," + kSmall), 47);
}

TEST(WgmmaBatched, PersistentWalksBatchAndTilesTogether) {
  // 3 entries x 2 x 2 tiles = 12 work units on a 5-SM target: one grid of 5 CTAs, whose
  // walks cross entry boundaries (CTA 1 takes units 1, 6, 11: entries 0, 1, 2). Before
  // the fold the batch stayed a grid loop: 3 x 4 CTAs, each entry's own persistent grid.
  CompileState s = passcheck::check_every_pass(
      "bmm(A[3,100,192]:bf16, B[3,192,120]:bf16)", Knobs::parse("ATOM=wgmma_bf16," + kPersistent),
      53, {}, {}, std::nullopt, passcheck::sm90a_with_sms(5));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.grid[0].const_value(), 5);
  EXPECT_EQ(k.grid[1].const_value(), 1);
  EXPECT_EQ(k.grid[2].const_value(), 1);
  const auto lets = persistent_lets(k);
  ASSERT_TRUE(lets.count("b")) << "no batch Let in the persistent loop";
  EXPECT_EQ(lets.at("b"), "tile / 4");
}

TEST(WgmmaBatched, PersistentF16NMajorBWithClustersAndEpilogue) {
  // f16, B [Bt, K, N] row-major (N-major chunks), a fused bias and relu, 2-CTA clusters
  // along M sharing B by multicast: the 2 x 2 cluster tiles of 3 entries on 4 SMs (2
  // clusters).
  CompileState s = passcheck::check_every_pass(
      "relu(add(bmm(A[3,128,64]:f16, B[3,64,128]:f16), bias[128]:f16))",
      Knobs::parse("ATOM=wgmma_f16," + kPersistent + ",CLUSTER_M=2"), 59, {}, {}, std::nullopt,
      passcheck::sm90a_with_sms(4));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.cluster[0], 2);
  EXPECT_EQ(k.grid[0].const_value(), 4);
  EXPECT_EQ(k.grid[2].const_value(), 1);
}

TEST(WgmmaBatched, PingPongConsumersTakeAlternateUnits) {
  // CONSUMERS=pingpong over the folded walk: 3 entries x 2 x 1 tiles of 64 x 64 per
  // warpgroup = 6 units on 4 SMs; the warpgroups of CTAs 0 and 1 take units of two
  // different entries (0 and 4, 1 and 5).
  passcheck::check_every_pass(
      "bmm(A[3,100,128]:bf16, B[3,128,64]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "GROUP_M=2,WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong"),
      107, {}, {}, std::nullopt, passcheck::sm90a_with_sms(4));
}

TEST(WgmmaBatched, PersistentWithFewerUnitsThanSms) {
  // 7 entries of one tile each on 132 SMs: 7 CTAs, one unit each.
  CompileState s = passcheck::check_every_pass("bmm(A[7,64,64]:bf16, B[7,64,64]:bf16)",
                                               Knobs::parse("ATOM=wgmma_bf16," + kPersistent), 61);
  EXPECT_EQ(s.kernel.kernels.at(0).grid[0].const_value(), 7);
}

TEST(WgmmaBatched, StreamKSplitsUnitsAcrossEntries) {
  // Stream-K over the folded walk: 3 entries x 2 x 1 tiles of 128 x 64 (2 slabs each) are 6
  // units on 4 CTAs, no whole wave: 3 slabs per CTA, so units 1 and 4 (entries 0 and 2)
  // are split and the partial sums meet through the workspace, whose slots no longer
  // carry a batch dimension (the unit names the entry).
  CompileState s = passcheck::check_every_pass(
      "bmm(A[3,200,104]:bf16, B[3,104,56]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "GROUP_M=2,WARP_SPECIALIZE=1,PERSISTENT=1,STREAM_K=1"),
      67, {}, {}, std::nullopt, passcheck::sm90a_with_sms(4));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.grid[0].const_value(), 4);
  EXPECT_EQ(k.grid[2].const_value(), 1);
  EXPECT_TRUE(s.kernel.has_tensor("streamk_ws"));
}

// The box rank of each operand's tensor map, by tensor.
std::map<std::string, size_t> box_ranks(const KernelOp& k) {
  std::map<std::string, size_t> out;
  for (const TmaDescriptor& d : k.tma) out[d.tensor] = d.box.size();
  return out;
}

TEST(WgmmaBatched, BroadcastOperandsEveryPassMatches) {
  // A weight shared by every entry: its tensor map is rank 2 (TMA strides must be positive,
  // so no stride-0 batch dim) and its boxes ignore the batch; the batched operand's are
  // rank 3. Both sides, persistent over 3 x 1 x 2 units on 4 SMs, ragged M and N.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[3,70,64]:bf16, W[64,72]:bf16)", Knobs::parse("ATOM=wgmma_bf16," + kPersistent),
      71, {}, {}, std::nullopt, passcheck::sm90a_with_sms(4));
  auto ranks = box_ranks(s.kernel.kernels.at(0));
  EXPECT_EQ(ranks.at("A"), 3u);
  EXPECT_EQ(ranks.at("W"), 2u);
  EXPECT_EQ(s.kernel.kernels.at(0).grid[0].const_value(), 4);
  s = passcheck::check_every_pass("matmul(W[70,64]:f16, B[3,100,64]:f16.T)",
                                  Knobs::parse("ATOM=wgmma_f16," + kPersistent), 73, {}, {},
                                  std::nullopt, passcheck::sm90a_with_sms(4));
  ranks = box_ranks(s.kernel.kernels.at(0));
  EXPECT_EQ(ranks.at("W"), 2u);
  EXPECT_EQ(ranks.at("B"), 3u);
  // Not persistent: one CTA per (entry, tile), the batch on blockIdx.z.
  passcheck::check_every_pass("matmul(A[3,70,64]:bf16, W[64,72]:bf16)",
                              Knobs::parse("ATOM=wgmma_bf16," + kSmall), 79);
}

TEST(WgmmaBatched, Rank4EveryPassMatches) {
  // (B, H, M, K) x (B, H, K, N): two batch dims, each a Let of the walk's unit (b0 outer),
  // rank-4 boxes with a box variable per batch dim; 2 x 3 x (2 x 2 tiles) = 24 units on 5 SMs.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[2,3,70,64]:bf16, B[2,3,64,72]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16," + kPersistent), 83, {}, {}, std::nullopt, passcheck::sm90a_with_sms(5));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.grid[0].const_value(), 5);
  EXPECT_EQ(box_ranks(k).at("A"), 4u);
  const auto lets = persistent_lets(k);
  ASSERT_TRUE(lets.count("b0") && lets.count("b1"));
  EXPECT_EQ(lets.at("b1"), "tile / 4 % 3");
  EXPECT_EQ(lets.at("b0"), "tile / 12");
  // A rank-4 batch against a shared weight, f16, one CTA per unit.
  passcheck::check_every_pass("matmul(A[2,3,64,64]:f16, W[64,64]:f16)",
                              Knobs::parse("ATOM=wgmma_f16," + kSmall), 89);
}

TEST(WgmmaBatched, BroadcastAndRank4OnTheOtherPaths) {
  // mma.sync (cp.async slabs) and SIMT read a shared operand without the batch index too.
  passcheck::check_every_pass(
      "matmul(A[3,40,32]:f16, W[32,24]:f16)",
      Knobs::parse("ATOM=mma_f16,WM=1,WN=1,FM=1,FN=2,BK=32,STAGE=cp_async,STAGES=2"), 97);
  passcheck::check_every_pass("matmul(W[20,16]:f32, B[2,3,16,12]:f32)",
                              Knobs::parse("BM=8,BN=8,FM=2,FN=2,BK=8"), 101);
}

TEST(WgmmaBatched, PersistentNeedsAConstantBatch) {
  const std::string e = passcheck::error_of("bmm(A[Bt,64,64]:bf16, B[Bt,64,64]:bf16)",
                                            "ATOM=wgmma_bf16," + kPersistent,
                                            Target::for_arch("sm_90a"));
  EXPECT_NE(e.find("constant batch count"), std::string::npos) << e;
  EXPECT_NE(e.find("--dims"), std::string::npos) << e;
}

}  // namespace
}  // namespace loom
