// wgmma fed by the block's threads instead of the copy engine (STAGE=cp_async with
// ATOM=wgmma_*): the slabs get the swizzled (and, for wide N-major rows, chunked) layout
// the wgmma descriptors read, written by cp.async where a row's alignment allows 16, 8 or
// 4 bytes and by loads and shared stores where it does not (rows of an odd number of
// 16-bit elements), every writer fencing for the async proxy before the barrier. After
// every pass the program runs on the interpreter, which checks the proxy fences, the
// cp.async groups and the ring's races, and is compared with the naive Loop IR.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "pass_check.h"
#include "passes/defaults.h"

namespace loom {
namespace {
using passcheck::count;

void round_operands_to_tf32(const LoopProgram&, Bindings& b) {
  for (auto& [name, t] : b.tensors)
    if (name == "A" || name == "B")
      for (double& v : t.data) v = round_to_tf32(float(v));
}

int count_async_copies(const Block& b, int width) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += s.kind == StmtKind::AsyncCopy && s.width == width; });
  return n;
}

const std::string kSmall =
    "WM=1,WN=1,BN=64,STAGE=cp_async,SWIZZLE=128B,BK=64,STAGES=3,VECTORIZE=8";

TEST(WgmmaCpAsync, RaggedNBf16MixesCpAsyncAndRegisterCopies) {
  // B [K, N] with N = 77: its rows are 154 bytes, 2-byte aligned, which neither TMA nor
  // cp.async can address: B's slab goes through registers, A's (K = 192) by 16-byte
  // cp.async, in the mixed ring of k:050.
  CompileState s = passcheck::check_every_pass("matmul(A[100,192]:bf16, B[192,77]:bf16)",
                                               Knobs::parse("ATOM=wgmma_bf16," + kSmall), 41);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_GT(count_async_copies(k.body, 8), 0);
  EXPECT_GT(count(k.body, StmtKind::FenceProxyAsync), 0);
  EXPECT_EQ(count(k.body, StmtKind::TmaLoad), 0);
}

TEST(WgmmaCpAsync, RaggedKF16GoesThroughRegisters) {
  // K = 133: A's rows are odd too; both slabs through registers, a ring of 3.
  passcheck::check_every_pass("matmul(A[70,133]:f16, B[133,72]:f16)",
                              Knobs::parse("ATOM=wgmma_f16," + kSmall), 43);
}

TEST(WgmmaCpAsync, MMajorAWithOddRows) {
  // A given transposed, [K, M] with M = 71: an M-major A slab (the 16-bit descriptor
  // transposes it) filled through registers.
  passcheck::check_every_pass("matmul(A[72,71]:bf16.T, B[72,77]:bf16)",
                              Knobs::parse("ATOM=wgmma_bf16," + kSmall), 44);
}

TEST(WgmmaCpAsync, NMajorBInChunksBy16ByteCopies) {
  // B [K, N], N = 200: 400-byte rows, 16-byte cp.async; BN = 128 makes 256-byte slab rows,
  // stored as two 64-column chunks like the TMA boxes would.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[64,128]:f16, B[128,200]:f16)",
      Knobs::parse("ATOM=wgmma_f16,WM=1,WN=1,BN=128,STAGE=cp_async,SWIZZLE=128B,BK=64,STAGES=2,"
                   "VECTORIZE=8"),
      45);
  EXPECT_EQ(s.kernel.tensor("B_s").row_chunk, 64);
  EXPECT_GT(count_async_copies(s.kernel.kernels.at(0).body, 8), 0);
  EXPECT_EQ(count(s.kernel.kernels.at(0).body, StmtKind::Load), 0);  // no register path
}

TEST(WgmmaCpAsync, FourByteRowsTakeNarrowCopiesAndTwoWarpgroups) {
  // N = 102: 204-byte rows, 4-byte aligned: 2-element cp.async; two consumer warpgroups.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[150,128]:bf16, B[128,102]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=cp_async,SWIZZLE=128B,BK=64,STAGES=2,"
                   "VECTORIZE=8"),
      47);
  EXPECT_GT(count_async_copies(s.kernel.kernels.at(0).body, 2), 0);
}

