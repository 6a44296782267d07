// The IR attention's softmax needs: exp, exp2 and log as scalar ops, and Accum with
// max / multiply (a row max, online softmax's rescale) beside add — printed, verified
// and interpreted.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/program.h"

namespace loom {
namespace {

Expr v(const char* name) { return Expr::var(name); }
Operand val(const char* name) { return Operand::value(name); }
constexpr double kInf = std::numeric_limits<double>::infinity();

TensorDecl decl(std::string name, std::vector<Expr> shape, TensorRole role) {
  TensorDecl t;
  t.name = std::move(name);
  t.dtype = DType::F32;
  t.shape = std::move(shape);
  t.role = role;
  return t;
}

// Per row of X[R, C]: lse = m + log Σ exp(x - m) with m the row max, a second output
// out2 = Π_c exp2(x) (through Accum multiply), and rows >= `kept` see no element (their
// max stays -inf, so the guard keeps exp(-inf - -inf) from running).
LoopProgram row_program() {
  LoopProgram p;
  p.tensors = {decl("X", {v("R"), Expr(5)}, TensorRole::Input),
               decl("lse", {v("R")}, TensorRole::Output),
               decl("prod", {v("R")}, TensorRole::Output)};
  p.symbols = {"R"};
  Block max_body = {Stmt::If(v("c") <= v("r"), {Stmt::Load("x", "X", {v("r"), v("c")}),
                                                Stmt::Accum("m", val("x"), ScalarOp::Max)})};
  Block sum_body = {Stmt::If(v("c") <= v("r"), {
      Stmt::Load("x", "X", {v("r"), v("c")}),
      Stmt::Compute("e", ScalarOp::Sub, {val("x"), val("m")}),
      Stmt::Compute("p", ScalarOp::Exp, {val("e")}),
      Stmt::Accum("l", val("p")),
      Stmt::Compute("p2", ScalarOp::Exp2, {val("x")}),
      Stmt::Accum("pr", val("p2"), ScalarOp::Mul),
  })};
  Block cell = {
      Stmt::Init("m", -kInf),
      Stmt::For("c", Expr(5), LoopKind::Reduce, "c", max_body),
      Stmt::Init("l", 0.0),
      Stmt::Init("pr", 1.0),
      Stmt::For("c", Expr(5), LoopKind::Reduce, "c", sum_body),
      Stmt::Compute("ll", ScalarOp::Log, {val("l")}),
      Stmt::Compute("y", ScalarOp::Add, {val("m"), val("ll")}),
      Stmt::Write("lse", {v("r")}, val("y")),
      Stmt::Write("prod", {v("r")}, val("pr")),
  };
  p.ops.push_back(LoopOp{"row_lse", {"X"}, "lse",
                         {Stmt::For("r", v("R"), LoopKind::Parallel, "r", cell)}});
  return p;
}

TEST(SoftmaxOps, ScalarSemantics) {
  EXPECT_STREQ(scalar_op_name(ScalarOp::Exp), "exp");
  EXPECT_STREQ(scalar_op_name(ScalarOp::Exp2), "exp2");
  EXPECT_STREQ(scalar_op_name(ScalarOp::Log), "log");
  EXPECT_EQ(scalar_op_arity(ScalarOp::Exp2), 1);
  EXPECT_DOUBLE_EQ(eval_scalar_op(ScalarOp::Exp2, 3.0), 8.0);
  EXPECT_DOUBLE_EQ(eval_scalar_op(ScalarOp::Exp, 1.0), std::exp(1.0));
  EXPECT_EQ(eval_scalar_op(ScalarOp::Exp, -kInf), 0.0);
  EXPECT_EQ(eval_scalar_op(ScalarOp::Log, 0.0), -kInf);
  EXPECT_TRUE(is_accumulate_op(ScalarOp::Max));
  EXPECT_TRUE(is_accumulate_op(ScalarOp::Mul));
  EXPECT_FALSE(is_accumulate_op(ScalarOp::Sub));
}

TEST(SoftmaxOps, Print) {
  std::string text = print(row_program());
  EXPECT_NE(text.find("m = -inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("m <- max(m, x)"), std::string::npos) << text;
  EXPECT_NE(text.find("l <- add(l, p)"), std::string::npos) << text;
  EXPECT_NE(text.find("pr <- multiply(pr, p2)"), std::string::npos) << text;
  EXPECT_NE(text.find("p = exp(e)"), std::string::npos) << text;
  EXPECT_NE(text.find("p2 = exp2(x)"), std::string::npos) << text;
  EXPECT_NE(text.find("ll = log(l)"), std::string::npos) << text;
}

TEST(SoftmaxOps, Interpret) {
  LoopProgram p = row_program();
  verify(p);
  Bindings b;
  b.symbols["R"] = 7;
  make_random_inputs(p, b, 3);
  interpret(p, b);
  const HostTensor& x = b.tensors.at("X");
  for (int r = 0; r < 7; ++r) {
    int n = std::min(r + 1, 5);
    double m = -kInf, l = 0, pr = 1;
    for (int c = 0; c < n; ++c) m = std::max(m, x.data[size_t(r * 5 + c)]);
    for (int c = 0; c < n; ++c) {
      l += std::exp(x.data[size_t(r * 5 + c)] - m);
      pr *= std::exp2(x.data[size_t(r * 5 + c)]);
    }
    EXPECT_NEAR(b.tensors.at("lse").data[size_t(r)], m + std::log(l), 1e-6) << r;
    EXPECT_NEAR(b.tensors.at("prod").data[size_t(r)], pr, 1e-6 * pr) << r;
  }
}

TEST(SoftmaxOps, VerifyRejectsBadAccumAndArity) {
  LoopProgram p = row_program();
  Stmt& max = p.ops[0].body[0].body[1].body[0].body[1];
  ASSERT_EQ(max.kind, StmtKind::Accum);
  max.op = ScalarOp::Sub;
  try {
    verify(p);
    ADD_FAILURE() << "accepted an Accum with subtract";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("accumulate combines with add, max, min or multiply"),
              std::string::npos)
        << e.what();
  }
  p = row_program();
  Stmt& exp = p.ops[0].body[0].body[4].body[0].body[2];
  ASSERT_EQ(exp.op, ScalarOp::Exp);
  exp.args.push_back(Operand::constant(2.0));
  EXPECT_THROW(verify(p), Error);
}

}  // namespace
}  // namespace loom
