// The transposing TMA stage (k:015): a tf32 operand that is not K-major (B [K, N] as given,
// A given transposed), with SLAB_B / SLAB_A = kinner under STAGE=tma, lands in a staging
// slab in its storage order and the block's threads write it K-major into the swizzled
// slab the descriptors read, fence for the async proxy and meet at a named barrier before
// the shared-A wgmma. Every pass interpreted against the naive Loop IR — the interpreter
// applies the swizzle and the chunking on both sides and checks the proxy fence per
// element, the mbarrier phases and the ring's races — over odd M/N/K tails, every thread
// on the ring, the warp-specialized, persistent (several tiles per CTA) and cluster
// schedules. Plus the IR's shape and the errors of knob sets it cannot take.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "passes/defaults.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::count;

// tf32 inputs rounded, so that the reference and the tensor cores see the same values.
void round_tf32(const LoopProgram&, Bindings& b) {
  for (auto& [name, t] : b.tensors)
    if (name != "out")
      for (double& v : t.data) v = round_to_tf32(float(v));
}

const std::string kTf32 = "ATOM=wgmma_tf32,WGMMA_A=smem,STAGE=tma,SWIZZLE=128B,BK=32,SWAP_AB=0";

Target two_sms() {
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 2;
  return t;
}

// The transposing stage's meetings: named barrier 15 (the TMA-store epilogue has its own).
int named_barriers(const Block& b) {
  int n = 0;
  walk(b, [&](const Stmt& s) {
    n += s.named_barrier() && s.value.is_const() && s.value.const_value() == 15;
  });
  return n;
}

TEST(WgmmaTranspose, NMajorBEveryThreadOnTheRingEveryPassMatches) {
  // Odd M, N and K tails: the staging box's zero fill reaches the transposed slab.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:f32, B[K,N]:f32)",
      Knobs::parse(kTf32 + ",SLAB_B=kinner,WM=1,WN=1,BN=64,STAGES=2"), 101,
      {{"M", 70}, {"N", 100}, {"K", 72}}, round_tf32);
  const KernelOp& k = s.kernel.kernels.at(0);
  // B is staged N-major ([ring][BK][BN], no swizzle: the box as it lies) beside its K-major
  // slab ([ring][BN][BK], 128-byte swizzle), and the TMA box targets the staging slab.
  const TensorDecl& stg = s.kernel.tensor("B_s_nm");
  const TensorDecl& slab = s.kernel.tensor("B_s");
  ASSERT_EQ(stg.shape.size(), 3u);
  EXPECT_EQ(stg.shape[1].const_value(), 32);
  EXPECT_EQ(stg.shape[2].const_value(), 64);
  EXPECT_EQ(stg.swizzle.bits, 0);
  EXPECT_EQ(slab.shape[1].const_value(), 64);
  EXPECT_EQ(slab.shape[2].const_value(), 32);
  EXPECT_GT(slab.swizzle.bits, 0);
  bool staged_box = false, slab_box = false;
  for (const TmaDescriptor& d : k.tma) {
    staged_box |= d.shared == "B_s_nm";
    slab_box |= d.shared == "B_s";
  }
  EXPECT_TRUE(staged_box);
  EXPECT_FALSE(slab_box);
  // Two meetings per slab with a 2-slot ring (before the writes and after the fence:
  // k:015 says why), one from 3 slots on; the stores are 16-byte vectors (k:040).
  EXPECT_EQ(named_barriers(k.body), 2);
  int vector_stores = 0;
  walk(k.body, [&](const Stmt& x) {
    vector_stores += x.kind == StmtKind::Write && x.tensor == "B_s" && x.width == 4;
  });
  EXPECT_EQ(vector_stores, 1);
  EXPECT_EQ(s.used_knobs.at("WGMMA_A"), "smem");
}

TEST(WgmmaTranspose, NMajorBWithBiasAndNarrowOutputEveryPassMatches) {
  passcheck::check_every_pass("relu(add(matmul(A[M,K]:f32, B[K,N]:f32), bias[N]:f32))",
                              Knobs::parse(kTf32 + ",SLAB_B=kinner,WM=1,WN=1,BN=32,STAGES=3"), 103,
                              {{"M", 50}, {"N", 72}, {"K", 40}}, round_tf32);
  passcheck::check_every_pass("matmul(A[M,K]:tf32, B[K,N]:tf32, out=bf16)",
                              Knobs::parse(kTf32 + ",SLAB_B=kinner,WM=1,WN=1,BN=64,STAGES=2"), 105,
                              {{"M", 40}, {"N", 64}, {"K", 48}}, round_tf32);
  // BK = 64: the K-major slab's 256-byte rows are stored as two 128-byte chunks
  // (row_chunk), which the transposing stores follow.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:f32, B[K,N]:f32)",
      Knobs::parse("ATOM=wgmma_tf32,WGMMA_A=smem,STAGE=tma,SWIZZLE=128B,BK=64,SWAP_AB=0,"
                   "SLAB_B=kinner,WM=1,WN=1,BN=32,STAGES=2"),
      117, {{"M", 64}, {"N", 40}, {"K", 136}}, round_tf32);
  EXPECT_EQ(s.kernel.tensor("B_s").row_chunk, 32);
}

