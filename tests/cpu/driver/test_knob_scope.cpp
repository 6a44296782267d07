// Explicit knobs the generated kernel would not read are refused with the reason and the
// fix (driver/knob_scope.cpp): GEMM knobs on attention and the reverse, mma.sync fragment
// knobs under wgmma or fma, TMA-store epilogue knobs under another epilogue. Each case
// here was silently ignored before (the generated CUDA was byte-identical with and
// without the knob). Values that switch a feature off pass; defaults never trip it.
#include <gtest/gtest.h>

#include "driver/compile.h"
#include "ir/error.h"

namespace loom {
namespace {

const char* kGemm = "matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)";
const char* kSplitK = "matmul(A[128,16384]:bf16, B[16384,128]:bf16)";
const char* kF32 = "matmul(A[1024,1024]:f32, B[1024,1024]:f32)";
const char* kAttention = "attention(Q[2,4,256,64]:bf16, K[2,4,256,64]:bf16, V[2,4,256,64]:bf16)";

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
            "EPI_BUFFERS=1 shapes the TMA-store epilogue (EPILOGUE=tma_store, k:053), but the "
            "epilogue is direct, chosen by the explicit EPILOGUE=direct; use EPILOGUE=tma_store, "
            "or drop EPI_BUFFERS=1");
  // The split-K default's epilogue is direct.
  EXPECT_EQ(error_of(kSplitK, options("STMATRIX=0,EPI_SYNC=2")),
            "STMATRIX=0,EPI_SYNC=2 shape the TMA-store epilogue (EPILOGUE=tma_store, k:053), but "
            "the epilogue is direct, chosen by the defaults of this shape; add EPILOGUE=tma_store, "
            "or drop STMATRIX=0,EPI_SYNC=2");
  EXPECT_NE(error_of(kGemm, options("EPILOGUE=smem,STMATRIX=0")).find("but the epilogue is smem"),
            std::string::npos);
  // Under the TMA-store epilogue (the large default) they apply.
  EXPECT_EQ(error_of(kGemm, options("EPI_BUFFERS=2,STMATRIX=0,EPI_SYNC=2")), "");
}

}  // namespace
}  // namespace loom
