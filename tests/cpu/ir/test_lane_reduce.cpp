// lane_reduce (the shfl.sync.bfly reduction attention's row max and sum use): printed,
// verified (Kernel IR only; groups of 2..32 lanes; add, max or min) and interpreted over
// the 32 lanes of each warp, every lane of a group receiving the group's result; under a
// lane-dependent If the interpreter refuses it, as the hardware would hang or read
// inactive lanes.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/program.h"

namespace loom {
namespace {

Expr v(const char* name) { return Expr::var(name); }

TensorDecl decl(std::string name, Expr n, TensorRole role) {
  TensorDecl t;
  t.name = std::move(name);
  t.dtype = DType::F32;
  t.shape = {std::move(n)};
  t.role = role;
  return t;
}

// out[t] = op over the group of `lanes` lanes of X[t], for 64 threads (two warps).
KernelProgram program(ScalarOp op, int lanes, Block around = {}) {
  KernelProgram p;
  p.tensors = {decl("X", Expr(64), TensorRole::Input), decl("out", Expr(64), TensorRole::Output)};
  KernelOp k;
  k.name = "k_reduce";
  k.block_threads = 64;
  k.params = {"X", "out"};
  Block body = {Stmt::Load("x", "X", {v("threadIdx.x")}),
                Stmt::LaneReduce("r", op, Operand::value("x"), lanes),
                Stmt::Write("out", {v("threadIdx.x")}, Operand::value("r"))};
  if (!around.empty()) {
    around[0].body = body;
    body = around;
  }
  k.body = body;
  p.kernels.push_back(k);
  return p;
}

TEST(LaneReduce, PrintsAndVerifies) {
  KernelProgram p = program(ScalarOp::Max, 4);
  verify(p);
  EXPECT_NE(print(p).find("r = lane_reduce.max.x4(x)"), std::string::npos) << print(p);
}

TEST(LaneReduce, EveryLaneOfAGroupGetsTheGroupsResult) {
  for (auto [op, lanes] : {std::pair{ScalarOp::Max, 4}, {ScalarOp::Add, 4}, {ScalarOp::Add, 32},
                           {ScalarOp::Min, 2}, {ScalarOp::Max, 8}}) {
    KernelProgram p = program(op, lanes);
    Bindings b;
    make_random_inputs(p, b, 7);
    interpret(p, b);
    const auto& x = b.tensors.at("X").data;
    const auto& out = b.tensors.at("out").data;
    for (int t = 0; t < 64; ++t) {
      const int first = t / lanes * lanes;
      double want = x[size_t(first)];
      for (int l = first + 1; l < first + lanes; ++l) want = eval_scalar_op(op, want, x[size_t(l)]);
      // out is f32: the sum, formed in the same order, rounded once.
      ASSERT_EQ(out[size_t(t)], double(float(want))) << "thread " << t << " lanes " << lanes;
    }
  }
}

TEST(LaneReduce, RefusedOutsideKernelIrAndForOddGroups) {
  EXPECT_THROW(verify(program(ScalarOp::Max, 3)), Error);
  EXPECT_THROW(verify(program(ScalarOp::Max, 64)), Error);
  EXPECT_THROW(verify(program(ScalarOp::Sub, 4)), Error);
  TileProgram t;
  t.tensors = {decl("X", Expr(4), TensorRole::Input), decl("out", Expr(4), TensorRole::Output)};
  t.ops.push_back(TileOp{"op", {"X"}, "out",
                         {Stmt::For("i", Expr(4), LoopKind::Parallel, "i",
                                    {Stmt::Load("x", "X", {v("i")}),
                                     Stmt::LaneReduce("r", ScalarOp::Add, Operand::value("x"), 4),
                                     Stmt::Write("out", {v("i")}, Operand::value("r"))})}});
  try {
    verify(t);
    ADD_FAILURE() << "lane_reduce accepted in Tile IR";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lane_reduce appears only in Kernel IR"), std::string::npos)
        << e.what();
  }
}

TEST(LaneReduce, InterpreterRefusesPartOfAWarp) {
  KernelProgram p = program(ScalarOp::Add, 4, {Stmt::If(v("threadIdx.x") % 32 < 16, {})});
  Bindings b;
  make_random_inputs(p, b, 3);
  try {
    interpret(p, b);
    ADD_FAILURE() << "a lane_reduce under a lane-dependent If ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lane_reduce reached by 16 of the 32 lanes"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
