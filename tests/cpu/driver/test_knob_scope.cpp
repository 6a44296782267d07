// Explicit knobs the generated kernel would not read are refused with the reason and the
// fix (driver/knob_scope.cpp). First the wgmma-only knobs (the sm_90a organization: warp
// specialization, register split, ping-pong consumers, clusters, wgmma's operand and
// zeroing choices, the TMA-store epilogue) under an atom that is not wgmma: an error naming
// the knobs, the atom, what chose it and the fix, where some of them used to do nothing at
// all; then GEMM knobs on attention and the reverse, mma.sync fragment knobs under wgmma or
// fma, TMA-store epilogue knobs under another epilogue. Values that switch a feature off
// pass; defaults and tuning records never trip it.
#include <gtest/gtest.h>

#include "driver/compile.h"
#include "ir/error.h"

namespace loom {
namespace {

const char* kBf16 = "matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)";

CompileOptions options(const std::string& knobs, const std::string& arch = "sm_90a") {
  CompileOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.target = Target::for_arch(arch);
  return opt;
}

std::string error_of(const std::string& expr, const CompileOptions& opt) {
  try {
    compile_expression(expr, opt);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string used(const CompiledProgram& c, const std::string& knob) {
  auto it = c.state.used_knobs.find(knob);
  return it == c.state.used_knobs.end() ? "<unused>" : it->second;
}

TEST(WgmmaOnlyKnobs, TilingKnobsThatReselectFmaAreNamedWithTheFix) {
  // The brief's case: BN and FM without ATOM leave the default wgmma atom for the SIMT
  // schedule, where CONSUMERS=pingpong did nothing.
  const std::string err = error_of(kBf16, options("CONSUMERS=pingpong,BN=128,FM=2"));
  EXPECT_EQ(err,
            "CONSUMERS=pingpong needs a wgmma atom (ATOM=wgmma_*), but the atom is fma, chosen by "
            "the explicit tiling knobs BN,FM, which without ATOM select the SIMT schedule instead "
            "of the default ATOM=wgmma_bf16; add ATOM=wgmma_bf16 (FM and FN then count wgmma "
            "atoms per warpgroup), or drop CONSUMERS=pingpong");
  // One tiling knob, several refused knobs.
  EXPECT_NE(error_of(kBf16, options("FM=2,WARP_SPECIALIZE=1,CLUSTER_M=2"))
                .find("WARP_SPECIALIZE=1,CLUSTER_M=2 need a wgmma atom (ATOM=wgmma_*), but the atom "
                      "is fma, chosen by the explicit tiling knob FM, which without ATOM selects"),
            std::string::npos);
}

TEST(WgmmaOnlyKnobs, EveryWgmmaOnlyKnobIsRefusedUnderFma) {
  for (const char* knob : {"WARP_SPECIALIZE=1", "PRODUCER_REGS=40", "CONSUMER_REGS=232",
                           "CONSUMERS=cooperative", "CONSUMERS=pingpong", "CLUSTER_M=2",
                           "CLUSTER_N=2", "CLUSTER_K=2", "WGMMA_A=regs", "WGMMA_ZERO=explicit",
                           "EPILOGUE=tma_store", "EPI_BUFFERS=2", "STMATRIX=0", "EPI_SYNC=2"}) {
    const std::string err = error_of(kBf16, options(std::string("BN=128,FM=2,") + knob));
    EXPECT_EQ(err.rfind(std::string(knob) + " needs a wgmma atom", 0), 0u) << knob << ": " << err;
    EXPECT_NE(err.find("add ATOM=wgmma_bf16"), std::string::npos) << err;
  }
}

TEST(WgmmaOnlyKnobs, ValuesThatTurnTheFeatureOffAreHonoured) {
  // What a copied summary of an fma kernel holds: the features off. It compiles, with
  // the note about the tiling knobs.
  CompiledProgram c;
  ASSERT_NO_THROW(c = compile_expression(
                      kBf16, options("BN=128,FM=2,WARP_SPECIALIZE=0,CONSUMER_REGS=0,CLUSTER_M=1,"
                                     "CLUSTER_N=1,CLUSTER_K=1,EPILOGUE=smem")));
  EXPECT_EQ(used(c, "ATOM"), "fma");
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("select the SIMT schedule"), std::string::npos) << c.notes[0];
}

TEST(WgmmaOnlyKnobs, FollowingTheFixCompilesOnWgmma) {
  CompiledProgram c;
  ASSERT_NO_THROW(c = compile_expression(kBf16, options("ATOM=wgmma_bf16,BN=128,FM=1,WGMMA_ZERO=explicit")));
  EXPECT_EQ(used(c, "ATOM"), "wgmma_bf16");
  EXPECT_EQ(used(c, "WGMMA_ZERO"), "explicit");
  EXPECT_TRUE(c.notes.empty());
}

TEST(WgmmaOnlyKnobs, AnExplicitAtomOrTheTargetsDefaultIsNamed) {
  EXPECT_EQ(error_of(kBf16, options("ATOM=mma_bf16,WARP_SPECIALIZE=1")),
            "WARP_SPECIALIZE=1 needs a wgmma atom (ATOM=wgmma_*), but the atom is mma_bf16, chosen "
            "by the explicit ATOM=mma_bf16; use ATOM=wgmma_bf16 instead, or drop WARP_SPECIALIZE=1");
  // sm_80 has no wgmma: the fix is to drop the knob.
  EXPECT_EQ(error_of(kBf16, options("CLUSTER_N=2", "sm_80")),
            "CLUSTER_N=2 needs a wgmma atom (ATOM=wgmma_*), but the atom is mma_bf16, chosen by the "
            "default schedule of this shape on sm_80; drop CLUSTER_N=2: wgmma needs sm_90a (the "
            "target is sm_80)");
  // f32 operands: the suggested atom is tf32's, and the message says what that changes.
  const std::string f32 = error_of("matmul(A[512,512]:f32, B[512,512]:f32)", options("WGMMA_A=regs"));
  EXPECT_NE(f32.find("chosen by the default schedule of this shape on sm_90a; add ATOM=wgmma_tf32"),
            std::string::npos)
      << f32;
  EXPECT_NE(f32.find("round the operands to tf32"), std::string::npos) << f32;
}

TEST(WgmmaOnlyKnobs, DefaultsAndTuningRecordsDoNotTripIt) {
  // sm_90a's bf16 default is warp-specialized, persistent and clustered; explicit tiling
  // knobs drop that organization with the tiling group and run fma, with only a note.
  CompiledProgram def;
  ASSERT_NO_THROW(def = compile_expression(kBf16, options("")));
  EXPECT_EQ(used(def, "WARP_SPECIALIZE"), "1");
  EXPECT_EQ(used(def, "CLUSTER_M"), "2");
  CompiledProgram c;
  ASSERT_NO_THROW(c = compile_expression(kBf16, options("BN=128,FM=2")));
  EXPECT_EQ(used(c, "ATOM"), "fma");
  EXPECT_EQ(c.notes.size(), 1u);
  // A tuning record holding the same organization (as its knobs, not explicit ones),
  // under explicit tiling knobs: the same. (STAGE=cp_async replaces the record's TMA
  // staging, which the SIMT tile's slabs would not fit.)
  CompileOptions opt = options("BN=128,FM=2,STAGE=cp_async");
  opt.tuned = Knobs::parse(
      "ATOM=wgmma_bf16,BM=128,BN=256,FM=1,FN=1,WM=2,WN=1,STAGE=tma,BK=64,STAGES=4,SWIZZLE=128B,"
      "WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2,CONSUMERS=cooperative,EPILOGUE=tma_store");
  opt.tuned_source = "tuned: test";
  testing::internal::CaptureStderr();
  ASSERT_NO_THROW(c = compile_expression(kBf16, opt));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "") << "the record is not refused";
  EXPECT_EQ(used(c, "ATOM"), "fma");
  EXPECT_EQ(c.knob_source.rfind("explicit over tuned: test", 0), 0u) << c.knob_source;
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("tuning record's ATOM=wgmma_bf16"), std::string::npos) << c.notes[0];
}

const char* kGemm = kBf16;
const char* kSplitK = "matmul(A[128,16384]:bf16, B[16384,128]:bf16)";
const char* kF32 = "matmul(A[1024,1024]:f32, B[1024,1024]:f32)";
const char* kAttention = "attention(Q[2,4,256,64]:bf16, K[2,4,256,64]:bf16, V[2,4,256,64]:bf16)";

// The other scopes (refuse_knobs_of_absent_ops, mma.sync's refusal in refuse_knobs_of_other_families,
// refuse_knobs_of_other_variants): each case here left the generated CUDA byte-identical
// before it was refused.
TEST(KnobScope, GemmKnobsOnAttentionAreRefused) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    EXPECT_EQ(error_of(kAttention, options("BM=64,STAGES=3", arch)),
              "BM=64,STAGES=3 are knobs of GEMM kernels, and this program is attention, whose "
              "kernel is shaped by BLOCK_M, BLOCK_N, WARPS, KV_STAGES, ATTN_MMA, ATTN_WG, "
              "ATTN_PRODUCER, ... (`loom knobs` lists them); drop BM=64,STAGES=3")
        << arch;
    for (const char* knob : {"BN=64", "FM=2", "ATOM=fma", "GROUP_M=4", "BK=32", "STAGE=sync",
                             "PIPELINE=0", "EPILOGUE=smem", "EPI_BUFFERS=1", "CONSUMERS=pingpong",
                             "CLUSTER_M=2", "PERSISTENT=1", "SPLITK=2", "SWAP_AB=1", "LDMATRIX=0"}) {
      const std::string err = error_of(kAttention, options(knob, arch));
      EXPECT_EQ(err.rfind(std::string(knob) + " is a knob of GEMM kernels", 0), 0u) << knob << ": " << err;
    }
  }
  // The knobs both families read, and values that switch a GEMM feature off, still pass.
  for (const char* knob : {"MIN_BLOCKS=2", "PERSISTENT=0", "CLUSTER_M=1", "SPLITK=1",
                           "WARP_SPECIALIZE=0", "UNROLL_K=4", "VECTORIZE=2"})
    EXPECT_EQ(error_of(kAttention, options(knob)), "") << knob;
  EXPECT_EQ(error_of(kAttention, options("FRAG_BUFFERS=2,SWIZZLE=none", "sm_80")), "");
}