TEST(WgmmaCpAsync, KMajorBWith64BSpansAndSyncStaging) {
  // B given transposed (K-major), 64-byte spans; STAGE=sync fills the same layout through
  // registers.
  passcheck::check_every_pass(
      "matmul(A[70,192]:bf16, B[72,192]:bf16.T)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=sync,SWIZZLE=64B,BK=64,STAGES=2"), 49);
  // Without a swizzle: the descriptors' interleaved 8x16-byte core matrices.
  passcheck::check_every_pass(
      "matmul(A[64,128]:bf16, B[128,72]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=cp_async,BK=64,STAGES=2"), 50);
}

TEST(WgmmaCpAsync, Tf32NMajorBIsTransposedIntoAKMajorSlab) {
  // wgmma reads 32-bit operands K-major only: B [K, N] is transposed while it is written
  // (SLAB_B=kinner by default for wgmma_tf32, one 4-byte cp.async per element).
  CompileState s = passcheck::check_every_pass(
      "matmul(A[64,96]:tf32, B[96,40]:tf32)",
      Knobs::parse("ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=cp_async,SWIZZLE=128B,BK=32,STAGES=3"),
      51, {}, round_operands_to_tf32);
  const TensorDecl& b = s.kernel.tensor("B_s");
  EXPECT_EQ(b.shape.back().const_value(), 32);  // [.., BN, BK]: K innermost
  EXPECT_GT(count_async_copies(s.kernel.kernels.at(0).body, 1), 0);
}

TEST(WgmmaCpAsync, Tf32MMajorAIsTransposedToo) {
  passcheck::check_every_pass(
      "matmul(A[77,64]:tf32.T, B[77,40]:tf32)",
      Knobs::parse("ATOM=wgmma_tf32,WM=1,WN=1,BN=40,STAGE=cp_async,SWIZZLE=128B,BK=32,STAGES=2"),
      55, {}, round_operands_to_tf32);
}

TEST(WgmmaCpAsync, Tf32KMajorBAndRaggedK) {
  passcheck::check_every_pass(
      "matmul(A[70,77]:tf32, B[32,77]:tf32.T)",
      Knobs::parse("ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=cp_async,SWIZZLE=128B,BK=32,STAGES=2"),
      53, {}, round_operands_to_tf32);
}

// WARP_SPECIALIZE=1: a producer warpgroup copies (cp.async, or loads and stores) and
// announces each slab on the ring's full mbarrier once it landed and was fenced; the
// consumers wait, compute and release, as with TMA.
TEST(WgmmaCpAsync, CpAsyncProducerWarpgroupFeedsTheConsumers) {
  CompileState s = passcheck::check_every_pass(
      "matmul(A[100,320]:bf16, B[320,77]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=cp_async,SWIZZLE=128B,BK=64,STAGES=4,"
                   "VECTORIZE=8,WARP_SPECIALIZE=1"),
      59);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.block_threads, 256);  // one consumer warpgroup + the producer
  EXPECT_EQ(k.mbarriers, 8);        // full and empty per slot
  EXPECT_EQ(count(k.body, StmtKind::Specialize), 1);
  EXPECT_EQ(count(k.body, StmtKind::TmaLoad), 0);
  // Two consumer warpgroups (each producer thread copies for two), ragged K, a short
  // loop (KO = 2 under the lag of 2 slabs), and tf32 transposed while written.
  passcheck::check_every_pass(
      "matmul(A[150,133]:f16, B[133,72]:f16)",
      Knobs::parse("ATOM=wgmma_f16,WM=2,WN=1,BN=64,STAGE=cp_async,SWIZZLE=128B,BK=64,STAGES=4,"
                   "VECTORIZE=8,WARP_SPECIALIZE=1"),
      61);
  passcheck::check_every_pass(
      "matmul(A[64,96]:tf32, B[96,40]:tf32)",
      Knobs::parse("ATOM=wgmma_tf32,WM=1,WN=1,BN=40,STAGE=cp_async,SWIZZLE=128B,BK=32,STAGES=2,"
                   "WARP_SPECIALIZE=1"),
      63, {}, round_operands_to_tf32);
}

