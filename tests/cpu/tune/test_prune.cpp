// Every pruning rule names what is wrong with numbers a person can check.
#include <gtest/gtest.h>

#include "driver/compile.h"
#include "h100.h"
#include "tune/prune.h"
#include "tune/space.h"

namespace loom::tune {
namespace {

using testing::gemm;
using testing::h100;

struct Case {
  TuneProblem p;
  AtomChoice atom;
};

Case problem(const Graph& g, const std::string& atom, int cc = 90) {
  Case c{tune_problem(g), {}};
  for (const auto& a : atom_choices(c.p, cc))
    if (a.knob == atom) c.atom = a;
  EXPECT_NE(c.atom.atom, nullptr) << atom;
  return c;
}

Target target_for_h100() { return target_for(Target::for_arch("sm_90a"), h100()); }

std::string why(const Case& c, const std::string& knobs, const DeviceInfo& dev = h100()) {
  return knob_rule_violation(c.p, c.atom, Knobs::parse(knobs), dev);
}

TEST(Prune, WgmmaRulesSeeTheSwappedGemm) {
  const std::string w = "ATOM=wgmma_bf16,WN=1,FM=1,FN=1,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,";
  // Decode: swapped, BN tiles M = 16 and BM = 64 tiles N = 4096; unswapped the 64-row
  // atom is 4x the problem's 16 rows, but tiles of 64 stay legal on small problems.
  Case d = problem(gemm(16, 4096, 4096, "bf16"), "wgmma_bf16");
  EXPECT_EQ(why(d, w + "SWAP_AB=1,WM=1,BN=16"), "");
  EXPECT_NE(why(d, w + "SWAP_AB=1,WM=1,BN=128").find("larger than the problem's 4096x16"),
            std::string::npos)
      << why(d, w + "SWAP_AB=1,WM=1,BN=128");
  // A square GEMM is not swapped; an atom N that is not a multiple of 8 is no wgmma.
  Case sq = problem(gemm(4096, 4096, 4096, "bf16"), "wgmma_bf16");
  EXPECT_NE(why(sq, w + "SWAP_AB=1,WM=2,BN=256").find("the swap is for a small M"),
            std::string::npos);
  EXPECT_EQ(why(sq, w + "WM=2,BN=256"), "");
  EXPECT_NE(why(sq, "ATOM=wgmma_bf16,WM=2,WN=2,FM=1,FN=1,BN=20,STAGE=tma,SWIZZLE=128B,BK=64")
                .find("is not a wgmma N"),
            std::string::npos);
  EXPECT_NE(why(sq, "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=256,STAGE=cp_async,BK=64")
                .find("TMA can load these operands"),
            std::string::npos);
}

TEST(Prune, WgmmaTakesTheThreadsCopiesWhereTmaCannot) {
  const std::string w = "WM=2,WN=1,FM=1,FN=1,BN=128,SWIZZLE=128B,STAGES=4,";
  // Ragged N: B's 8190-byte rows are no TMA stride; cp.async (and registers) fill them.
  Case r = problem(gemm(4096, 4095, 4096, "bf16"), "wgmma_bf16");
  EXPECT_EQ(why(r, "ATOM=wgmma_bf16," + w + "BK=64,STAGE=cp_async"), "");
  EXPECT_NE(why(r, "ATOM=wgmma_bf16," + w + "BK=64,STAGE=tma").find("16 bytes"), std::string::npos);
  EXPECT_NE(why(r, "ATOM=wgmma_bf16," + w + "BK=64,STAGE=sync").find("cp.async"),
            std::string::npos);
  EXPECT_EQ(why(r, "ATOM=wgmma_bf16," + w + "BK=64,STAGE=cp_async,WARP_SPECIALIZE=1"), "");
  EXPECT_NE(why(r, "ATOM=wgmma_bf16," + w + "BK=64,STAGE=cp_async,WARP_SPECIALIZE=1,PERSISTENT=1")
                .find("one tile per CTA"),
            std::string::npos);
  // tf32 with B [K, N]: TMA cannot transpose it into the K-major slab wgmma reads.
  Case t = problem(gemm(4096, 4096, 4096, "tf32"), "wgmma_tf32");
  EXPECT_EQ(why(t, "ATOM=wgmma_tf32," + w + "BK=32,STAGE=cp_async"), "");
  EXPECT_NE(why(t, "ATOM=wgmma_tf32," + w + "BK=32,STAGE=tma").find("K-major"), std::string::npos);
}

// REALIGN=1 is a different kernel only where the threads copy odd 16-bit rows.
TEST(Prune, RealignOnlyWhereOddSixteenBitRowsAreCopied) {
  const std::string w = "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=128,SWIZZLE=128B,STAGES=4,BK=32,";
  Case odd_n = problem(gemm(4096, 4095, 4096, "bf16"), "wgmma_bf16");
  EXPECT_EQ(why(odd_n, w + "STAGE=cp_async,REALIGN=1"), "");
  EXPECT_EQ(why(odd_n, w + "STAGE=cp_async,REALIGN=0"), "");
  Case odd_k = problem(gemm(4096, 4096, 4095, "bf16"), "wgmma_bf16");
  EXPECT_EQ(why(odd_k, w + "STAGE=cp_async,REALIGN=1"), "");
  Case four = problem(gemm(4096, 4094, 4096, "bf16"), "wgmma_bf16");
  EXPECT_NE(why(four, w + "STAGE=cp_async,REALIGN=1").find("REALIGN=0's"), std::string::npos);
  Case aligned = problem(gemm(4096, 4096, 4096, "bf16"), "wgmma_bf16");
  EXPECT_NE(why(aligned, w + "STAGE=tma,REALIGN=1").find("REALIGN=0's"), std::string::npos);
  // mma.sync's copies too: an odd N keeps both values, aligned rows only REALIGN=0.
  const std::string m = "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=cp_async,STAGES=3,";
  Case small = problem(gemm(1000, 777, 333, "f16"), "mma_f16", 90);
  EXPECT_EQ(why(small, m + "REALIGN=1"), "");
  Case mma_aligned = problem(gemm(1024, 1024, 1024, "f16"), "mma_f16", 90);
  EXPECT_NE(why(mma_aligned, m + "REALIGN=1").find("REALIGN=0's"), std::string::npos);
  EXPECT_EQ(why(mma_aligned, m + "REALIGN=0"), "");
}

TEST(Prune, SharedMemoryOverTheOptInLimitNamesBytesAndLimit) {
  Case c = problem(gemm(4096, 4096, 4096, "f32"), "fma");
  std::string r = why(c, "BM=256,BN=256,FM=16,FN=8,BK=32,STAGE=cp_async,STAGES=4");
  // 4 stages x (256 + 256) rows x 32 x 4 B = 262144 B.
  EXPECT_NE(r.find("262144 B of shared memory"), std::string::npos) << r;
  EXPECT_NE(r.find("232448 B per block"), std::string::npos) << r;
  EXPECT_NE(r.find("H100"), std::string::npos) << r;
  EXPECT_EQ(why(c, "BM=128,BN=128,FM=8,FN=8,BK=16,STAGE=cp_async,STAGES=4"), "");
}

TEST(Prune, PipelineSharedMemoryCheckNamesTheKernel) {
  DeviceInfo small = h100();
  small.smem_per_block_optin = 49152;
  CompileOptions opt;
  opt.knobs = Knobs::parse("BM=128,BN=128,FM=8,FN=8,BK=32,STAGE=cp_async,STAGES=3");
  opt.target = Target::for_arch("sm_90a");  // the target's own 232448 B: the pipeline passes
  CompiledProgram prog = compile_graph(gemm(4096, 4096, 4096, "f32"), opt);
  KernelVerdict v = check_kernel_ir(prog.state, small);
  EXPECT_NE(v.reason.find("B of shared memory"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("49152 B per block"), std::string::npos) << v.reason;
  EXPECT_EQ(check_kernel_ir(prog.state, h100()).reason, "");
}

TEST(Prune, TilingRules) {
  Case c = problem(gemm(4096, 4096, 4096, "f32"), "fma");
  EXPECT_NE(
      why(c, "BM=64,BN=64,FM=16,FN=16,BK=16,STAGE=sync,STAGES=2").find("16 threads per block"),
      std::string::npos);
  EXPECT_NE(why(c, "BM=256,BN=256,FM=16,FN=16,BK=16,STAGE=sync,STAGES=2")
                .find("256 accumulator registers"),
            std::string::npos);
  EXPECT_NE(
      why(c, "BM=256,BN=256,FM=4,FN=4,BK=16,STAGE=sync,STAGES=2").find("4096 threads per block"),
      std::string::npos);
  Case small = problem(gemm(100, 100, 64, "f32"), "fma");
  EXPECT_NE(why(small, "BM=256,BN=64,FM=8,FN=4,BK=16,STAGE=sync,STAGES=2")
                .find("larger than the problem"),
            std::string::npos);
  Case mma = problem(gemm(4096, 4096, 4096, "bf16"), "mma_bf16");
  EXPECT_NE(
      why(mma, "ATOM=mma_bf16,WM=4,WN=4,FM=8,FN=8,BK=32,STAGE=cp_async,STAGES=2").find("over 256"),
      std::string::npos);
  EXPECT_NE(
      why(mma, "ATOM=mma_bf16,WM=1,WN=1,FM=4,FN=8,BK=32,STAGE=cp_async,STAGES=2").find("one warp"),
      std::string::npos);
  // MIN_BLOCKS=2 at 1024 threads leaves 32 registers a thread: 8x8 cells spill there (ptxas
  // measured 2.7 KiB), though the default 128x128 tile (256 threads, 128 registers) fits.
  EXPECT_NE(why(c, "BM=256,BN=256,FM=8,FN=8,BK=8,STAGE=sync,STAGES=2,MIN_BLOCKS=2")
                .find("MIN_BLOCKS=2 with 1024 threads caps registers at 32 per thread"),
            std::string::npos);
  EXPECT_EQ(why(c, "BM=128,BN=128,FM=8,FN=8,BK=16,STAGE=sync,STAGES=2,MIN_BLOCKS=2"), "");
}

TEST(Prune, StagingRules) {
  Case c = problem(gemm(4096, 4096, 4096, "bf16"), "mma_bf16");
  const std::string tile = "ATOM=mma_bf16,WM=2,WN=2,FM=4,FN=8,";
  EXPECT_NE(why(c, tile + "BK=24,STAGE=cp_async,STAGES=2").find("multiple of the atom's k=16"),
            std::string::npos);
  EXPECT_NE(
      why(c, tile + "BK=32,STAGE=cp_async,STAGES=2,SWIZZLE=xor,PAD_SMEM=8").find("do not compose"),
      std::string::npos);
  EXPECT_NE(why(c, tile + "BK=32,STAGE=sync,STAGES=3").find("register double buffering"),
            std::string::npos);
  Case f = problem(gemm(4096, 4096, 4096, "f32"), "fma");
  EXPECT_EQ(why(f, "BM=128,BN=128,FM=8,FN=8,BK=16,STAGE=tma,STAGES=2"), "");
  DeviceInfo a100 = h100();
  a100.cc_major = 8;
  EXPECT_NE(why(f, "BM=128,BN=128,FM=8,FN=8,BK=16,STAGE=tma,STAGES=2", a100).find("sm_90"),
            std::string::npos);
}

TEST(Prune, TmaBoxLimits) {
  Case f = problem(gemm(4096, 4096, 4096, "bf16"), "fma");
  // BK=4 bf16: an 8-byte inner box dimension.
  std::string r = why(f, "BM=128,BN=128,FM=8,FN=8,BK=4,STAGE=tma,STAGES=2");
  EXPECT_NE(r.find("multiple of 16 bytes"), std::string::npos) << r;
  Case odd = problem(gemm(4096, 4096, 1001, "f32"), "fma");
  r = why(odd, "BM=128,BN=128,FM=8,FN=8,BK=16,STAGE=tma,STAGES=2");
  EXPECT_NE(r.find("global rows"), std::string::npos) << r;
}

TEST(Prune, SplitKOnlyWhereTheGridLeavesSmsIdle) {
  Case big = problem(gemm(4096, 4096, 4096, "f32"), "fma");
  std::string r = why(big, "BM=128,BN=128,FM=8,FN=8,BK=16,STAGE=sync,STAGES=2,SPLITK=4");
  EXPECT_NE(r.find("already fills the 132 SMs"), std::string::npos) << r;
  Case tall = problem(gemm(128, 128, 16384, "f32"), "fma");
  EXPECT_EQ(
      why(tall, "BM=64,BN=64,FM=8,FN=4,BK=16,STAGE=sync,STAGES=2,SPLITK=64,SPLITK_MODE=atomic"),
      "");
  Case bf = problem(gemm(128, 128, 16384, "bf16"), "fma");
  r = why(bf, "BM=64,BN=64,FM=8,FN=4,BK=16,STAGE=sync,STAGES=2,SPLITK=64,SPLITK_MODE=atomic");
  EXPECT_NE(r.find("f32 output"), std::string::npos) << r;
}

TEST(Prune, BankConflictedReadsArePrunedOrPenalized) {
  // PAD_SMEM=1 makes the B slab's fragment loads scalar and 2-way conflicted
  // (docs/knobs.md, the PAD_SMEM table).
  CompileOptions opt;
  opt.knobs = Knobs::parse("BM=128,BN=128,FM=8,FN=8,BK=16,STAGE=sync,STAGES=2,PAD_SMEM=1");
  CompiledProgram prog = compile_graph(gemm(4096, 4096, 4096, "f32"), opt);
  KernelVerdict mild = check_kernel_ir(prog.state, h100());
  EXPECT_EQ(mild.reason, "");
  EXPECT_GT(mild.smem.reads, 1.0);
  KernelVerdict strict = check_kernel_ir(prog.state, h100(), 1.5);
  EXPECT_NE(strict.reason.find("bank conflicts: load of B_s"), std::string::npos) << strict.reason;
}

TEST(Prune, ResourceReportRules) {
  CompiledCandidate c;
  KernelResources k;
  k.name = "k_matmul";
  k.block_threads = 256;
  k.report.registers = 255;
  k.report.spill_store_bytes = 48;
  k.report.spill_load_bytes = 40;
  c.kernels = {k};
  std::string r = resource_violation(c, h100());
  EXPECT_NE(r.find("spills in k_matmul: 48 B stored, 40 B loaded (255 registers)"),
            std::string::npos)
      << r;
  c.kernels[0].report.spill_store_bytes = c.kernels[0].report.spill_load_bytes = 0;
  EXPECT_EQ(resource_violation(c, h100()), "");
  // ptxas serialized its wgmma (C7512: no spill, each product waiting for the one before).
  c.kernels[0].report.wgmma_serialized = "insufficient register resources";
  r = resource_violation(c, h100());
  EXPECT_NE(r.find("serialized the wgmma of k_matmul (insufficient register resources)"),
            std::string::npos)
      << r;
  c.kernels[0].report.wgmma_serialized.clear();
  c.kernels[0].block_threads = 1024;  // 255 x 1024 > 65536
  r = resource_violation(c, h100());
  EXPECT_NE(r.find("no block can be resident"), std::string::npos) << r;
}

// The Hopper knobs the passes refuse in combination (t:010, l:022, k:053, k:026), pruned
// before anything is built, each naming the fix.
// `base` with `over`'s knobs replacing its own (a knob list names each knob once).
std::string knobs_over(const std::string& base, const std::string& over) {
  Knobs k = Knobs::parse(base);
  k.merge(Knobs::parse(over));
  return k.str();
}

constexpr const char* kWgmma128 =
    "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
    "WARP_SPECIALIZE=1,";

TEST(Prune, ClusterKNeedsItsOwnClusterOneTilePerCtaAndTheDirectEpilogue) {
  const Graph g = gemm(128, 128, 16384, "bf16");
  Case c = problem(g, "wgmma_bf16");
  // The passes' own refusals (l:022, t:010), asked through the pipeline: stage 1 in full.
  PassRefusals refusals(g, target_for_h100());
  auto full = [&](const std::string& knobs) {
    return stage1_violation(c.p, c.atom, Knobs::parse(knobs), h100(), refusals);
  };
  const std::string ck = std::string(kWgmma128) + "CLUSTER_K=8,SPLITK=8,SPLITK_MODE=reduce,";
  EXPECT_EQ(full(ck + "PERSISTENT=0,CLUSTER_M=1,EPILOGUE=direct"), "");
  auto has = [&](const std::string& knobs, const std::string& part) {
    const std::string r = full(knobs);
    EXPECT_NE(r.find(part), std::string::npos) << knobs << ": " << r;
  };
  has(ck + "PERSISTENT=1,CLUSTER_M=1,EPILOGUE=direct", "use PERSISTENT=0");
  has(ck + "PERSISTENT=0,CLUSTER_M=2,EPILOGUE=direct", "either the output tiles (M and N");
  has(ck + "PERSISTENT=0,CLUSTER_N=2,EPILOGUE=direct", "either the output tiles (M and N");
  has(ck + "PERSISTENT=0,EPILOGUE=smem", "use EPILOGUE=direct");
  // The rules alone no longer hold a copy of these limits: they pass, and the pass
  // decides.
  EXPECT_EQ(why(c, ck + "PERSISTENT=1,CLUSTER_M=2,EPILOGUE=direct"), "");
  // The partial tile takes shared memory beside the ring: 4 stages of 128x128x64 (128 KiB)
  // and 128 x 136 x 4 B fit, 5 stages do not.
  has(knobs_over(ck, "PERSISTENT=0,CLUSTER_M=1,EPILOGUE=direct,STAGES=5"), "CLUSTER_K's f32 partial tile");
  // 16 clusters of 8 CTAs: an H100 holds 15 at once (they ran in two waves).
  has(std::string(kWgmma128) + "CLUSTER_K=8,SPLITK=16,PERSISTENT=0", "about 15 fit");
  EXPECT_EQ(full(std::string(kWgmma128) + "CLUSTER_K=2,SPLITK=64,PERSISTENT=0"), "");
  has(std::string(kWgmma128) + "CLUSTER_K=8,SPLITK=8,SPLITK_MODE=fixup,PERSISTENT=0",
      "SPLITK_MODE=fixup");
  // Each CTA of the split keeps two BK slabs: 16384 / (64 x 8) = 32 < 128.
  has(std::string(kWgmma128) + "CLUSTER_K=8,SPLITK=64,PERSISTENT=0", "of K per CTA");
  // A grid that fills the SMs needs no split.
  Case big = problem(gemm(4096, 4096, 4096, "bf16"), "wgmma_bf16");
  EXPECT_NE(why(big, std::string(kWgmma128) + "CLUSTER_K=2,PERSISTENT=0").find("already fills"),
            std::string::npos);
}

// 2-D clusters: t:010 takes CLUSTER_M x CLUSTER_N up to the portable 8 CTAs, with warp
// specialization; the tuner's stage 1 says what t:010 says, in its words.
TEST(Prune, ClusterShapesAreThePassesVerdict) {
  const Graph g = gemm(128, 128, 16384, "bf16");
  Case c = problem(g, "wgmma_bf16");
  PassRefusals refusals(g, target_for_h100());
  const std::string t =
      "ATOM=wgmma_bf16,WM=1,WN=1,FM=1,FN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=8,"
      "EPILOGUE=direct,SPLITK=11,SPLITK_MODE=reduce,";
  auto full = [&](const std::string& knobs) {
    return stage1_violation(c.p, c.atom, Knobs::parse(knobs), h100(), refusals);
  };
  EXPECT_EQ(full(t + "WARP_SPECIALIZE=1,CLUSTER_M=2,CLUSTER_N=4"), "");
  EXPECT_NE(full(t + "WARP_SPECIALIZE=1,CLUSTER_M=2,CLUSTER_N=8").find("portable limit is 8"),
            std::string::npos)
      << full(t + "WARP_SPECIALIZE=1,CLUSTER_M=2,CLUSTER_N=8");
  EXPECT_NE(full(t + "WARP_SPECIALIZE=0,CLUSTER_M=1,CLUSTER_N=2").find("needs WARP_SPECIALIZE=1"),
            std::string::npos);
  // Asked once per knob set; a set without a cluster is not asked at all.
  const size_t asked = refusals.probes();
  full(t + "WARP_SPECIALIZE=1,CLUSTER_M=2,CLUSTER_N=4");
  EXPECT_EQ(full(t + "WARP_SPECIALIZE=1"), "");
  EXPECT_EQ(refusals.probes(), asked);
}

TEST(Prune, TmaStoreEpilogueTakesAPlainOutputTile) {
  Case sq = problem(gemm(4096, 4096, 4096, "bf16"), "wgmma_bf16");
  const std::string big = std::string(kWgmma128) + "PERSISTENT=1,EPILOGUE=tma_store,";
  EXPECT_EQ(why(sq, big + "EPI_BUFFERS=2"), "");
  EXPECT_EQ(why(sq, big + "EPI_BUFFERS=0"), "");
  // EPI_BUFFERS = 2 x a tile's strips in the persistent loop: a ring of two tiles' strips
  // (k:053), 4 x 16 KB beside the ring: 4 stages fit, 6 (192 KB) do not.
  EXPECT_EQ(why(sq, big + "EPI_BUFFERS=4"), "");
  const std::string six = why(sq, knobs_over(big, "STAGES=6,EPI_BUFFERS=4"));
  EXPECT_NE(six.find("262144 B of shared memory"), std::string::npos) << six;
  // Without the tile loop the buffers stop at the tile's 2 strips (32 KB).
  EXPECT_EQ(why(sq, knobs_over(big, "PERSISTENT=0,STAGES=6,EPI_BUFFERS=4")), "");
  EXPECT_NE(why(sq, "ATOM=wgmma_bf16,WM=1,WN=2,FM=1,FN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,"
                    "EPILOGUE=tma_store,EPI_BUFFERS=2")
                .find("WN=1 or EPI_BUFFERS=0"),
            std::string::npos);
  EXPECT_NE(why(sq, big + "EPI_BUFFERS=2,CONSUMERS=pingpong").find("CONSUMERS=pingpong"),
            std::string::npos);
  Case split = problem(gemm(128, 128, 16384, "bf16"), "wgmma_bf16");
  EXPECT_NE(why(split, knobs_over(big, "SPLITK=8,PERSISTENT=0")).find("partial sums"), std::string::npos);
  Case d = problem(gemm(16, 4096, 4096, "bf16"), "wgmma_bf16");
  EXPECT_NE(why(d, "ATOM=wgmma_bf16,SWAP_AB=1,WM=1,WN=1,FM=1,FN=1,BN=16,STAGE=tma,"
                   "SWIZZLE=128B,BK=128,STAGES=8,EPILOGUE=tma_store,EPI_BUFFERS=2")
                .find("use EPI_BUFFERS=0"),
            std::string::npos);
  EXPECT_EQ(why(d, "ATOM=wgmma_bf16,SWAP_AB=1,WM=1,WN=1,FM=1,FN=1,BN=16,STAGE=tma,"
                   "SWIZZLE=128B,BK=128,STAGES=8,EPILOGUE=tma_store,EPI_BUFFERS=0"),
            "");
  // A bmm's [B, M, N] goes through a rank-3 map (k:053); a rank-4 output does not.
  Case bmm = problem(parse_expression("bmm(A[8,512,512]:bf16, B[8,512,512]:bf16)"), "wgmma_bf16");
  EXPECT_EQ(why(bmm, big + "EPI_BUFFERS=2"), "");
  Case rank4 = problem(parse_expression("matmul(A[2,4,512,512]:bf16, B[2,4,512,512]:bf16)"),
                       "wgmma_bf16");
  EXPECT_NE(why(rank4, big + "EPI_BUFFERS=2").find("has rank 4"), std::string::npos);
}

TEST(Prune, RegisterAOrientsTf32) {
  const std::string regs = std::string(kWgmma128) + "WGMMA_A=regs";
  EXPECT_EQ(why(problem(gemm(4096, 4096, 4096, "bf16"), "wgmma_bf16"), regs), "");
  // An M-major A in registers (ldmatrix .trans for 16-bit types, ld.shared for tf32).
  Case at = problem(parse_expression("matmul(A[4096,4096]:bf16.T, B[4096,4096]:bf16)"),
                    "wgmma_bf16");
  EXPECT_EQ(why(at, regs), "");
  // Swapped, A is B^T: M-major for a row-major B, K-major for B given transposed.
  const std::string swapped =
      "ATOM=wgmma_bf16,SWAP_AB=1,WM=1,WN=1,FM=1,FN=1,BN=16,STAGE=tma,SWIZZLE=128B,BK=64,"
      "WGMMA_A=regs";
  EXPECT_EQ(why(problem(gemm(16, 4096, 4096, "bf16"), "wgmma_bf16"), swapped), "");
  Case bt = problem(parse_expression("matmul(A[16,4096]:bf16, B[4096,4096]:bf16.T)"),
                    "wgmma_bf16");
  EXPECT_EQ(why(bt, swapped), "");
  // tf32: TMA loads every operand that has a K-major side for wgmma's B. B [K, N] runs
  // swapped (whatever M and N are) with B^T in registers; A.T unswapped in registers.
  const std::string tf32 =
      "ATOM=wgmma_tf32,WM=2,WN=1,FM=1,FN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=4,";
  Case bn = problem(gemm(4096, 4096, 4096, "tf32"), "wgmma_tf32");
  EXPECT_EQ(why(bn, tf32 + "SWAP_AB=1,WGMMA_A=regs"), "");
  EXPECT_NE(why(bn, tf32 + "SWAP_AB=1,WGMMA_A=smem").find("use WGMMA_A=regs"),
            std::string::npos)
      << why(bn, tf32 + "SWAP_AB=1,WGMMA_A=smem");
  EXPECT_NE(why(bn, tf32 + "WGMMA_A=regs").find("K-major only"), std::string::npos);
  // TMA can load them, so the threads' copies are pruned in the swapped orientation.
  EXPECT_NE(why(bn, "ATOM=wgmma_tf32,WM=2,WN=1,FM=1,FN=1,BN=128,SWIZZLE=128B,BK=32,STAGES=4,"
                    "STAGE=cp_async,SWAP_AB=1,WGMMA_A=regs")
                .find("TMA can load these operands"),
            std::string::npos);
  Case am = problem(parse_expression("matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32.T)"),
                    "wgmma_tf32");
  EXPECT_EQ(why(am, tf32 + "WGMMA_A=regs"), "");
  EXPECT_NE(why(am, tf32 + "WGMMA_A=smem").find("use WGMMA_A=regs"), std::string::npos);
  // WGMMA_A unset (the search's staging stage leaves it open): the full knob set still
  // refuses the shared M-major A, naming the fix.
  EXPECT_NE(why(am, tf32.substr(0, tf32.size() - 1)).find("use WGMMA_A=regs"), std::string::npos)
      << why(am, tf32.substr(0, tf32.size() - 1));
  EXPECT_NE(why(bn, tf32 + "SWAP_AB=1").find("use WGMMA_A=regs"), std::string::npos);
  // Neither K-major: no orientation; only the threads' transposing copies.
  Case both = problem(parse_expression("matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32)"),
                      "wgmma_tf32");
  EXPECT_NE(why(both, tf32 + "SWAP_AB=1,WGMMA_A=regs").find("tf32 with a K-major A"),
            std::string::npos);
  EXPECT_NE(why(both, tf32 + "WGMMA_A=regs").find("STAGE=cp_async"), std::string::npos);
  // A square 16-bit GEMM still is not swapped.
  EXPECT_NE(why(problem(gemm(4096, 4096, 4096, "bf16"), "wgmma_bf16"),
                std::string(kWgmma128) + "SWAP_AB=1")
                .find("the swap is for a small M"),
            std::string::npos);
}

// tf32 operands that are not K-major, unswapped on TMA slabs: k:015's transposing stage
// (SLAB_A / SLAB_B = kinner, which the space sets on such candidates) makes them legal,
// and each staged operand counts twice per ring slot in the shared-memory estimate.
TEST(Prune, Tf32TransposingStageIsAPointWithItsSharedMemory) {
  const std::string tf32 = "ATOM=wgmma_tf32,WM=2,WN=1,FM=1,FN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=32,"
                           "SWAP_AB=0,WGMMA_A=smem,EPILOGUE=direct,";
  Case bn = problem(gemm(4096, 4096, 4096, "tf32"), "wgmma_tf32");
  EXPECT_EQ(why(bn, tf32 + "STAGES=2,SLAB_B=kinner"), "");
  EXPECT_NE(why(bn, tf32 + "STAGES=2").find("SLAB_B=kinner"), std::string::npos);
  // 3 slots x (16 + 32 + 32) KB = 245760 B: over the opt-in limit (2 x 80 KB fit).
  const std::string three = why(bn, tf32 + "STAGES=3,SLAB_B=kinner");
  EXPECT_NE(three.find("245760 B of shared memory"), std::string::npos) << three;
  Case am = problem(parse_expression("matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32.T)"),
                    "wgmma_tf32");
  EXPECT_EQ(why(am, tf32 + "STAGES=3,SLAB_A=kinner"), "");
  EXPECT_NE(why(am, tf32 + "STAGES=3").find("SLAB_A=kinner"), std::string::npos);
  Case both = problem(parse_expression("matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32)"),
                      "wgmma_tf32");
  EXPECT_EQ(why(both, tf32 + "STAGES=2,SLAB_A=kinner,SLAB_B=kinner"), "");
  // The space's candidates carry the slab knobs; a swapped or cp_async one does not.
  Knobs k = Knobs::parse(tf32 + "STAGES=2");
  tf32_transposing_slabs(both.p, both.atom, k);
  EXPECT_EQ(k.get_str("SLAB_A", ""), "kinner");
  EXPECT_EQ(k.get_str("SLAB_B", ""), "kinner");
  Knobs swapped = Knobs::parse("ATOM=wgmma_tf32,STAGE=tma,SWAP_AB=1");
  tf32_transposing_slabs(bn.p, bn.atom, swapped);
  EXPECT_FALSE(swapped.has("SLAB_B"));
}

}  // namespace
}  // namespace loom::tune
