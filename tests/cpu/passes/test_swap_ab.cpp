// SWAP_AB (l:015_swap_operands): small-M GEMMs computed as C^T = B^T A^T, so the weight's
// N becomes wgmma's M and the small M its N. After every pass the program runs on the
// interpreter and is compared with the naive Loop IR (pass_check.h): M = 16, a ragged
// M = 20 and 24, M = 64; bf16 and f16; every thread waiting on the ring and warp
// specialized; a bias indexed by the output column (the swapped GEMM's row); BM = 128
// (M-major A in two chunks) and BK = 128 (K-major B in two chunks). Plus the Loop IR the
// pass writes, the paths other than wgmma (and split-K after the swap), and its error.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {

const Stmt& only(const Block& b) {
  EXPECT_EQ(b.size(), 1u);
  return b.at(0);
}

// One 64-row warpgroup atom per CTA, N = the (padded) M: the decode schedule, small.
std::string swapped(const std::string& atom, int bn, const std::string& more = "") {
  return "SWAP_AB=1,ATOM=" + atom + ",WM=1,WN=1,BN=" + std::to_string(bn) +
         ",STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2" + more;
}

TEST(SwapAb, LoopIrRunsRowsOverNAndWritesTheTranspose) {
  CompileState s = passcheck::compile_sm90a("matmul(A[16,128]:bf16, B[128,512]:bf16)", "SWAP_AB=1",
                                            "l:015_swap_operands");
  const Stmt& m = only(s.loop.ops.at(0).body);
  const Stmt& n = only(m.body);
  EXPECT_EQ(m.var, "m");
  EXPECT_EQ(m.extent.const_value(), 512);  // the rows of the swapped GEMM: out's columns
  EXPECT_EQ(n.var, "n");
  EXPECT_EQ(n.extent.const_value(), 16);
  const std::string ir = print(s.loop);
  EXPECT_NE(ir.find("load A[n, k]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("load B[k, m]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("out[n, m] ="), std::string::npos) << ir;
  // SWAP_AB=0 leaves the program as lowered.
  CompileState plain = passcheck::compile_sm90a("matmul(A[16,128]:bf16, B[128,512]:bf16)",
                                                "SWAP_AB=0", "l:015_swap_operands");
  EXPECT_EQ(only(plain.loop.ops.at(0).body).extent.const_value(), 16);
}

TEST(SwapAb, Bf16M16EveryPassMatches) {
  CompileState s = passcheck::check_every_pass("matmul(A[M,K]:bf16, B[K,N]:bf16)",
                                               Knobs::parse(swapped("wgmma_bf16", 16)), 31,
                                               {{"M", 16}, {"N", 128}, {"K", 192}});
  // B's slab is wgmma's M-major A, A's slab its K-major B.
  EXPECT_EQ(s.kernel.tensor("B_s").shape.back().const_value(), 64);
  EXPECT_EQ(s.kernel.tensor("A_s").shape.end()[-2].const_value(), 16);
  ASSERT_EQ(s.kernel.kernels.size(), 1u);
  ASSERT_EQ(s.kernel.kernels[0].warp_atoms.size(), 1u);
  EXPECT_EQ(s.kernel.kernels[0].warp_atoms[0].n, 16);
}

TEST(SwapAb, F16RaggedM24AndNAndKEveryPassMatches) {
  // M = 24 over BN = 16: the second column tile is half outside (TMA zero fill, guarded
  // stores); N = 120 leaves the last 64-row tile ragged, K = 136 a partial slab.
  passcheck::check_every_pass("matmul(A[M,K]:f16, B[K,N]:f16)",
                              Knobs::parse(swapped("wgmma_f16", 16)), 32,
                              {{"M", 24}, {"N", 120}, {"K", 136}});
}

TEST(SwapAb, Bf16RaggedM20WarpSpecializedEveryPassMatches) {
  // wgmma N = 24 covers M = 20 in one tile.
  passcheck::check_every_pass("matmul(A[M,K]:bf16, B[K,N]:bf16)",
                              Knobs::parse(swapped("wgmma_bf16", 24, ",WARP_SPECIALIZE=1")), 33,
                              {{"M", 20}, {"N", 128}, {"K", 256}});
}

TEST(SwapAb, F16M64WarpSpecializedEveryPassMatches) {
  passcheck::check_every_pass("matmul(A[M,K]:f16, B[K,N]:f16)",
                              Knobs::parse(swapped("wgmma_f16", 64, ",WARP_SPECIALIZE=1")), 34,
                              {{"M", 64}, {"N", 64}, {"K", 192}});
}

TEST(SwapAb, BiasIndexedByTheOutputColumnEveryPassMatches) {
  // linear: W [N, K] is K-major wgmma A after the swap; the bias follows the output
  // column n, which is the swapped GEMM's row.
  CompileState s = passcheck::check_every_pass(
      "relu(linear(X[M,K]:bf16, W[N,K]:bf16, bias[N]:bf16))",
      Knobs::parse(swapped("wgmma_bf16", 16, ",WARP_SPECIALIZE=1")), 35,
      {{"M", 24}, {"N", 72}, {"K", 128}});
  const std::string ir = print(s.loop);
  EXPECT_NE(ir.find("load bias[m]"), std::string::npos) << ir;
  passcheck::check_every_pass("add(matmul(A[M,K]:f16, B[K,N]:f16), bias[N]:f16)",
                              Knobs::parse(swapped("wgmma_f16", 16)), 36,
                              {{"M", 16}, {"N", 64}, {"K", 64}});
}

TEST(SwapAb, SingleRowFusedEpilogueEveryPassMatches) {
  // M = 1 (a decode step): the gated epilogue (silu, times an [1, N] operand) and a
  // residual add fuse into the swapped GEMM's one kernel and match after every pass.
  for (const char* e : {"mul(silu(linear(X[1,128]:bf16, W[72,128]:bf16)), E0[1,72]:bf16)",
                        "add(linear(X[1,128]:bf16, W[72,128]:bf16, bias[72]:bf16), E0[1,72]:bf16)"}) {
    CompileState s = passcheck::check_every_pass(
        e, Knobs::parse(swapped("wgmma_bf16", 8, ",WARP_SPECIALIZE=1")), 37);
    ASSERT_EQ(s.kernel.kernels.size(), 1u) << e;
  }
}

TEST(SwapAb, ChunkedSlabsBm128AndBk128EveryPassMatches) {
  // BM = 128: B's slab rows are two 64-column chunks (M-major A, one chunk per
  // warpgroup); BK = 128: A's slab rows are two K chunks (K-major B).
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:bf16, B[K,N]:bf16)",
      Knobs::parse("SWAP_AB=1,ATOM=wgmma_bf16,WM=2,WN=1,BN=16,STAGE=tma,SWIZZLE=128B,BK=128,"
                   "STAGES=2,WARP_SPECIALIZE=1"),
      37, {{"M", 16}, {"N", 128}, {"K", 256}});
  EXPECT_EQ(s.kernel.tensor("B_s").row_chunk, 64);
  EXPECT_EQ(s.kernel.tensor("A_s").row_chunk, 64);
}

