// Explicit knobs over the defaults, group by group (passes/defaults.h, GroupMerge): a
// knob that is not its group's leader replaces only itself where the rest of the group
// still builds, falls back to dropping the group's defaults where it does not, and the
// error names both attempts where neither builds.
#include <gtest/gtest.h>

#include "driver/compile.h"
#include "ir/error.h"
#include "passes/defaults.h"

namespace loom {
namespace {

const char* kBf16 = "matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)";
const char* kF32 = "matmul(A[4096,4096]:f32, B[4096,4096]:f32)";

CompiledProgram build(const std::string& expr, const std::string& knobs,
                      const std::string& arch = "sm_90a") {
  CompileOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.target = Target::for_arch(arch);
  return compile_expression(expr, opt);
}

std::string used(const CompiledProgram& c, const std::string& knob) {
  auto it = c.state.used_knobs.find(knob);
  return it == c.state.used_knobs.end() ? "<unused>" : it->second;
}

TEST(KnobGroups, StagesAloneKeepsTheWgmmaStaging) {
  // The brief's case: STAGES=3 on the sm_90a default dropped STAGE=tma with the group,
  // and wgmma refused the kernel.
  CompiledProgram c = build(kBf16, "STAGES=3");
  EXPECT_EQ(used(c, "ATOM"), "wgmma_bf16");
  EXPECT_EQ(used(c, "STAGES"), "3");
  EXPECT_EQ(used(c, "STAGE"), "tma");
  EXPECT_EQ(used(c, "SWIZZLE"), "128B");
  EXPECT_EQ(used(c, "BK"), "64");
  EXPECT_EQ(used(c, "BN"), "256");  // the tiling group untouched
  EXPECT_FALSE(c.cuda.empty());
  EXPECT_EQ(c.knob_source.find("dropped"), std::string::npos) << c.knob_source;
}

TEST(KnobGroups, ATilingKnobThatIsNoLeaderKeepsTheTile) {
  CompiledProgram c = build(kBf16, "EPILOGUE=direct");
  EXPECT_EQ(used(c, "EPILOGUE"), "direct");
  EXPECT_EQ(used(c, "WARP_SPECIALIZE"), "1");
  EXPECT_EQ(used(c, "PERSISTENT"), "1");
  EXPECT_EQ(used(c, "BN"), "256");
}

TEST(KnobGroups, LeadersStillDropTheirGroup) {
  // Pure resolution: an explicit tile starts from none of the default tiling (MIN_BLOCKS
  // capped registers for the default tile), and STAGE from none of the staging.
  Knobs large = Knobs::parse(
      "BM=128,BN=128,FM=8,FN=8,MIN_BLOCKS=2,GROUP_M=8,BK=16,STAGE=sync,STAGES=2,PAD_SMEM=4");
  Knobs t = resolve_knobs(large, Knobs::parse("BM=64"), Knobs(), GroupMerge::keep);
  EXPECT_FALSE(t.has("MIN_BLOCKS"));
  EXPECT_FALSE(t.has("FM"));
  EXPECT_EQ(t.get_int("STAGES", 0), 2);
  Knobs s = resolve_knobs(large, Knobs::parse("STAGE=cp_async"), Knobs(), GroupMerge::keep);
  EXPECT_FALSE(s.has("PAD_SMEM"));
  EXPECT_FALSE(s.has("BK"));
  Knobs k = resolve_knobs(large, Knobs::parse("STAGES=1"), Knobs(), GroupMerge::keep);
  EXPECT_EQ(k.get_str("STAGE", ""), "sync");
  EXPECT_EQ(k.get_int("PAD_SMEM", 0), 4);
  EXPECT_EQ(k.get_int("STAGES", 0), 1);
  // drop, the default, is the old rule: any knob of a group drops it.
  EXPECT_FALSE(resolve_knobs(large, Knobs::parse("STAGES=1")).has("STAGE"));
  // Both split counts lead the split-K group; the combine mode does not.
  Knobs split = Knobs::parse("SPLITK=8,SPLITK_MODE=reduce,CLUSTER_K=8");
  EXPECT_FALSE(
      resolve_knobs(split, Knobs::parse("CLUSTER_K=2"), Knobs(), GroupMerge::keep).has("SPLITK"));
  EXPECT_FALSE(
      resolve_knobs(split, Knobs::parse("SPLITK=4"), Knobs(), GroupMerge::keep).has("CLUSTER_K"));
  EXPECT_EQ(resolve_knobs(split, Knobs::parse("SPLITK_MODE=atomic"), Knobs(), GroupMerge::keep)
                .get_int("CLUSTER_K", 0),
            8);
}

TEST(KnobGroups, FallsBackToDroppingTheGroupWhenKeepingDoesNotBuild) {
  // The split-K default splits K 11 ways; SPLITK_MODE=atomic adds the partial sums into
  // the bf16 output, which atomics cannot, so the group's defaults go and the kernel runs
  // unsplit, as before this rule.
  const char* split = "matmul(A[128,16384]:bf16, B[16384,128]:bf16)";
  CompiledProgram c = build(split, "SPLITK_MODE=atomic");
  EXPECT_EQ(used(c, "SPLITK_MODE"), "atomic") << c.summary;
  EXPECT_EQ(used(c, "SPLITK"), "1") << c.summary;
  EXPECT_EQ(used(c, "CLUSTER_K"), "1") << c.summary;
  EXPECT_NE(c.knob_source.find("were dropped"), std::string::npos) << c.knob_source;
  EXPECT_NE(c.knob_source.find("group defaults SPLITK="), std::string::npos) << c.knob_source;
}

TEST(KnobGroups, NeitherBuildingNamesBothReasons) {
  // BK=128 with the default 4 stages of 128x256 slabs needs 384 KiB of shared memory;
  // without the staging defaults wgmma has no TMA slabs.
  try {
    build(kBf16, "BK=128");
    FAIL() << "BK=128 at 4 stages of 128x256 cannot fit";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("defaults (STAGE=tma"), std::string::npos) << m;
    EXPECT_NE(m.find("kept: "), std::string::npos) << m;
    EXPECT_NE(m.find("with those defaults dropped: "), std::string::npos) << m;
  }
  // Fitting knobs compile: BK=128 at 2 stages is 192 KiB + 32 KiB of strips.
  CompiledProgram ok = build(kBf16, "BK=128,STAGES=2");
  EXPECT_EQ(used(ok, "STAGE"), "tma");
}

TEST(KnobGroups, SimtStagingKnobsKeepTheRestOfTheGroup) {
  CompiledProgram c = build(kF32, "BK=32", "sm_80");
  EXPECT_EQ(used(c, "BK"), "32");
  EXPECT_EQ(used(c, "STAGE"), "sync");
  EXPECT_EQ(used(c, "PAD_SMEM"), "4");
}

// The UX trap found 2026-11-23: explicit tiling knobs without ATOM run the SIMT schedule
// (FM and FN count thread cells there), not the default wgmma atom. Kept (a knob set
// written for fma must mean what it meant) but said: a note naming the knobs and the fix,
// and a knob source that no longer claims the wgmma schedule.
TEST(KnobGroups, ExplicitTilingWithoutAtomSaysItLeavesTheDefaultAtom) {
  CompiledProgram c = build(kBf16, "BN=128,FM=2");
  EXPECT_EQ(used(c, "ATOM"), "fma");
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("tiling knobs BN,FM without ATOM select the SIMT schedule (ATOM=fma"),
            std::string::npos)
      << c.notes[0];
  EXPECT_NE(c.notes[0].find("instead of the default ATOM=wgmma_bf16: add ATOM=wgmma_bf16"),
            std::string::npos)
      << c.notes[0];
  EXPECT_EQ(c.knob_source.find("wgmma schedule"), std::string::npos) << c.knob_source;
  EXPECT_NE(c.knob_source.find("ATOM=fma for the explicit tiling knobs, not wgmma_bf16"),
            std::string::npos)
      << c.knob_source;
  // The fix the note names keeps the atom, and says nothing.
  CompiledProgram fixed = build(kBf16, "ATOM=wgmma_bf16,BN=128");
  EXPECT_EQ(used(fixed, "ATOM"), "wgmma_bf16");
  EXPECT_EQ(used(fixed, "BN"), "128");
  EXPECT_TRUE(fixed.notes.empty());
  EXPECT_NE(fixed.knob_source.find("wgmma schedule"), std::string::npos) << fixed.knob_source;
  // The mma.sync default on sm_80 the same way, one knob.
  CompiledProgram sm80 = build(kBf16, "MIN_BLOCKS=1", "sm_80");
  ASSERT_EQ(sm80.notes.size(), 1u);
  EXPECT_NE(sm80.notes[0].find("tiling knob MIN_BLOCKS without ATOM"), std::string::npos)
      << sm80.notes[0];
  EXPECT_NE(sm80.notes[0].find("add ATOM=mma_bf16"), std::string::npos) << sm80.notes[0];
  // No note where nothing changed: non-tiling knobs, an fma default, an explicit fma.
  EXPECT_TRUE(build(kBf16, "STAGES=3").notes.empty());
  EXPECT_TRUE(build(kF32, "BN=64", "sm_80").notes.empty());
  EXPECT_TRUE(build(kBf16, "ATOM=fma,BN=128,FM=2").notes.empty());
}