TEST(KnobScope, AttentionKnobsOnAGemmAreRefused) {
  EXPECT_EQ(error_of(kGemm, options("BLOCK_M=64")),
            "BLOCK_M=64 is a knob of the attention kernel, and this program is a GEMM, whose "
            "kernels are shaped by BM, BN, BK, FM, FN, STAGES, ATOM, ... (`loom knobs` lists "
            "them); drop BLOCK_M=64");
  for (const char* knob : {"BLOCK_N=64", "WARPS=8", "KV_STAGES=3", "Q_IN_REGS=0", "SOFTMAX=exp2",
                           "ZERO_INIT=mma", "ATTN_MMA=mma_sync", "ATTN_WG=1", "ATTN_PRODUCER=1",
                           "ATTN_OVERLAP=1", "STAGE_OUTPUT=1"}) {
    const std::string err = error_of(kGemm, options(knob, "sm_80"));
    EXPECT_EQ(err.rfind(std::string(knob) + " is a knob of the attention kernel", 0), 0u) << knob << ": " << err;
  }
}

TEST(KnobScope, MmaFragmentKnobsOutsideMmaSyncAreRefused) {
  EXPECT_EQ(error_of(kGemm, options("LDMATRIX=1")),
            "LDMATRIX=1 shapes the fragments of an mma.sync atom (ATOM=mma_*), but the atom is "
            "wgmma_bf16, which reads its operands from shared memory by descriptor; drop LDMATRIX=1");
  EXPECT_EQ(error_of(kF32, options("FRAG_BUFFERS=2", "sm_80")),
            "FRAG_BUFFERS=2 shapes the fragments of an mma.sync atom (ATOM=mma_*), but the atom "
            "is fma, which multiplies scalars with no fragments; drop FRAG_BUFFERS=2, or add "
            "ATOM=mma_tf32");
  // The off values, and the knobs under mma.sync, pass.
  EXPECT_EQ(error_of(kF32, options("LDMATRIX=0,FRAG_BUFFERS=1", "sm_80")), "");
  EXPECT_EQ(error_of(kGemm, options("ATOM=mma_bf16,LDMATRIX=0,FRAG_BUFFERS=2", "sm_80")), "");
}