TEST(WgmmaCpAsync, PersistentTilesKeepTheRingAcrossTiles) {
  // 3 x 2 tiles on a target of 4 SMs: two CTAs take two tiles each; each tile's ring is
  // filled, drained and refilled by the threads.
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 4;
  passcheck::check_every_pass(
      "matmul(A[192,200]:bf16, B[200,127]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=cp_async,SWIZZLE=128B,BK=64,STAGES=3,"
                   "VECTORIZE=8,GROUP_M=2,PERSISTENT=1"),
      57, {}, {}, std::nullopt, t);
}

// The sm_90a defaults: ragged 16-bit GEMMs and :tf32 take wgmma; f32 stays exact.
TEST(WgmmaCpAsync, DefaultsChooseTheThreadCopiesWhereTmaCannot) {
  const Target h = Target::for_arch("sm_90a"), a = Target::for_arch("sm_80");
  auto choice = [](const std::string& expr, const Target& t) {
    return default_knobs(parse_expression(expr), t);
  };
  DefaultChoice r = choice("matmul(A[4096,4096]:bf16, B[4096,4095]:bf16)", h);
  EXPECT_EQ(r.knobs.get_str("ATOM", ""), "wgmma_bf16");
  EXPECT_EQ(r.wgmma.get_str("STAGE", ""), "cp_async");
  EXPECT_EQ(r.wgmma.get_int("BK", 0), 32);  // B's odd rows go through registers
  EXPECT_EQ(r.wgmma.get_int("WARP_SPECIALIZE", 0), 0);
  DefaultChoice n = choice("matmul(A[4096,4096]:f16, B[4096,4094]:f16)", h);  // 4-byte rows
  EXPECT_EQ(n.knobs.get_str("ATOM", ""), "wgmma_f16");
  EXPECT_EQ(n.wgmma.get_int("BK", 0), 64);
  EXPECT_EQ(choice("matmul(A[4096,4096]:bf16, B[4096,4095]:bf16)", a).knobs.get_str("ATOM", ""),
            "mma_bf16");
  // Without a wave of 128x128 tiles (56 at 1000x777 on 132 SMs) but with one of 64x64
  // tiles (208): the threads' one-warpgroup form, 64-deep slabs in a 3-deep ring (H200:
  // 1.05-1.08x torch). Fewer 64x64 tiles (96 at 1000x333) keep mma.sync.
  DefaultChoice small = choice("matmul(A[1000,333]:f16, B[333,777]:f16)", h);
  EXPECT_EQ(small.knobs.get_str("ATOM", ""), "wgmma_f16");
  EXPECT_EQ(small.wgmma.get_int("BK", 0), 64);
  EXPECT_EQ(small.wgmma.get_int("STAGES", 0), 3);
  EXPECT_EQ(choice("matmul(A[1000,777]:f16, B[777,333]:f16)", h).knobs.get_str("ATOM", ""),
            "mma_f16");
  EXPECT_EQ(choice("matmul(A[1000,333]:tf32, B[333,777]:tf32)", h).knobs.get_str("ATOM", ""),
            "mma_tf32");
  EXPECT_EQ(choice("matmul(A[1000,512]:tf32, B[777,512]:tf32.T)", h).knobs.get_str("ATOM", ""),
            "mma_tf32");
  // tf32: B [K, N] and A.T run on TMA in registers (swapped for B [K, N]: test_wgmma_rs.cpp),
  // both M-/N-major on TMA transposed in shared memory, B.T keeps the TMA schedule; sm_80
  // mma.sync. Rows TMA cannot address keep the threads' copies.
  DefaultChoice kn = choice("matmul(A[4096,4096]:tf32, B[4096,4096]:tf32)", h);
  EXPECT_EQ(kn.knobs.get_str("ATOM", ""), "wgmma_tf32");
  EXPECT_EQ(kn.wgmma.get_str("STAGE", ""), "tma");
  EXPECT_EQ(kn.wgmma.get_str("SWAP_AB", ""), "1");
  DefaultChoice both = choice("matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32)", h);
  EXPECT_EQ(both.knobs.get_str("ATOM", ""), "wgmma_tf32");
  EXPECT_EQ(both.wgmma.get_str("STAGE", ""), "tma");
  DefaultChoice ragged = choice("matmul(A[4096,4096]:tf32.T, B[4096,4090]:tf32)", h);
  EXPECT_EQ(ragged.knobs.get_str("ATOM", ""), "wgmma_tf32");
  EXPECT_EQ(ragged.wgmma.get_str("STAGE", ""), "cp_async");
  DefaultChoice bt = choice("matmul(A[4096,4096]:tf32, B[4096,4096]:tf32.T)", h);
  EXPECT_EQ(bt.knobs.get_str("ATOM", ""), "wgmma_tf32");
  EXPECT_EQ(bt.wgmma.get_str("STAGE", ""), "tma");
  EXPECT_EQ(choice("matmul(A[4096,4096]:tf32, B[4096,4096]:tf32)", a).knobs.get_str("ATOM", ""),
            "mma_tf32");
  // Batched tf32 keeps mma.sync (the wgmma schedules take one GEMM).
  EXPECT_EQ(choice("bmm(A[8,1024,1024]:tf32, B[8,1024,1024]:tf32)", h).knobs.get_str("ATOM", ""),
            "mma_tf32");
  // Plain f32 stays exact: FFMA on every target.
  EXPECT_EQ(choice("matmul(A[4096,4096]:f32, B[4096,4096]:f32)", h).knobs.get_str("ATOM", "fma"),
            "fma");
  EXPECT_EQ(choice("matmul(A[4096,4096]:f32, B[4096,4095]:f32)", h).knobs.get_str("ATOM", "fma"),
            "fma");
}

