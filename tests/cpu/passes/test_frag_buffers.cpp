// Fragment double buffering (FRAG_BUFFERS=2, k:027): inside each slab the fragments of
// atom step k_i+1 are loaded into the other buffer before the mmas of step k_i. Every
// pass's output runs on the CPU interpreter against the naive Loop IR for f16 and bf16
// (ldmatrix) and tf32 (element loads), ragged shapes, BK=32 and 64, sync and cp.async,
// transposed operands and epilogues. Then the IR shape k:027 leaves, and the cases it
// must leave alone (one atom step per slab, SIMT, FRAG_BUFFERS=1).
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "pass_check.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

// Extents of the register array `name`'s declaration (empty when it has none).
std::vector<int64_t> alloc_extents(const KernelProgram& p, const std::string& name) {
  std::vector<int64_t> ext;
  for (const auto& k : p.kernels)
    walk(k.body, [&](const Stmt& s) {
      if (s.kind == StmtKind::Alloc && s.dst == name)
        for (const Expr& e : s.index) ext.push_back(e.const_value());
    });
  return ext;
}

CompileState check_case(const std::string& expr, const std::string& knobs, uint64_t seed) {
  SCOPED_TRACE(expr + " knobs=" + knobs);
  CompileState s =
      passcheck::check_every_pass(expr, Knobs::parse(knobs + ",FRAG_BUFFERS=2"), seed);
  // Both operands were double-buffered: a leading dimension of 2.
  for (const char* frag : {"in0", "in1"}) {
    const std::vector<int64_t> ext = alloc_extents(s.kernel, frag);
    EXPECT_TRUE(!ext.empty() && ext[0] == 2) << frag << "\n" << print(s.kernel);
  }
  return s;
}

TEST(FragBuffers, F16AndBf16EveryPassMatchesTheNaiveLoopIr) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Ragged, sync staging, two atom steps per slab.
      {"matmul(A[37,29]:f16, B[29,45]:f16)", "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=32,STAGE=sync"},
      // Transposed B (plain x2), cp.async ring, four steps per slab.
      {"matmul(A[37,70]:f16, B[45,70]:f16.T)", "ATOM=mma_f16,WM=1,WN=2,FM=2,FN=1,BK=64,STAGE=cp_async,STAGES=3"},
      // Transposed A (x4.trans), f32 output, pipeline off.
      {"matmul(A[29,37]:f16.T, B[45,29]:f16.T, out=f32)", "ATOM=mma_f16,WM=1,WN=1,FM=2,FN=2,BK=32,STAGE=cp_async,STAGES=2,PIPELINE=0"},
      // An epilogue, and element-wise packed loads (LDMATRIX=0).
      {"silu(add(matmul(A[40,50]:f16, B[50,30]:f16), R[40,30]:f16))", "ATOM=mma_f16,LDMATRIX=0,WM=2,WN=1,FM=1,FN=2,BK=32,STAGE=sync"},
      {"matmul(A[29,37]:bf16.T, B[29,45]:bf16)", "ATOM=mma_bf16,WM=2,WN=1,FM=1,FN=2,BK=64,STAGE=cp_async,STAGES=3"},
      {"gelu(linear(X[33,40]:bf16, W[20,40]:bf16, bias[20]:bf16))", "ATOM=mma_bf16,WM=2,WN=1,FM=1,FN=2,BK=32,STAGE=sync"},
      {"bmm(A[3,20,40]:bf16, B[3,40,17]:bf16)", "ATOM=mma_bf16,WM=1,WN=1,FM=1,FN=2,BK=32,STAGE=cp_async,STAGES=2"},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i].first, cases[i].second, 1100 + i);
}

TEST(FragBuffers, Tf32EveryPassMatchesTheNaiveLoopIr) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"matmul(A[37,29]:tf32, B[29,45]:tf32)", "ATOM=mma_tf32,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=sync"},
      {"matmul(A[37,70]:tf32, B[45,70]:tf32.T)", "ATOM=mma_tf32,WM=2,WN=1,FM=1,FN=2,BK=32,STAGE=cp_async,STAGES=3"},
      {"relu(add(matmul(A[50,40]:tf32, B[40,33]:tf32), bias[33]:f32))", "ATOM=mma_tf32,WM=1,WN=2,FM=2,FN=1,BK=64,STAGE=sync"},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i].first, cases[i].second, 1200 + i);
}

const char* kExpr = "matmul(A[64,64]:f16, B[64,64]:f16)";
const char* kKnobs = "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=32,STAGE=sync,FRAG_BUFFERS=2";