TEST(SwapAb, OtherAtomsAndBatchesSwapToo) {
  // The swap is a loop interchange with a transposed write: every path takes it.
  passcheck::check_every_pass("bmm(A[2,M,K]:f32, B[2,K,N]:f32)", Knobs::parse("SWAP_AB=1"), 38,
                              {{"M", 5}, {"N", 40}, {"K", 24}});
  // Split-K runs after the swap: partial[s, N, M], reduced into out[n, m] with the epilogue.
  for (const char* mode : {"reduce", "atomic"})
    passcheck::check_every_pass(
        std::string(mode) == "atomic" ? "matmul(A[M,K]:f32, B[K,N]:f32)"
                                      : "relu(linear(X[M,K]:f32, W[N,K]:f32, bias[N]:f32))",
        Knobs::parse(std::string("SWAP_AB=1,SPLITK=3,SPLITK_MODE=") + mode), 40,
        {{"M", 6}, {"N", 40}, {"K", 100}});
  passcheck::check_every_pass(
      "matmul(A[M,K]:bf16, B[K,N]:bf16)",
      Knobs::parse("SWAP_AB=1,ATOM=mma_bf16,WM=2,WN=1,FM=2,FN=2,BK=32,STAGE=cp_async,STAGES=2,"
                   "EPILOGUE=smem"),
      39, {{"M", 16}, {"N", 128}, {"K", 64}});
}

TEST(SwapAb, ProgramWithoutAContractionIsAnError) {
  // The parser admits no such program; a Loop IR built by hand reaches the pass.
  CompileState s;
  s.knobs = Knobs::parse("SWAP_AB=1");
  LoopOp copy{"relu", {"X"}, "out", {}};
  copy.body = {Stmt::For("m", 16, LoopKind::Parallel, "m",
                         {Stmt::For("n", 64, LoopKind::Parallel, "n",
                                    {Stmt::Load("x", "X", {Expr::var("m"), Expr::var("n")}),
                                     Stmt::Write("out", {Expr::var("m"), Expr::var("n")},
                                                 Operand::value("x"))})})};
  s.loop.ops.push_back(copy);
  try {
    find_pass("l:015_swap_operands")->run(s);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SWAP_AB=0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
