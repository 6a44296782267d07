// The medium GEMM's clustered ring on the CPU: a 6-deep TMA ring (what the medium class's
// persistent 128 x 128 form now takes, as cuBLAS's nvjet 128x128_64x6 kernel does) in
// 2-CTA clusters along M (B's slab halves multicast) and along N (A's halves), with the
// strip-buffered TMA store (stmatrix), a persistent grid of one cluster walking every tile
// (the ring wraps across tiles, its phases too) and cluster halves past the edge; the
// large schedule with direct stores for outputs whose rows TMA cannot store (N odd: the
// GPT-2 LM head's class); a batch through the rank-3 TMA store in clusters (the ragged
// bmm's default). The ring's logic does not depend on the tile's size, so the
// interpreter runs it on 64 x 64 tiles of one consumer warpgroup (a 128 x 128 cluster
// pair took 100 s); the 128 x 128 form's shared memory is checked at full size, and
// tests/cpu/driver/test_model_suite_compile checks the sm_90a defaults and compiles them
// with NVRTC. After every pass the program runs on the interpreter and is compared with
// the naive Loop IR. Also: the interpreter's check of stmatrix operands still being
// written by an in-flight wgmma (it read a register slot before its value array, which
// crashed the 6-deep cluster run above).
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {

const std::string kMedium =
    "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=6,"
    "GROUP_M=8,EPILOGUE=tma_store,EPI_BUFFERS=2,WARP_SPECIALIZE=1,PERSISTENT=1";
// The same ring and epilogue on 64 x 64 tiles (one consumer warpgroup) for the interpreter.
const std::string kSmall =
    "ATOM=wgmma_bf16,WM=1,WN=1,FM=1,FN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=6,"
    "GROUP_M=8,EPILOGUE=tma_store,EPI_BUFFERS=2,WARP_SPECIALIZE=1,PERSISTENT=1";

// Statements of `kind` in the kernel, at any depth.
std::vector<const Stmt*> all_of(const KernelOp& k, StmtKind kind) {
  std::vector<const Stmt*> v;
  walk(k.body, [&](const Stmt& x) {
    if (x.kind == kind) v.push_back(&x);
  });
  return v;
}

// The multicast loads' slabs, and the consumers' releases: each a multicast arrival on
// every CTA of the cluster (mask 0b11), so a slot is refilled only when the consumers of
// both CTAs are done with it.
void expect_cluster_ring(const KernelOp& k, const std::string& shared_slab, int consumers) {
  EXPECT_EQ(k.cluster[0], 2);
  EXPECT_EQ(k.mbarriers, 12) << "6 full and 6 empty barriers";
  int multicast_loads = 0;
  for (const Stmt* s : all_of(k, StmtKind::TmaLoad))
    if (!(s->multicast.is_const() && s->multicast.const_value() == 0)) {
      EXPECT_EQ(s->tensor, shared_slab);
      ++multicast_loads;
    }
  EXPECT_EQ(multicast_loads, 1) << "one half of the shared slab per CTA";
  int releases = 0;
  for (const Stmt* s : all_of(k, StmtKind::MbarArrive)) {
    ASSERT_TRUE(s->multicast.is_const());
    EXPECT_EQ(s->multicast.const_value(), 3);
    ++releases;
  }
  EXPECT_EQ(releases, 2) << "in the slab loop and after its last slab";
  // Empty barriers count the consumer warpgroups of both CTAs; full ones the producer.
  int empty_inits = 0;
  for (const Stmt* s : all_of(k, StmtKind::MbarInit))
    if (s->imm == 2 * consumers) ++empty_inits;
  EXPECT_EQ(empty_inits, 6);
}

TEST(ClusterMedium, SixDeepRingInClustersAlongMMatchesEveryPass) {
  // 3 rows of 64-row tiles: the second cluster's upper half lies past M (its B halves
  // still reach the lower CTA). 2 columns (the second 40 wide). One cluster walks all 4
  // cluster tiles: 4 slabs each, so the 6-slot ring wraps inside the second tile.
  CompileState s = passcheck::check_every_pass("linear(X[150,256]:bf16, W[104,256]:bf16)",
                                               Knobs::parse(kSmall + ",CLUSTER_M=2,PERSISTENT_CTAS=2"),
                                               81);
  ASSERT_EQ(s.kernel.kernels.size(), 1u);
  expect_cluster_ring(s.kernel.kernels[0], "W_s", 1);
}

TEST(ClusterMedium, SixDeepRingInClustersAlongNMatchesEveryPass) {
  // Clusters along N share A's slab: 3 columns of 64 (a cluster half past N), a ragged M
  // and a K of 5 slabs (the last one partial: TMA zero-fills it).
  CompileState s = passcheck::check_every_pass("linear(X[100,320]:bf16, W[136,320]:bf16)",
                                               Knobs::parse(kSmall + ",CLUSTER_N=2,PERSISTENT_CTAS=2"),
                                               82);
  ASSERT_EQ(s.kernel.kernels.size(), 1u);
  expect_cluster_ring(s.kernel.kernels[0], "X_s", 1);
}

// The 128 x 128 form itself (two consumer warpgroups): the same hand-off in its IR.
TEST(ClusterMedium, TheFullSizeFormHasTheSameRing) {
  const std::string e = "linear(X[512,4096]:bf16, W[4096,4096]:bf16)";
  expect_cluster_ring(passcheck::compile_sm90a(e, kMedium + ",CLUSTER_M=2").kernel.kernels.at(0),
                      "W_s", 2);
  expect_cluster_ring(passcheck::compile_sm90a(e, kMedium + ",CLUSTER_N=2").kernel.kernels.at(0),
                      "X_s", 2);
}

TEST(ClusterMedium, RaggedOutputRowsOnTheLargeScheduleMatchEveryPass) {
  // N = 101: the output's rows are 202 bytes (no TMA store), the operands' rows are 256
  // bytes (TMA loads). The large schedule's form for them (on 64 x 64 tiles here): 2-CTA
  // clusters along M, persistent, direct stores guarded at the ragged N edge.
  const std::string knobs =
      "ATOM=wgmma_bf16,WM=1,WN=1,FM=1,FN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
      "GROUP_M=8,EPILOGUE=direct,WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2,PERSISTENT_CTAS=2";
  CompileState s = passcheck::check_every_pass("linear(X[128,128]:bf16, W[101,128]:bf16)",
                                               Knobs::parse(knobs), 83);
  ASSERT_EQ(s.kernel.kernels.size(), 1u);
  EXPECT_EQ(s.kernel.kernels[0].cluster[0], 2);
  EXPECT_TRUE(all_of(s.kernel.kernels[0], StmtKind::TmaStore).empty());
}

// The deepest ring the medium form takes fits the opt-in limit with its strip buffers and
// mbarriers (229,472 of 232,448 bytes), and one slab more does not: the depth is the
// largest that fits, not a guess.
TEST(ClusterMedium, SixSlabsOfOneTwentyEightFitAndSevenDoNot) {
  const std::string e = "linear(X[512,4096]:bf16, W[4096,4096]:bf16)";
  const CompileState s = passcheck::compile_sm90a(e, kMedium + ",CLUSTER_M=2");
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_LE(kernel_smem_bytes(shared_layout(s.kernel, k), k), 232448);
  const std::string err = passcheck::error_of(e, kMedium.substr(0, kMedium.find("STAGES=6")) +
                                                     "STAGES=7" + kMedium.substr(kMedium.find("STAGES=6") + 8));
  EXPECT_NE(err.find("232448"), std::string::npos) << err;
}

TEST(ClusterMedium, ClusteredBatchThroughTheTmaStoreMatchesEveryPass) {
  // The ragged bmm's default form (2-CTA clusters along M, B [K, N] N-major multicast in
  // halves, the rank-3 TMA store) at a small size: 3 rows of 64 per entry, so the second
  // cluster of each entry has its upper half past M (its boxes clip at the entry's edge:
  // zeros, never the next entry's rows); N ragged (136); K = 160 (the last slab partial);
  // one persistent cluster walks both entries' 12 cluster tiles.
  CompileState s = passcheck::check_every_pass(
      "bmm(A[2,150,160]:bf16, B[2,160,136]:bf16)",
      Knobs::parse(kSmall.substr(0, kSmall.find("STAGES=6")) + "STAGES=4" +
                   kSmall.substr(kSmall.find("STAGES=6") + 8) + ",CLUSTER_M=2,PERSISTENT_CTAS=2"),
      85);
  ASSERT_EQ(s.kernel.kernels.size(), 1u);
  const KernelOp& k = s.kernel.kernels[0];
  EXPECT_EQ(k.cluster[0], 2);
  EXPECT_FALSE(all_of(k, StmtKind::TmaStore).empty());
}

// The interpreter checks a stmatrix's operands (accumulators) against in-flight wgmma:
// the strip-buffered TMA store with its epilogue's wgmma.wait 0 removed reads the last
// slab's accumulators while that group is in flight. Before the fix the check looked
// at the stmatrix's register destination, which it does not have (slot -1: a read before
// the value array, which crashed the 6-deep cluster run and otherwise passed silently).
void drop_final_waits(Block& b) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].kind == StmtKind::WgmmaWait && b[i].imm == 0) {
      b.erase(b.begin() + long(i--));
      continue;
    }
    drop_final_waits(b[i].body);
  }
}

TEST(ClusterMedium, StmatrixOfAccumulatorsInFlightIsCaught) {
  const std::string knobs =
      "ATOM=wgmma_bf16,WM=1,WN=1,FM=1,FN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
      "EPILOGUE=tma_store,EPI_BUFFERS=2,STMATRIX=1,WARP_SPECIALIZE=1";
  CompileState s = passcheck::compile_sm90a("linear(X[64,128]:bf16, W[64,128]:bf16)", knobs);
  KernelOp& k = s.kernel.kernels.at(0);
  bool stmatrix = false;
  for (const Stmt* a : all_of(k, StmtKind::Atom)) stmatrix |= a->atom.rfind("stmatrix", 0) == 0;
  ASSERT_TRUE(stmatrix) << "the strips are written with stmatrix";
  Bindings b;
  make_random_inputs(s.kernel, b, 84);
  interpret(s.kernel, b);  // as compiled: retired before the epilogue
  drop_final_waits(k.body);
  std::string msg;
  try {
    interpret(s.kernel, b);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("wgmma accumulators read before wgmma.wait"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stmatrix"), std::string::npos) << msg;
}

}  // namespace
}  // namespace loom
