// Fragment loads by ldmatrix (LDMATRIX=1, step 01b): k:025 turns the A and B fragment
// loads of f16/bf16 mma kernels into warp copies. Every pass's output runs on the CPU
// interpreter (which executes ldmatrix per warp through its declared maps) against the
// naive Loop IR: both B majornesses, transposed A, batch, epilogues, sync and cp.async
// staging, a padding that keeps rows 16-byte aligned and one that does not (element-wise
// fallback). Then the IR shape, the verifier's and the interpreter's errors, and the
// race tracking that sees ldmatrix as reads of its rows.
#include <gtest/gtest.h>

#include "atoms/atoms.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "pass_check.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

struct Case {
  std::string expr, knobs;
  std::set<std::string> copies;  // warp copies k:025 must declare
};

int count_stmts(const Block& b, const std::function<bool(const Stmt&)>& pred) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += pred(s); });
  return n;
}

std::set<std::string> copy_ids(const KernelProgram& p) {
  std::set<std::string> ids;
  for (const auto& k : p.kernels)
    for (const auto& w : k.warp_copies) ids.insert(w.id);
  return ids;
}

int fragment_loads(const KernelProgram& p) {
  int n = 0;
  for (const auto& k : p.kernels)
    n += count_stmts(k.body, [](const Stmt& s) {
      return s.kind == StmtKind::Load && (s.dst == "in0" || s.dst == "in1");
    });
  return n;
}

// The whole pipeline, the output after every pass against the Loop IR, then the copies.
CompileState check_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.expr + " knobs=" + c.knobs);
  CompileState s = passcheck::check_every_pass(c.expr, Knobs::parse(c.knobs), seed);
  EXPECT_EQ(copy_ids(s.kernel), c.copies);
  if (!c.copies.empty()) {
    EXPECT_EQ(fragment_loads(s.kernel), 0) << print(s.kernel);
  }
  return s;
}

