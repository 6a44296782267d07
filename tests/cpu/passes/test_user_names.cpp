// What the user names and how often: one tensor read as both operands of a contraction
// (A·A, A·Aᵀ, linear(X, X), bmm(A, A), attention(Q, Q, Q)), and tensor or symbol names
// that are also names the passes generate (`t2`, `A_s`, `acc3`, `in0`) or C++ keywords,
// through every pass on the interpreter; and the names that cannot work, refused with
// what to rename.
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {

// The same tensor as both operands is one Loop IR input; t:040 stages it twice, as two
// shared slabs with names of their own (the second used to be declared as A_s again).
TEST(UserNames, OneTensorAsBothOperandsThroughEveryPass) {
  struct Case {
    const char* expr;
    const char* knobs;
    std::map<std::string, int64_t> sizes;
  };
  const Case cases[] = {
      {"matmul(A[24,24]:f32, A[24,24]:f32)", "BM=16,BN=16,FM=2,FN=2,BK=8", {}},
      {"matmul(A[M,M]:f32, A[M,M]:f32.T)", "BM=16,BN=16,FM=2,FN=2,BK=8,STAGE=cp_async", {{"M", 20}}},
      {"add(matmul(A[32,32]:f16, A[32,32]:f16), A[32,32]:f16)", "ATOM=mma_f16", {}},
      {"linear(X[40,32]:bf16, X[40,32]:bf16)", "ATOM=mma_bf16", {}},
      {"bmm(A[2,32,32]:f32, A[2,32,32]:f32)", "BM=16,BN=16,FM=2,FN=2,BK=8", {}},
      {"matmul(A[64,64]:f16, A[64,64]:f16.T)",
       "ATOM=wgmma_f16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2", {}},
  };
  for (const Case& c : cases) {
    const CompileState s = passcheck::check_every_pass(c.expr, Knobs::parse(c.knobs), 11, c.sizes);
    if (::testing::Test::HasFailure()) return;
    int slabs = 0;
    for (const TensorDecl& t : s.kernel.tensors)
      slabs += t.role == TensorRole::Shared && (t.name.rfind("A_s", 0) == 0 || t.name.rfind("X_s", 0) == 0);
    EXPECT_GE(slabs, 2) << c.expr;
  }
}

// Attention's own lowering (t:012, then k:012 or k:013) pass by pass on the interpreter,
// as test_attention_kernel checks it: each pass that changed the IR against the naive
// loops.
void check_attention(const std::string& expr, const std::string& knobs, uint64_t seed) {
  SCOPED_TRACE(expr + " knobs=" + knobs);
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse(knobs);
  s.target = Target::for_arch("sm_90a");
  Bindings inputs, reference;
  const DType out = s.graph.node(s.graph.result()).dtype;
  for (const auto& p : pipeline()) {
    const std::string before = print_level(s, p.to);
    p.run(s);
    passcheck::verify_level(s, p.to);
    if (reference.tensors.empty()) {
      make_random_inputs(s.loop, inputs, seed);
      reference = inputs;
      interpret(s.loop, reference);
      continue;
    }
    if (print_level(s, p.to) == before) continue;
    Bindings got = inputs;
    if (p.to == Level::Loop) interpret(s.loop, got);
    if (p.to == Level::Tile) interpret(s.tile, got);
    if (p.to == Level::Kernel) interpret(s.kernel, got);
    passcheck::expect_outputs_close(p.to == Level::Kernel ? static_cast<const ProgramBase&>(s.kernel)
                                                          : static_cast<const ProgramBase&>(s.loop),
                                    got, reference, out, "after " + p.id);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(s.level, Level::Kernel);
}

TEST(UserNames, AttentionOfOneTensorThroughEveryPass) {
  for (const char* knobs : {"ATTN_MMA=mma_sync,BLOCK_M=32,BLOCK_N=16,WARPS=2", ""}) {
    check_attention("attention(q[1,2,33,64]:bf16, q[1,2,33,64]:bf16, q[1,2,33,64]:bf16, causal=true)",
                    knobs, 5);
    check_attention("attention(q[1,2,17,64]:f16, k[1,2,40,64]:f16, k[1,2,40,64]:f16, lse=true)", knobs, 6);
  }
}

// Tensor names the passes also generate: a temp `t2`, a slab `A_s`, registers `acc3` and
// `in0`; and C++ keywords as tensor and symbol names. The IR keeps the user's names.
TEST(UserNames, NamesLikeGeneratedOnesThroughEveryPass) {
  passcheck::check_every_pass("add(matmul(A[24,24]:f32, A_s[24,24]:f32), t2[24,24]:f32)",
                              Knobs::parse("BM=16,BN=16,FM=2,FN=2,BK=8"), 3);
  passcheck::check_every_pass("add(linear(int[20,16]:f16, float[24,16]:f16, b[24]:f16), acc3[20,24]:f16)",
                              Knobs::parse("ATOM=mma_f16"), 4);
  passcheck::check_every_pass("matmul(in0[int,acc3]:f32, k[acc3,float]:f32)",
                              Knobs::parse("BM=16,BN=16,FM=2,FN=2,BK=8"), 5,
                              {{"int", 20}, {"acc3", 12}, {"float", 28}});
}

// A size symbol named like a loop variable the passes bind (`m`, `k`, `n`, the batch `b`,
// the split reduce `k_i`) or a tensor they declare (`A_s`) is spelled apart before
// lowering (`loom_sym_m`, passes/symbol_spelling.h) and compiles through every pass; its
// value is bound under the name the user wrote. These were refused before.
TEST(UserNames, SymbolsNamedLikeGeneratedNamesAreSpelledApart) {
  const CompileState s = passcheck::check_every_pass(
      "matmul(A[m,k]:f32, B[k,n]:f32)", Knobs::parse("BM=16,BN=16,FM=2,FN=2,BK=8"), 6,
      {{"m", 20}, {"k", 12}, {"n", 28}});
  for (const char* user : {"m", "k", "n"}) {
    const std::string spelled = std::string("loom_sym_") + user;
    EXPECT_EQ(s.kernel.symbol_names.at(spelled), user);
    EXPECT_NE(std::find(s.kernel.symbols.begin(), s.kernel.symbols.end(), spelled),
              s.kernel.symbols.end());
  }
  EXPECT_NE(print_level(s, Level::Kernel).find("(loom_sym_m is m)"), std::string::npos);
  passcheck::check_every_pass("matmul(A[M,k_i]:f32, B[k_i,N]:f32)",
                              Knobs::parse("BM=16,BN=16,FM=2,FN=2,BK=8"), 7,
                              {{"M", 20}, {"k_i", 24}, {"N", 12}});
  passcheck::check_every_pass("matmul(A[M,A_s]:f32, B[A_s,N]:f32)",
                              Knobs::parse("BM=16,BN=16,FM=2,FN=2,BK=8,STAGE=sync"), 8,
                              {{"M", 20}, {"A_s", 24}, {"N", 12}});
  passcheck::check_every_pass("bmm(A[b,m_b,K]:f16, B[b,K,N]:f16)", Knobs::parse("ATOM=mma_f16"), 9,
                              {{"b", 2}, {"m_b", 24}, {"K", 32}, {"N", 16}});
  // A symbol no pass generates keeps its name.
  const CompileState plain = passcheck::compile_sm90a("matmul(A[M,K]:f32, B[K,N]:f32)", "");
  EXPECT_TRUE(plain.kernel.symbol_names.empty());
  EXPECT_EQ(plain.kernel.symbols, (std::vector<std::string>{"M", "K", "N"}));
}

}  // namespace
}  // namespace loom
