// The Hopper GEMM passes on the CPU: ATOM=wgmma_* (k:026), TMA slabs in 128-byte swizzle
// spans, chunked N-major B slabs, warp specialization (k:030) and persistent tiles
// (t:027). After every pass the program runs on the interpreter (which executes wgmma
// from the shared tiles, models its asynchrony, and runs the producer and consumer arms
// concurrently) and is compared with the naive Loop IR, over ragged shapes and both
// majornesses of B. Plus the IR's shape after each feature and the errors of impossible
// knob sets.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::count;

int count_atoms(const Block& b, const std::string& prefix) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += s.kind == StmtKind::Atom && s.atom.rfind(prefix, 0) == 0; });
  return n;
}

// Small tiles keep the interpreter fast: one 64 x 32 atom per warpgroup, BK = one span.
const std::string kSmall16 = "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2";

TEST(Wgmma, EveryPassMatchesTheReferenceBf16KMajorB) {
  passcheck::check_every_pass("matmul(A[M,K]:bf16, B[N,K]:bf16.T)", Knobs::parse(kSmall16), 3,
                              {{"M", 100}, {"N", 70}, {"K", 192}});
}

TEST(Wgmma, EveryPassMatchesTheReferenceF16NMajorBInChunks) {
  // B [K, N] row-major: the slab [BK][BN=128] is two 64-column chunks (one TMA box each),
  // read by an MN-major descriptor.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:f16, B[K,N]:f16)",
      Knobs::parse("ATOM=wgmma_f16,WM=1,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2"), 5,
      {{"M", 64}, {"N", 200}, {"K", 128}});
  EXPECT_EQ(s.kernel.tensor("B_s").row_chunk, 64);
}

TEST(Wgmma, EveryPassMatchesTheReferenceWithEpilogueAndTwoWarpgroups) {
  passcheck::check_every_pass(
      "relu(linear(X[M,K]:bf16, W[N,K]:bf16, bias[N]:bf16))",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=3"), 7,
      {{"M", 150}, {"N", 40}, {"K", 128}});
}

TEST(Wgmma, EveryPassMatchesTheReferenceTf32) {
  passcheck::check_every_pass(
      "matmul(A[M,K]:f32, B[N,K]:f32.T)",
      Knobs::parse("ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=2"), 9,
      {{"M", 64}, {"N", 32}, {"K", 96}},
      [](const LoopProgram&, Bindings& b) {
        for (auto& [name, t] : b.tensors)
          if (name == "A" || name == "B")
            for (double& v : t.data) v = round_to_tf32(float(v));
      });
}

TEST(Wgmma, EveryPassMatchesTheReferenceWith64BAnd32BSwizzles) {
  // The descriptors of the narrower TMA swizzles: 64B spans with BK=64 (K-major rows of
  // two spans, stored as chunks along K) and N-major B chunks of 32 columns; 32B spans.
  passcheck::check_every_pass(
      "matmul(A[M,K]:bf16, B[N,K]:bf16.T)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=64B,BK=64,STAGES=2"), 29,
      {{"M", 70}, {"N", 72}, {"K", 192}});
  passcheck::check_every_pass(
      "matmul(A[M,K]:f16, B[K,N]:f16)",
      Knobs::parse("ATOM=wgmma_f16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=32B,BK=32,STAGES=2"), 31,
      {{"M", 64}, {"N", 80}, {"K", 96}});
}

TEST(Wgmma, WarpSpecializedEveryPassMatches) {
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:bf16, B[N,K]:bf16.T)", Knobs::parse(kSmall16 + ",WARP_SPECIALIZE=1"), 11,
      {{"M", 128}, {"N", 64}, {"K", 384}});
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.block_threads, 256);  // one consumer warpgroup + the producer
  EXPECT_EQ(k.mbarriers, 4);        // full and empty per slot
  EXPECT_EQ(count(k.body, StmtKind::Specialize), 1);
  // One consumer warpgroup: each of the 256 threads may hold 255 registers already, so
  // there is nothing to move (and ptxas would ignore setmaxnreg here: k:030).
  EXPECT_EQ(count(k.body, StmtKind::SetMaxNReg), 0);
  EXPECT_FALSE(s.used_knobs.count("CONSUMER_REGS"));
  EXPECT_FALSE(s.used_knobs.count("PRODUCER_REGS"));
  EXPECT_EQ(count(k.body, StmtKind::MbarArrive), 2);  // in the loop, and the last slab
  // Two consumer warpgroups: the producer hands its registers over.
  CompileState two = passcheck::compile_sm90a(
      "matmul(A[256,256]:bf16, B[256,256]:bf16)",
      "ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,WARP_SPECIALIZE=1");
  EXPECT_EQ(two.kernel.kernels.at(0).block_threads, 384);
  EXPECT_EQ(count(two.kernel.kernels.at(0).body, StmtKind::SetMaxNReg), 2);
  EXPECT_EQ(two.used_knobs.at("CONSUMER_REGS"), "232");
  EXPECT_EQ(count(k.body, StmtKind::Barrier), 1);  // only after the mbarrier setup
}

TEST(Wgmma, PersistentWarpSpecializedEveryPassMatches) {
  // 3 x 2 tiles on a target of 4 SMs: two CTAs take two tiles each, the ring runs on.
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 4;
  CompileState out = passcheck::check_every_pass(
      "matmul(A[192,256]:bf16, B[256,128]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=3,"
                   "GROUP_M=2,PERSISTENT=1,WARP_SPECIALIZE=1"),
      13, {}, {}, std::nullopt, t);
  EXPECT_EQ(out.kernel.kernels.at(0).grid[0].const_value(), 4);
}