TEST(WgmmaCpAsync, AnExplicitThreadStageDropsTheDefaultTmaOrganization) {
  // The aligned default is warp-specialized, clustered and stores by TMA; STAGE=cp_async
  // alone takes those defaults away rather than failing on knobs nobody wrote.
  const DefaultChoice d =
      default_knobs(parse_expression("matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)"),
                    Target::for_arch("sm_90a"));
  ASSERT_EQ(d.wgmma.get_int("WARP_SPECIALIZE", 0), 1);
  const Knobs out = resolve_knobs(d.knobs, Knobs::parse("STAGE=cp_async,SWIZZLE=128B"), d.wgmma,
                                  GroupMerge::keep);
  EXPECT_EQ(out.get_int("WARP_SPECIALIZE", 0), 0);
  EXPECT_EQ(out.get_int("CLUSTER_M", 1), 1);
  EXPECT_NE(out.get_str("EPILOGUE", "direct"), "tma_store");
  // Written explicitly, they stay (and k:030 names the conflict).
  const Knobs kept = resolve_knobs(d.knobs, Knobs::parse("STAGE=cp_async,WARP_SPECIALIZE=1"),
                                   d.wgmma, GroupMerge::keep);
  EXPECT_EQ(kept.get_int("WARP_SPECIALIZE", 0), 1);
}

TEST(WgmmaCpAsync, ErrorsNameTheFix) {
  auto fails = [](const std::string& expr, const std::string& knobs, const std::string& want) {
    const std::string e = passcheck::error_of(expr, knobs);
    ASSERT_NE(e, "") << "no error for " << knobs;
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  const std::string bf16 = "matmul(A[256,256]:bf16, B[256,255]:bf16)";
  fails(bf16, "ATOM=wgmma_bf16,STAGE=direct,BK=64", "STAGE=cp_async");
  // The cp.async producer: not around a persistent tile loop, not with ping-pong
  // consumers, not with STAGE=sync.
  fails(bf16, "ATOM=wgmma_bf16," + kSmall + ",WARP_SPECIALIZE=1,PERSISTENT=1", "PERSISTENT=0");
  fails(bf16,
        "ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=cp_async,SWIZZLE=128B,BK=64,STAGES=3,"
        "WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong",
        "CONSUMERS=cooperative");
  fails(bf16, "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=sync,SWIZZLE=128B,BK=64,STAGES=2,"
        "WARP_SPECIALIZE=1", "STAGE=cp_async");
  // tf32 N-major kept N-major (SLAB_B=kouter): the descriptor cannot transpose 32 bits;
  // and TMA, which lands boxes in storage order, cannot transpose either.
  fails("matmul(A[256,256]:tf32, B[256,256]:tf32)",
        "ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=cp_async,SWIZZLE=128B,BK=32,STAGES=2,SLAB_B=kouter",
        "K-major");
  fails("matmul(A[256,256]:tf32, B[256,256]:tf32)",
        "ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=2", "K-major");
}

}  // namespace
}  // namespace loom