const Stmt* find_loop(const Block& b, const std::string& var) {
  const Stmt* found = nullptr;
  walk(b, [&](const Stmt& s) {
    if (!found && s.kind == StmtKind::For && s.var == var) found = &s;
  });
  return found;
}

TEST(FragBuffers, PrefetchPrecedesTheMmasOfTheCurrentStep) {
  CompileState s = passcheck::compile_sm90a(kExpr, kKnobs, "k:027_frag_buffers");
  EXPECT_EQ(s.used_knobs.at("FRAG_BUFFERS"), "2");
  EXPECT_EQ(alloc_extents(s.kernel, "in0"), (std::vector<int64_t>{2, 2, 8}));
  EXPECT_EQ(alloc_extents(s.kernel, "in1"), (std::vector<int64_t>{2, 2, 4}));
  const std::string ir = print(s.kernel);
  // Prologue: step 0 into buffer 0, before the step loop.
  const size_t prologue = ir.find("in0[0, m_a] <- ldmatrix_x4(A_s[(m_w * 32 + m_a * 16 + lane % 16) * 32 + "
                                  "lane / 16 * 8])  warp");
  const size_t loop = ir.find("for k_i in 0..2 reduce unroll");
  ASSERT_NE(prologue, std::string::npos) << ir;
  ASSERT_NE(loop, std::string::npos) << ir;
  EXPECT_LT(prologue, loop);
  // In the loop: step k_i + 1 into the other buffer, then the mmas on this one.
  const size_t guard = ir.find("if k_i + 1 < 2:", loop);
  const size_t next = ir.find("in1[(k_i + 1) % 2, n_a] <- ldmatrix_x2_trans(B_s[((k_i + 1) * 16 + "
                              "lane % 16) * 32", loop);
  const size_t mma = ir.find("acc3[m_a, n_a] <- mma_m16n8k16_f32_f16(in0[k_i % 2, m_a], "
                             "in1[k_i % 2, n_a])  warp", loop);
  ASSERT_NE(guard, std::string::npos) << ir;
  ASSERT_NE(next, std::string::npos) << ir;
  ASSERT_NE(mma, std::string::npos) << ir;
  EXPECT_LT(guard, next);
  EXPECT_LT(next, mma);
  // The step loop holds no fragment declaration: one pair of buffers for the slab.
  const Stmt* ki = find_loop(s.kernel.kernels.at(0).body, "k_i");
  ASSERT_NE(ki, nullptr);
  int allocs = 0;
  walk(ki->body, [&](const Stmt& st) { allocs += st.kind == StmtKind::Alloc; });
  EXPECT_EQ(allocs, 0);
}

TEST(FragBuffers, LeavesOneStepSlabsSimtAndTheDefaultAlone) {
  auto same = [](const std::string& expr, const std::string& knobs) {
    SCOPED_TRACE(expr + " " + knobs);
    CompileState one = passcheck::compile_sm90a(expr, knobs + ",FRAG_BUFFERS=1");
    CompileState two = passcheck::compile_sm90a(expr, knobs + ",FRAG_BUFFERS=2");
    EXPECT_EQ(print(one.kernel), print(two.kernel));
    // The knob changed something elsewhere, so the comparison above can fail.
    CompileState deflt = passcheck::compile_sm90a(expr, knobs);
    EXPECT_EQ(print(deflt.kernel), print(one.kernel));
  };
  // BK == the atom's k: one step per slab, nothing to overlap.
  same(kExpr, "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=16,STAGE=sync");
  same("matmul(A[64,64]:tf32, B[64,64]:tf32)", "ATOM=mma_tf32,WM=2,WN=2,FM=2,FN=2,BK=8,STAGE=sync");
  // SIMT kernels have no fragments and do not record the knob.
  same("matmul(A[64,64]:f32, B[64,64]:f32)", "BM=32,BN=32,FM=2,FN=2,BK=16,STAGE=sync");
  CompileState simt = passcheck::compile_sm90a("matmul(A[64,64]:f32, B[64,64]:f32)", "");
  EXPECT_EQ(simt.used_knobs.count("FRAG_BUFFERS"), 0u);
  // The default is one buffer: the step loop still declares its fragments.
  CompileState d = passcheck::compile_sm90a(
      kExpr, "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=32,STAGE=sync", "k:027_frag_buffers");
  EXPECT_EQ(alloc_extents(d.kernel, "in0"), (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(d.used_knobs.at("FRAG_BUFFERS"), "1");
}

TEST(FragBuffers, KnobRejectsOtherCounts) {
  for (const char* bad : {"FRAG_BUFFERS=3", "FRAG_BUFFERS=0"}) {
    try {
      Knobs::parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("outside its range [1, 2]"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace loom