TEST(Wgmma, PersistentResidualScalingAndF16OutputEveryPassMatches) {
  // The fused epilogues of the GPU cases over the persistent warp-specialized schedule:
  // residual + scaling (bf16), and bf16 operands written as f16.
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 4;
  const std::string knobs =
      "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=3,GROUP_M=2,"
      "PERSISTENT=1,WARP_SPECIALIZE=1";
  passcheck::check_every_pass(
      "mul(add(matmul(A[150,128]:bf16, B[128,136]:bf16), R[150,136]:bf16), 0.5)",
      Knobs::parse(knobs), 19, {}, {}, std::nullopt, t);
  passcheck::check_every_pass("matmul(A[128,128]:bf16, B[128,192]:bf16, out=f16)",
                              Knobs::parse(knobs), 23, {}, {}, std::nullopt, t);
}

TEST(Wgmma, ClusterMulticastEveryPassMatches) {
  // 2-CTA clusters along M share B: each producer loads half of its chunks for both; a
  // persistent grid of 2 clusters on a 4-SM target takes 3 cluster tiles.
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 4;
  CompileState s = passcheck::check_every_pass(
      "matmul(A[384,128]:bf16, B[128,256]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2"),
      17, {}, {}, std::nullopt, t);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.cluster[0], 2);
  EXPECT_EQ(k.grid[0].const_value(), 4);
  EXPECT_EQ(count(k.body, StmtKind::ClusterSync), 2);
  int multicast = 0;
  walk(k.body, [&](const Stmt& x) {
    multicast += x.kind == StmtKind::TmaLoad && !(x.multicast.is_const() && x.multicast.const_value() == 0);
  });
  EXPECT_EQ(multicast, 1);  // B: 2 chunks, one per CTA
}

TEST(Wgmma, KernelIrHasTheAsyncProtocol) {
  CompileState s = passcheck::compile_sm90a("matmul(A[256,256]:bf16, B[256,256]:bf16.T)", kSmall16);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count_atoms(k.body, "wgmma_m64n64k16_f32_bf16_ss"), 1);
  EXPECT_EQ(count(k.body, StmtKind::WgmmaFence), 1);
  EXPECT_EQ(count(k.body, StmtKind::WgmmaCommit), 1);
  EXPECT_EQ(count(k.body, StmtKind::WgmmaWait), 1);
  ASSERT_EQ(k.warp_atoms.size(), 1u);
  EXPECT_EQ(k.warp_atoms[0].threads, 128);
  EXPECT_TRUE(k.warp_atoms[0].a_shared && k.warp_atoms[0].b_shared);
}

TEST(Wgmma, ErrorsNameTheLimit) {
  auto fails = [](const std::string& knobs, const std::string& arch, const std::string& want) {
    {
      const std::string e = passcheck::error_of("matmul(A[256,256]:bf16, B[256,256]:bf16)", knobs,
                                                Target::for_arch(arch));
      ASSERT_NE(e, "") << "no error for " << knobs;
      EXPECT_NE(e.find(want), std::string::npos) << e;
    }
  };
  fails(kSmall16, "sm_80", "sm_90");
  fails("ATOM=wgmma_bf16,BN=512,STAGE=tma,SWIZZLE=128B,BK=64", "sm_90a", "N=512");
  fails("ATOM=wgmma_bf16,STAGE=direct,BK=64", "sm_90a", "STAGE=tma");
  const std::string two_consumers =
      "ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,WARP_SPECIALIZE=1";
  fails(two_consumers + ",CONSUMER_REGS=250", "sm_90a", "multiple of 8");
  // The split must fit what the block holds at launch (168 x 384 = 64512), not the SM's
  // 65536: 32 + 2 x 240 would wait forever in setmaxnreg.inc; 24 + 2 x 240 fits exactly.
  fails(two_consumers + ",PRODUCER_REGS=32,CONSUMER_REGS=240", "sm_90a",
        "needs 65536 registers, and a block of 384 threads holds 64512 (168 a thread at launch), "
        "the only registers setmaxnreg moves: an increase past them never completes. Lower "
        "CONSUMER_REGS (at most 232 beside PRODUCER_REGS=32)");
  EXPECT_EQ(passcheck::error_of("matmul(A[256,256]:bf16, B[256,256]:bf16)",
                                two_consumers + ",PRODUCER_REGS=24,CONSUMER_REGS=240",
                                Target::for_arch("sm_90a")),
            "");
  // Two blocks an SM leave each 80 registers a thread: the default split does not fit.
  fails(two_consumers + ",MIN_BLOCKS=2", "sm_90a", "holds 30720 (80 a thread at launch, MIN_BLOCKS=2)");
  fails(kSmall16 + ",WARP_SPECIALIZE=1,CONSUMER_REGS=232", "sm_90a",
        "this kernel has one consumer warpgroup (256 threads)");
  fails(kSmall16 + ",WARP_SPECIALIZE=1,PRODUCER_REGS=40", "sm_90a", "drop PRODUCER_REGS");
  fails("ATOM=wgmma_f16,STAGE=tma,SWIZZLE=128B,BK=64", "sm_90a", "f16");
}

}  // namespace
}  // namespace loom