// -v's knob source says how a tf32 wgmma kernel reads an operand that is not K-major (the
// descriptors read tf32 K-major only): which form runs and the knobs that choose it.
TEST(KnobGroups, Tf32KnobSourceSaysHowANonKMajorOperandIsRead) {
  const auto source = [](const std::string& expr, const std::string& knobs = "") {
    return build(expr, knobs).knob_source;
  };
  // The defaults: B [K, N] swapped with B^T in registers, A.T in registers, neither
  // K-major transposed in shared memory.
  const std::string kn = "matmul(A[4096,4096]:tf32, B[4096,4096]:tf32)";
  EXPECT_NE(source(kn).find("SWAP_AB=1,WGMMA_A=regs"), std::string::npos) << source(kn);
  const std::string at = "matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32.T)";
  EXPECT_NE(source(at).find("A given transposed: read into registers"), std::string::npos)
      << source(at);
  const std::string both = "matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32)";
  EXPECT_NE(source(both).find("transpose it in shared memory for the shared-A wgmma "
                              "(SLAB_A=kinner,SLAB_B=kinner)"),
            std::string::npos)
      << source(both);
  // The other forms, as knob sets: B [K, N] transposed, the threads' copies.
  const std::string t = source(kn, "ATOM=wgmma_tf32,BM=128,BN=256,WM=2,WN=1,FM=1,FN=1,BK=32,"
                                   "SWIZZLE=128B,SWAP_AB=0,WGMMA_A=smem,STAGE=tma,SLAB_B=kinner,"
                                   "STAGES=2,EPILOGUE=tma_store,EPI_BUFFERS=2");
  EXPECT_NE(t.find("(SLAB_B=kinner)"), std::string::npos) << t;
  const std::string copies = source(both, "STAGE=cp_async,SWIZZLE=128B,BK=32,STAGES=4");
  EXPECT_NE(copies.find("(STAGE=cp_async)"), std::string::npos) << copies;
  // K-major operands, and 16-bit ones, need none of it.
  EXPECT_EQ(source("matmul(A[4096,4096]:tf32, B[4096,4096]:tf32.T)").find("tf32"),
            std::string::npos);
  EXPECT_EQ(source(kBf16).find("K-major"), std::string::npos);
}

