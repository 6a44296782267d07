#include "ir/stmt.h"

#include "ir/error.h"
#include "ir/program.h"

#include <gtest/gtest.h>

#include <cmath>

namespace loom {
namespace {

TEST(StmtNames, TiersKindsOps) {
  EXPECT_STREQ(tier_name(Tier::None), "none");
  EXPECT_STREQ(tier_name(Tier::Grid), "grid");
  EXPECT_STREQ(tier_name(Tier::Cluster), "cluster");
  EXPECT_STREQ(tier_name(Tier::Warpgroup), "warpgroup");
  EXPECT_STREQ(tier_name(Tier::Warp), "warp");
  EXPECT_STREQ(tier_name(Tier::Thread), "thread");
  EXPECT_STREQ(tier_name(Tier::Register), "register");
  EXPECT_STREQ(tier_name(Tier::Atom), "atom");
  EXPECT_STREQ(loop_kind_name(LoopKind::Parallel), "parallel");
  EXPECT_STREQ(loop_kind_name(LoopKind::Reduce), "reduce");
  EXPECT_STREQ(scalar_op_name(ScalarOp::Sub), "subtract");
  EXPECT_STREQ(scalar_op_name(ScalarOp::Mul), "multiply");
  EXPECT_STREQ(scalar_op_name(ScalarOp::Div), "divide");
  EXPECT_STREQ(scalar_op_name(ScalarOp::Neg), "negate");
  EXPECT_STREQ(scalar_op_name(ScalarOp::Gelu), "gelu");
  EXPECT_EQ(scalar_op_arity(ScalarOp::Add), 2);
  EXPECT_EQ(scalar_op_arity(ScalarOp::Max), 2);
  EXPECT_EQ(scalar_op_arity(ScalarOp::Neg), 1);
  EXPECT_EQ(scalar_op_arity(ScalarOp::Silu), 1);
}

TEST(ScalarOps, ReferenceSemantics) {
  EXPECT_EQ(eval_scalar_op(ScalarOp::Add, 1.5, 2.0), 3.5);
  EXPECT_EQ(eval_scalar_op(ScalarOp::Sub, 1.5, 2.0), -0.5);
  EXPECT_EQ(eval_scalar_op(ScalarOp::Mul, 1.5, 2.0), 3.0);
  EXPECT_EQ(eval_scalar_op(ScalarOp::Div, 1.5, 2.0), 0.75);
  EXPECT_EQ(eval_scalar_op(ScalarOp::Max, -1.0, 2.0), 2.0);
  EXPECT_EQ(eval_scalar_op(ScalarOp::Min, -1.0, 2.0), -1.0);
  EXPECT_EQ(eval_scalar_op(ScalarOp::Neg, 3.0), -3.0);
  EXPECT_EQ(eval_scalar_op(ScalarOp::Relu, -3.0), 0.0);
  EXPECT_EQ(eval_scalar_op(ScalarOp::Relu, 3.0), 3.0);
  // torch.nn.functional.gelu(torch.tensor(1., dtype=torch.float64)) (erf form).
  EXPECT_NEAR(eval_scalar_op(ScalarOp::Gelu, 1.0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(eval_scalar_op(ScalarOp::Gelu, -2.0), -0.04550026389635842, 1e-15);
  EXPECT_NEAR(eval_scalar_op(ScalarOp::Silu, 1.0), 0.7310585786300049, 1e-15);
  EXPECT_NEAR(eval_scalar_op(ScalarOp::Silu, -3.0), -0.14227761953270035, 1e-15);
  // NaN (a poisoned, unwritten element) must survive every op.
  EXPECT_TRUE(std::isnan(eval_scalar_op(ScalarOp::Max, NAN, 1.0)));
  EXPECT_TRUE(std::isnan(eval_scalar_op(ScalarOp::Max, 1.0, NAN)));
  EXPECT_TRUE(std::isnan(eval_scalar_op(ScalarOp::Min, 1.0, NAN)));
  EXPECT_TRUE(std::isnan(eval_scalar_op(ScalarOp::Relu, NAN)));
}

TEST(Operand, PrintsShortestRoundTrip) {
  EXPECT_EQ(Operand::value("acc").str(), "acc");
  EXPECT_EQ(Operand::constant(0.5).str(), "0.5");
  EXPECT_EQ(Operand::constant(2.0).str(), "2");
  EXPECT_EQ(Operand::constant(1e-5).str(), "1e-05");
  EXPECT_EQ(Operand::constant(-0.1).str(), "-0.1");
  EXPECT_EQ(std::stod(Operand::constant(1.0 / 3.0).str()), 1.0 / 3.0);
  EXPECT_TRUE(Operand::constant(0.0).is_imm());
}

TEST(StmtFactories, SetTheirFields) {
  Expr m = Expr::var("m");
  Stmt f = Stmt::For("m_t", Expr(16), LoopKind::Reduce, "k", {Stmt::Init("acc", 0.0)},
                     Tier::Thread);
  EXPECT_EQ(f.kind, StmtKind::For);
  EXPECT_EQ(f.var, "m_t");
  EXPECT_EQ(f.extent.const_value(), 16);
  EXPECT_EQ(f.loop_kind, LoopKind::Reduce);
  EXPECT_EQ(f.axis, "k");
  EXPECT_EQ(f.tier, Tier::Thread);
  ASSERT_EQ(f.body.size(), 1u);
  EXPECT_EQ(f.body[0].kind, StmtKind::Init);
  EXPECT_EQ(f.body[0].dst, "acc");
  EXPECT_EQ(Stmt::For("i", Expr(4), LoopKind::Parallel, "m", {}).tier, Tier::None);

  Stmt i = Stmt::If(m < 10, {});
  EXPECT_EQ(i.kind, StmtKind::If);
  EXPECT_EQ(i.cond.str(), "m < 10");
  Stmt l = Stmt::Let("m_b", Expr::var("blockIdx.x"));
  EXPECT_EQ(l.kind, StmtKind::Let);
  EXPECT_EQ(l.var, "m_b");
  EXPECT_EQ(l.value.str(), "blockIdx.x");
  Stmt ld = Stmt::Load("a", "A", {m, Expr::var("k")});
  EXPECT_EQ(ld.kind, StmtKind::Load);
  EXPECT_EQ(ld.dst, "a");
  EXPECT_EQ(ld.tensor, "A");
  EXPECT_EQ(ld.index.size(), 2u);
  Stmt c = Stmt::Compute("p", ScalarOp::Mul, {Operand::value("a"), Operand::constant(2)});
  EXPECT_EQ(c.kind, StmtKind::Compute);
  EXPECT_EQ(c.op, ScalarOp::Mul);
  EXPECT_EQ(c.args.size(), 2u);
  Stmt in = Stmt::Init("acc", 1.5);
  EXPECT_EQ(in.imm, 1.5);
  Stmt ac = Stmt::Accum("acc", Operand::value("p"));
  EXPECT_EQ(ac.kind, StmtKind::Accum);
  EXPECT_EQ(ac.dst, "acc");
  EXPECT_EQ(ac.args[0].name, "p");
  Stmt w = Stmt::Write("C", {m}, Operand::value("acc"));
  EXPECT_EQ(w.kind, StmtKind::Write);
  EXPECT_EQ(w.tensor, "C");
  EXPECT_EQ(w.args[0].name, "acc");
  Stmt at = Stmt::Atom("fma", "acc", {Operand::value("a"), Operand::value("b")});
  EXPECT_EQ(at.kind, StmtKind::Atom);
  EXPECT_EQ(at.atom, "fma");
  EXPECT_EQ(at.dst, "acc");
}

// for m in 0..M: for k in 0..K (reduce): if m < M: let t = k * 2; a = load A[m, k]
//                write C[m] = acc
Block nested() {
  Expr m = Expr::var("m"), k = Expr::var("k");
  Block inner = {Stmt::If(m < Expr::var("M"), {Stmt::Let("t", k * 2),
                                                Stmt::Load("a", "A", {m, k})})};
  return {Stmt::For("m", Expr::var("M"), LoopKind::Parallel, "m",
                    {Stmt::For("k", Expr::var("K"), LoopKind::Reduce, "k", inner),
                     Stmt::Write("C", {m}, Operand::value("acc"))})};
}

TEST(Walk, PreOrder) {
  Block b = nested();
  std::vector<StmtKind> order;
  walk(static_cast<const Block&>(b), [&](const Stmt& s) { order.push_back(s.kind); });
  EXPECT_EQ(order, (std::vector<StmtKind>{StmtKind::For, StmtKind::For, StmtKind::If,
                                          StmtKind::Let, StmtKind::Load, StmtKind::Write}));
  walk(b, [](Stmt& s) {
    if (s.kind == StmtKind::Load) s.tensor = "A_smem";
  });
  EXPECT_EQ(b[0].body[0].body[0].body[1].tensor, "A_smem");
}

TEST(SubstituteBlock, ReachesEveryExprField) {
  Block b = nested();
  Expr mb = Expr::var("m_b"), mt = Expr::var("m_t");
  substitute_block(b, {{"m", mb * 64 + mt}, {"k", Expr::var("k_o") * 16},
                       {"M", Expr(128)}, {"K", Expr(256)}});
  EXPECT_EQ(b[0].extent.str(), "128");
  const Stmt& kloop = b[0].body[0];
  EXPECT_EQ(kloop.extent.str(), "256");
  const Stmt& guard = kloop.body[0];
  EXPECT_EQ(guard.cond.str(), "m_b * 64 + m_t < 128");
  EXPECT_EQ(guard.body[0].value.str(), "k_o * 32");
  EXPECT_EQ(guard.body[1].index[0].str(), "m_b * 64 + m_t");
  EXPECT_EQ(guard.body[1].index[1].str(), "k_o * 16");
  EXPECT_EQ(b[0].body[1].index[0].str(), "m_b * 64 + m_t");
}

// TensorDecl and ProgramBase lookups (src/ir/program.cpp) live with the statements they
// declare storage for.
TEST(TensorDecl, StridesNumelLookup) {
  ProgramBase p;
  p.tensors.push_back({"A", DType::F16, {Expr::var("B"), Expr::var("M"), Expr(64)},
                       TensorRole::Input});
  p.tensors.push_back({"C", DType::F32, {Expr(8), Expr(4)}, TensorRole::Output});
  std::vector<Expr> s = p.tensor("A").strides();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].str(), "M * 64");
  EXPECT_EQ(s[1].str(), "64");
  EXPECT_EQ(s[2].str(), "1");
  EXPECT_EQ(p.tensor("A").numel().str(), "B * M * 64");
  EXPECT_EQ(p.tensor("C").numel().const_value(), 32);
  EXPECT_EQ(p.tensor("C").strides()[0].const_value(), 4);
  EXPECT_EQ(TensorDecl{}.numel().const_value(), 1);  // a scalar holds one element
  EXPECT_TRUE(p.has_tensor("C"));
  EXPECT_FALSE(p.has_tensor("D"));
  p.tensor("C").role = TensorRole::Temp;
  EXPECT_EQ(p.tensors[1].role, TensorRole::Temp);
  try {
    p.tensor("D");
    FAIL() << "unknown tensor must throw";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'D'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("A, C"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace loom
