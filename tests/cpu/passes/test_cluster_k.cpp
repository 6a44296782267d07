// CLUSTER_K (l:022, t:010's cluster tier, k:057): the CTAs of a cluster split one tile's K
// and add their partial tiles through distributed shared memory: each stores (st.async)
// every row slice of its partial into the tile of the slice's owner, which waits for the
// bytes on an mbarrier and sums. After every pass the program runs on the interpreter
// (which runs a cluster's CTAs as cooperative tasks, so a peer's stores land for real and
// a missing wait or init is a reported race or deadlock) and is compared with the unsplit Loop IR: 2 and 4 CTAs, with and without warp
// specialization, across-cluster SPLITK (reduce and atomic), swap-AB decode, a K that
// leaves slices empty, a bias added once, f32 and bf16 outputs. Plus the fused kernel's
// shape and the errors of what does not compose.
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::count;

int remote(const Block& b, StmtKind kind) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += s.kind == kind && s.remote; });
  return n;
}

// One 64 x 64 atom per warpgroup, BK = one 128-byte span: small for the interpreter.
const std::string kSmall = "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2";
// Two consumer warpgroups (BM = 128) and a producer.
const std::string kWs =
    "ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,WARP_SPECIALIZE=1";

TEST(ClusterK, TwoCtasEveryPassMatches) {
  CompileState s = passcheck::check_every_pass("matmul(A[128,256]:bf16, B[256,64]:bf16)",
                                               Knobs::parse(kSmall + ",CLUSTER_K=2"), 61);
  ASSERT_EQ(s.kernel.kernels.size(), 1u);
  const KernelOp& k = s.kernel.kernels[0];
  EXPECT_EQ(k.cluster[0], 2);
  // One relaxed cluster barrier (the exchange mbarrier is initialized before any peer
  // stores into it); the partial moves by remote stores, and is read locally.
  EXPECT_EQ(count(k.body, StmtKind::ClusterSync), 1);
  EXPECT_GT(remote(k.body, StmtKind::Write), 0);
  EXPECT_EQ(remote(k.body, StmtKind::Load), 0);
  EXPECT_FALSE(s.kernel.has_tensor("cluster_partial"));
  EXPECT_EQ(s.kernel.tensor("cluster_tile").role, TensorRole::Shared);
}

TEST(ClusterK, FourCtasWarpSpecializedEveryPassMatches) {
  passcheck::check_every_pass("matmul(A[128,512]:bf16, B[64,512]:bf16.T)",
                              Knobs::parse(kWs + ",CLUSTER_K=4"), 62);
}

TEST(ClusterK, AcrossClustersSplitKReduceEveryPassMatches) {
  // 2 clusters of 2 CTAs; the clusters' sums meet in splitk_reduce (a second kernel).
  CompileState s = passcheck::check_every_pass("matmul(A[128,512]:bf16, B[512,64]:bf16)",
                                               Knobs::parse(kWs + ",CLUSTER_K=2,SPLITK=2"), 63);
  ASSERT_EQ(s.kernel.kernels.size(), 2u);
  EXPECT_EQ(s.kernel.kernels[0].cluster[0], 2);
  EXPECT_EQ(s.kernel.kernels[1].cluster[0], 1);
}

TEST(ClusterK, AcrossClustersAtomicF32EveryPassMatches) {
  passcheck::check_every_pass("matmul(A[64,384]:bf16, B[384,64]:bf16, out=f32)",
                              Knobs::parse(kSmall + ",CLUSTER_K=2,SPLITK=3,SPLITK_MODE=atomic"), 64);
}

TEST(ClusterK, RaggedKLeavesEmptySlices) {
  // K = 200 in 4 slices of whole 64-deep slabs: 64, 64, 64, 8 — and with K = 136 (64, 64,
  // 8, 0) the last slice is empty (zero k-steps) yet its CTA still writes its zeros and
  // meets the cluster at both barriers.
  passcheck::check_every_pass("matmul(A[72,200]:bf16, B[200,40]:bf16)",
                              Knobs::parse(kSmall + ",CLUSTER_K=4"), 65);
  passcheck::check_every_pass("matmul(A[64,136]:bf16, B[136,64]:bf16)",
                              Knobs::parse(kWs + ",CLUSTER_K=4"), 66);
}

TEST(ClusterK, SymbolicKRaggedEveryPassMatches) {
  passcheck::check_every_pass("matmul(A[M,K]:bf16, B[K,N]:bf16)", Knobs::parse(kSmall + ",CLUSTER_K=2"),
                              67, {{"M", 70}, {"N", 72}, {"K", 100}});
}