TEST(WgmmaTranspose, NMajorBWarpSpecializedEveryPassMatches) {
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:f32, B[K,N]:f32)",
      Knobs::parse(kTf32 + ",SLAB_B=kinner,WM=2,WN=1,BN=64,STAGES=2,WARP_SPECIALIZE=1"), 107,
      {{"M", 130}, {"N", 70}, {"K", 200}}, round_tf32);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count(k.body, StmtKind::Specialize), 1);
  // The consumers keep their meeting (k:030 drops only the block-wide slab barrier): the
  // two consumer warpgroups' 256 threads, the producer not among them.
  int meetings = 0;
  walk(k.body, [&](const Stmt& x) {
    if (x.named_barrier() && x.value.is_const() && x.value.const_value() == 15) {
      ++meetings;
      EXPECT_EQ(int64_t(x.imm), 256);
    }
  });
  EXPECT_EQ(meetings, 2);
}

TEST(WgmmaTranspose, NMajorBPersistentClusterEveryPassMatches) {
  // The large schedule's form (two consumer warpgroups, persistent, 2-CTA clusters whose
  // staging box of B is multicast by rows) on 2 SMs: several tiles per CTA, the ring and
  // its transposes running on across tiles; the TMA store takes the unswapped tile.
  passcheck::check_every_pass(
      "matmul(A[M,K]:f32, B[K,N]:f32)",
      Knobs::parse(kTf32 + ",SLAB_B=kinner,WM=2,WN=1,BN=64,STAGES=2,WARP_SPECIALIZE=1,"
                           "PERSISTENT=1,GROUP_M=2,CLUSTER_M=2,EPILOGUE=tma_store,EPI_BUFFERS=2"),
      109, {{"M", 256}, {"N", 200}, {"K", 96}}, round_tf32, std::nullopt, two_sms());
  // Three slots: the meeting of the slab before orders the slot's last readers.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:f32, B[K,N]:f32)",
      Knobs::parse(kTf32 + ",SLAB_B=kinner,WM=2,WN=1,BN=128,STAGES=3,WARP_SPECIALIZE=1,"
                           "PERSISTENT=1,EPILOGUE=direct"),
      111, {{"M", 300}, {"N", 136}, {"K", 72}}, round_tf32, std::nullopt, two_sms());
  EXPECT_EQ(named_barriers(s.kernel.kernels.at(0).body), 1);
}

TEST(WgmmaTranspose, MMajorAAndBothTransposedEveryPassMatch) {
  // A given transposed: its staging slab [BK][BM] becomes the K-major [BM][BK].
  passcheck::check_every_pass("matmul(A[K,M]:f32.T, B[N,K]:f32.T)",
                              Knobs::parse(kTf32 + ",SLAB_A=kinner,WM=1,WN=1,BN=32,STAGES=2"), 113,
                              {{"M", 72}, {"N", 40}, {"K", 104}}, round_tf32);
  // Neither operand K-major: both transposed, warp-specialized and persistent.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[K,M]:f32.T, B[K,N]:f32)",
      Knobs::parse(kTf32 + ",SLAB_A=kinner,SLAB_B=kinner,WM=2,WN=1,BN=64,STAGES=2,"
                           "WARP_SPECIALIZE=1,PERSISTENT=1"),
      115, {{"M", 200}, {"N", 130}, {"K", 80}}, round_tf32, std::nullopt, two_sms());
  EXPECT_TRUE(s.kernel.has_tensor("A_s_nm"));
  EXPECT_TRUE(s.kernel.has_tensor("B_s_nm"));
  EXPECT_EQ(named_barriers(s.kernel.kernels.at(0).body), 2);  // both slabs transposed together
  // The sm_90a default's form for neither K-major: BK = 16 (64-byte K-major rows, the
  // 64-byte swizzle), 4 slots, one meeting per slab.
  CompileState d = passcheck::check_every_pass(
      "matmul(A[K,M]:f32.T, B[K,N]:f32)",
      Knobs::parse("ATOM=wgmma_tf32,WGMMA_A=smem,STAGE=tma,SWIZZLE=64B,BK=16,SWAP_AB=0,"
                   "SLAB_A=kinner,SLAB_B=kinner,WM=2,WN=1,BN=64,STAGES=4,WARP_SPECIALIZE=1,"
                   "PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2"),
      119, {{"M", 136}, {"N", 72}, {"K", 72}}, round_tf32, std::nullopt, two_sms());
  EXPECT_EQ(named_barriers(d.kernel.kernels.at(0).body), 1);
}

TEST(WgmmaTranspose, ImpossibleCombinationsNameTheReason) {
  auto compile_err = [](const std::string& expr, const std::string& knobs) {
    return passcheck::error_of(expr, knobs);
  };
  // Ping-pong consumers work on different tiles: one meeting per slab cannot be shared.
  const std::string pp = compile_err(
      "matmul(A[256,128]:f32, B[128,128]:f32)",
      kTf32 + ",SLAB_B=kinner,WM=2,WN=1,BN=64,STAGES=2,WARP_SPECIALIZE=1,PERSISTENT=1,"
              "CONSUMERS=pingpong");
  EXPECT_NE(pp.find("CONSUMERS=cooperative"), std::string::npos) << pp;
  // 16-bit wgmma reads an N-major B by descriptor: no transposing stage for it, as before.
  const std::string b16 = compile_err(
      "matmul(A[256,256]:bf16, B[256,256]:bf16)",
      "ATOM=wgmma_bf16,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,WM=1,WN=1,BN=64,SLAB_B=kinner");
  EXPECT_NE(b16.find("cannot transpose its slab"), std::string::npos) << b16;
  // mma.sync reads fragments from slabs the threads fill: STAGE=tma is refused as before.
  const std::string mma = compile_err("matmul(A[128,128]:f32, B[128,128]:f32)",
                                      "ATOM=mma_tf32,STAGE=tma,SLAB_B=kinner");
  EXPECT_FALSE(mma.empty());
}

}  // namespace
}  // namespace loom