// The defaults' transposing slab layouts (SLAB_A / SLAB_B = kinner, neither operand
// K-major) yield to explicit knobs that pick another form: the register forms, another
// transport; knobs that keep the form (STAGES, BK) keep them.
TEST(KnobGroups, Tf32TransposingSlabsYieldToAnotherForm) {
  const std::string both = "matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32)";
  CompiledProgram deeper = build(both, "STAGES=3");
  EXPECT_EQ(used(deeper, "SLAB_A"), "kinner");
  EXPECT_EQ(used(deeper, "SLAB_B"), "kinner");
  EXPECT_EQ(used(deeper, "STAGES"), "3");
  CompiledProgram copies = build(both, "STAGE=cp_async,SWIZZLE=128B,BK=32,STAGES=4");
  EXPECT_EQ(used(copies, "SLAB_A"), "<unused>");
  EXPECT_EQ(used(copies, "SLAB_B"), "<unused>");
  // A.T's register form with a transposed B: SLAB_B given again, SLAB_A left behind.
  CompiledProgram regs = build(both, "WGMMA_A=regs,SLAB_B=kinner");
  EXPECT_EQ(used(regs, "SLAB_A"), "<unused>");
  EXPECT_EQ(used(regs, "SLAB_B"), "kinner");
  EXPECT_EQ(used(regs, "WGMMA_A"), "regs");
}

}  // namespace
}  // namespace loom