TEST(ClusterK, BiasAddedOnceAndF32Output) {
  passcheck::check_every_pass("relu(linear(X[64,256]:bf16, W[96,256]:bf16, bias[96]:bf16))",
                              Knobs::parse(kSmall + ",CLUSTER_K=2"), 68);
  passcheck::check_every_pass("matmul(A[64,192]:f16, B[192,64]:f16, out=f32)",
                              Knobs::parse("ATOM=wgmma_f16,WM=1,WN=1,BN=64,STAGE=tma,"
                                           "SWIZZLE=128B,BK=64,STAGES=2,CLUSTER_K=2"),
                              69);
}

TEST(ClusterK, SwapAbDecodeEveryPassMatches) {
  // 16 tokens: the weight's rows are wgmma's M (BM = 64), the tokens its N.
  passcheck::check_every_pass(
      "matmul(A[16,512]:bf16, B[512,256]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,SWAP_AB=1,WM=1,WN=1,BN=16,STAGE=tma,SWIZZLE=128B,BK=64,"
                   "STAGES=2,WARP_SPECIALIZE=1,CLUSTER_K=2"),
      70);
}

// The interpreter runs a cluster's CTAs as cooperative tasks: without the first barrier a
// peer's tile is read before it is written (a race across CTAs), without the last a CTA
// exits while its peers still read its shared memory.
// The exchange's two orderings, each dropped: without the cluster barrier a peer may store
// into a tile whose mbarrier is not initialized yet; without the owner's wait it sums
// before the stores have landed.
TEST(ClusterK, InterpreterReportsAMissingExchangeOrdering) {
  const CompileState s = passcheck::compile_sm90a("matmul(A[64,256]:bf16, B[256,64]:bf16)", kSmall + ",CLUSTER_K=2");
  Bindings in;
  make_random_inputs(s.loop, in, 71);
  EXPECT_NO_THROW(passcheck::run_level(s, Level::Kernel, in));
  auto without = [&](StmtKind kind) {
    CompileState t = s;
    Block& b = t.kernel.kernels.at(0).body;
    // The cluster barrier is the first ClusterSync; the owner's wait the last MbarWait.
    auto it = kind == StmtKind::ClusterSync
                  ? std::find_if(b.begin(), b.end(), [&](const Stmt& x) { return x.kind == kind; })
                  : std::find_if(b.rbegin(), b.rend(), [&](const Stmt& x) { return x.kind == kind; }).base() - 1;
    EXPECT_EQ(it->kind, kind);
    b.erase(it);
    try {
      passcheck::run_level(t, Level::Kernel, in);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string no_sync = without(StmtKind::ClusterSync);
  EXPECT_NE(no_sync.find("before any mbar.init"), std::string::npos) << no_sync;
  const std::string no_wait = without(StmtKind::MbarWait);
  EXPECT_NE(no_wait.find("cluster_tile"), std::string::npos) << no_wait;
}

TEST(ClusterK, ErrorsNameTheLimit) {
  const std::string mm = "matmul(A[128,1024]:bf16, B[1024,128]:bf16)";
  EXPECT_NE(passcheck::error_of(mm, kSmall + ",CLUSTER_K=16").find("portable cluster size limit"),
            std::string::npos);
  EXPECT_NE(passcheck::error_of(mm, "ATOM=mma_bf16,CLUSTER_K=2").find("needs ATOM=wgmma_*"), std::string::npos);
  EXPECT_NE(passcheck::error_of(mm, kWs + ",CLUSTER_K=2,PERSISTENT=1").find("use PERSISTENT=0"),
            std::string::npos);
  EXPECT_NE(passcheck::error_of(mm, kWs + ",CLUSTER_K=2,CLUSTER_M=2").find("either the output tiles"),
            std::string::npos);
  EXPECT_NE(passcheck::error_of(mm, kWs + ",CLUSTER_K=2,SPLITK=2,SPLITK_MODE=fixup").find("SPLITK_MODE=reduce"),
            std::string::npos);
  EXPECT_NE(passcheck::error_of(mm, kWs + ",CLUSTER_K=2,EPILOGUE=tma_store").find("EPILOGUE=direct"),
            std::string::npos);
  EXPECT_NE(passcheck::error_of(mm, kSmall + ",CLUSTER_K=3").find("dividing BM"), std::string::npos);
  // 128 x 256 tile: 4 stages of 48 KB slabs and the 136 KB f32 tile do not fit 227 KB.
  const std::string big = "ATOM=wgmma_bf16,WM=2,WN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,"
                          "STAGES=4,WARP_SPECIALIZE=1,CLUSTER_K=2";
  const std::string e = passcheck::error_of("matmul(A[128,8192]:bf16, B[8192,256]:bf16)", big);
  EXPECT_NE(e.find("this GPU allows 232448 B"), std::string::npos) << e;
}

}  // namespace
}  // namespace loom