TEST(Ldmatrix, F16EveryPassMatchesTheNaiveLoopIr) {
  const std::vector<Case> cases = {
      // B slab [BK][BN] (N contiguous): .trans; ragged shape, sync staging.
      {"matmul(A[37,29]:f16, B[29,45]:f16)", "ATOM=mma_f16,LDMATRIX=1,WM=2,WN=2,FM=2,FN=2,BK=32,STAGE=sync",
       {"ldmatrix_x4", "ldmatrix_x2_trans"}},
      // B transposed input, slab [BN][BK] (K contiguous): the plain x2; cp.async ring.
      {"matmul(A[37,29]:f16, B[45,29]:f16.T)", "ATOM=mma_f16,LDMATRIX=1,WM=1,WN=2,FM=2,FN=1,BK=16,STAGE=cp_async,STAGES=2",
       {"ldmatrix_x4", "ldmatrix_x2"}},
      // A transposed too: A slab [BK][BM] (M contiguous) takes x4.trans.
      {"matmul(A[29,37]:f16.T, B[45,29]:f16.T, out=f32)", "ATOM=mma_f16,LDMATRIX=1,WM=1,WN=1,FM=2,FN=2,BK=32,STAGE=cp_async,STAGES=2",
       {"ldmatrix_x4_trans", "ldmatrix_x2"}},
      // Batch, an epilogue, and a padding of 8 elements (16 B) that keeps rows aligned.
      {"bmm(A[3,20,24]:f16, B[3,24,17]:f16)", "ATOM=mma_f16,LDMATRIX=1,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=sync",
       {"ldmatrix_x4", "ldmatrix_x2_trans"}},
      {"silu(add(matmul(A[40,50]:f16, B[50,30]:f16), R[40,30]:f16))", "ATOM=mma_f16,WM=4,WN=1,FM=1,FN=4,BK=16,STAGE=sync",
       {"ldmatrix_x4", "ldmatrix_x2_trans"}},
      {"matmul(A[50,70]:f16, B[70,40]:f16)", "ATOM=mma_f16,LDMATRIX=1,WM=2,WN=1,FM=1,FN=2,BK=32,STAGE=sync,STAGES=2,PAD_SMEM=8",
       {"ldmatrix_x4", "ldmatrix_x2_trans"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i], 700 + i);
}

TEST(Ldmatrix, Bf16EveryPassMatchesTheNaiveLoopIr) {
  const std::vector<Case> cases = {
      {"matmul(A[29,37]:bf16.T, B[29,45]:bf16)", "ATOM=mma_bf16,LDMATRIX=1,WM=2,WN=1,FM=1,FN=2,BK=32,STAGE=cp_async,STAGES=3",
       {"ldmatrix_x4_trans", "ldmatrix_x2_trans"}},
      {"gelu(linear(X[33,40]:bf16, W[20,40]:bf16, bias[20]:bf16))", "ATOM=mma_bf16,LDMATRIX=1,WM=2,WN=1,FM=1,FN=2,BK=16,STAGE=sync",
       {"ldmatrix_x4", "ldmatrix_x2"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i], 800 + i);
}

// Where ldmatrix is not legal the loads stay element-wise and the answer is unchanged:
// a padding of 4 elements (8 B) leaves odd rows off 16-byte boundaries; tf32 slabs with
// M or N contiguous (the b32 view has no .trans; test_tf32_fragments.cpp has the rest of
// tf32); LDMATRIX=0 asks for element loads.
TEST(Ldmatrix, FallsBackToElementLoadsWhereNotLegal) {
  for (const Case& c : std::vector<Case>{
           {"matmul(A[50,70]:f16, B[70,40]:f16)", "ATOM=mma_f16,LDMATRIX=1,WM=2,WN=1,FM=1,FN=2,BK=32,STAGE=sync,PAD_SMEM=4", {}},
           {"matmul(A[29,37]:tf32.T, B[29,45]:tf32)", "ATOM=mma_tf32,LDMATRIX=1,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=sync,SLAB_KOUTER=0", {}},
           {"matmul(A[37,29]:f16, B[29,45]:f16)", "ATOM=mma_f16,LDMATRIX=0,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=sync", {}}}) {
    CompileState s = check_case(c, 900);
    EXPECT_GT(fragment_loads(s.kernel), 0) << c.knobs;
  }
}

const char* kExpr = "matmul(A[64,64]:f16, B[64,64]:f16)";
const char* kKnobs = "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=32,STAGE=sync";

TEST(Ldmatrix, LowerMmaEmitsOneCopyPerFragmentWithTheTablesRowStarts) {
  CompileState s = passcheck::compile_sm90a(kExpr, kKnobs, "k:025_lower_mma");
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(s.used_knobs.at("LDMATRIX"), "1");
  ASSERT_EQ(k.warp_copies.size(), 2u);
  EXPECT_EQ(fragment_loads(s.kernel), 0);
  const std::string ir = print(s.kernel);
  EXPECT_NE(ir.find("in0[m_a] <- ldmatrix_x4(A_s[(m_w * 32 + m_a * 16 + lane % 16) * 32 + "
                    "k_i * 16 + lane / 16 * 8])  warp"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("in1[n_a] <- ldmatrix_x2_trans(B_s[(k_i * 16 + lane % 16) * 32 + n_w * 16 + "
                    "n_a * 8])  warp"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("warp copy ldmatrix_x4: b16[32, 8] from shared, one row per lane, 8/lane"),
            std::string::npos);
  // SIMT kernels do not record the knob (their defaults and cache keys stay as they were).
  CompileState simt = passcheck::compile_sm90a(kExpr, "", "k:025_lower_mma");
  EXPECT_EQ(simt.used_knobs.count("LDMATRIX"), 0u);
}

// The statement k:025 emits, for editing in the error tests below.
Stmt* first_copy(KernelOp& k) {
  Stmt* found = nullptr;
  walk(k.body, [&](Stmt& s) {
    if (!found && s.kind == StmtKind::Atom && find_warp_copy(k, s.atom)) found = &s;
  });
  return found;
}

std::string verify_error(const KernelProgram& p) {
  try {
    verify(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Ldmatrix, VerifierChecksDeclarationTensorAndFragment) {
  const CompileState s = passcheck::compile_sm90a(kExpr, kKnobs);
  ASSERT_EQ(verify_error(s.kernel), "");
  {
    KernelProgram p = s.kernel;
    p.kernels[0].warp_copies.clear();
    EXPECT_NE(verify_error(p).find("is not declared in the kernel's warp_copies"), std::string::npos)
        << verify_error(p);
  }
  {
    KernelProgram p = s.kernel;
    first_copy(p.kernels[0])->tensor = "A";
    EXPECT_NE(verify_error(p).find("`A` is not a shared tensor"), std::string::npos) << verify_error(p);
  }
  {
    KernelProgram p = s.kernel;
    first_copy(p.kernels[0])->dst_index.clear();  // the whole in0[2, 4] is 8 x 2 values
    EXPECT_NE(verify_error(p).find("selects 16 elements but ldmatrix"), std::string::npos)
        << verify_error(p);
  }
  {
    KernelProgram p = s.kernel;
    p.kernels[0].warp_copies[0].dst.pop_back();
    EXPECT_NE(verify_error(p).find("dst map has"), std::string::npos) << verify_error(p);
  }
}

std::string run_error(const KernelProgram& p) {
  Bindings b;
  make_random_inputs(p, b, 3);
  try {
    interpret(p, b);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Ldmatrix, InterpreterRejectsDivergenceMisalignmentAndRaces) {
  const CompileState s = passcheck::compile_sm90a(kExpr, kKnobs);
  ASSERT_EQ(run_error(s.kernel), "");
  {
    // Half the lanes of each warp: ldmatrix needs all 32.
    KernelProgram p = s.kernel;
    Stmt* c = first_copy(p.kernels[0]);
    Stmt copy = *c;
    *c = Stmt::If(Expr::var("lane") < Expr(16), {copy});
    EXPECT_NE(run_error(p).find("reached by 16 of the 32 lanes"), std::string::npos) << run_error(p);
  }
  {
    // One element off: rows are no longer 16-byte aligned.
    KernelProgram p = s.kernel;
    Stmt* c = first_copy(p.kernels[0]);
    c->index[0] = c->index[0] + Expr(1);
    EXPECT_NE(run_error(p).find("is not 16-byte aligned"), std::string::npos) << run_error(p);
  }
  {
    // Without the barrier between the slab stores and the fragment reads, the race
    // tracking sees ldmatrix read rows other threads wrote.
    KernelProgram p = s.kernel;
    bool removed = false;
    walk(p.kernels[0].body, [&](Stmt& st) {
      if (removed || st.kind != StmtKind::For || st.var != "k_o") return;
      for (size_t i = 0; i < st.body.size(); ++i)
        if (st.body[i].kind == StmtKind::Barrier) {
          st.body.erase(st.body.begin() + long(i));
          removed = true;
          return;
        }
    });
    ASSERT_TRUE(removed);
    EXPECT_NE(run_error(p).find("ldmatrix"), std::string::npos) << run_error(p);
  }
}

}  // namespace
}  // namespace loom