TEST(KnobScope, TmaStoreEpilogueKnobsUnderAnotherEpilogueAreRefused) {
  EXPECT_EQ(error_of(kGemm, options("EPILOGUE=direct,EPI_BUFFERS=1")),
            "EPI_BUFFERS=1 shapes the shared strips of the TMA-store or staged epilogue "
            "(EPILOGUE=tma_store or smem, k:053), but the epilogue is direct, chosen by the "
            "explicit EPILOGUE=direct; use EPILOGUE=tma_store, or drop EPI_BUFFERS=1");
  // The split-K default's epilogue is direct.
  EXPECT_EQ(error_of(kSplitK, options("STMATRIX=0,EPI_SYNC=2")),
            "STMATRIX=0,EPI_SYNC=2 shape the shared strips of the TMA-store or staged epilogue "
            "(EPILOGUE=tma_store or smem, k:053), but the epilogue is direct, chosen by the "
            "defaults of this shape; add EPILOGUE=tma_store, or drop STMATRIX=0,EPI_SYNC=2");
  // The staged epilogue of the warp-specialized default takes them (k:053's strips); on a
  // kernel k:054 stages, they are refused by that pass.
  EXPECT_EQ(error_of(kGemm, options("EPILOGUE=smem,STMATRIX=0")), "");
  EXPECT_NE(error_of(kGemm, options("EPILOGUE=smem,STMATRIX=0,WARP_SPECIALIZE=0"))
                .find("STMATRIX=0 shapes the shared strips of the TMA-store or staged epilogue "
                      "(k:053), which this kernel does not use under EPILOGUE=smem; k:053 stages "
                      "warp-specialized wgmma kernels"),
            std::string::npos)
      << error_of(kGemm, options("EPILOGUE=smem,STMATRIX=0,WARP_SPECIALIZE=0"));
  // Under the TMA-store epilogue (the large default) they apply.
  EXPECT_EQ(error_of(kGemm, options("EPI_BUFFERS=2,STMATRIX=0,EPI_SYNC=2")), "");
}

}  // namespace
}  // namespace loom
