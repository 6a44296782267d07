#include <gtest/gtest.h>

#include "ir/program.h"

namespace loom {
namespace {

Expr v(const char* name) { return Expr::var(name); }

TensorDecl decl(std::string name, DType dt, std::vector<Expr> shape, TensorRole role) {
  TensorDecl t;
  t.name = std::move(name);
  t.dtype = dt;
  t.shape = std::move(shape);
  t.role = role;
  return t;
}

// The reduction body shared by the programs below.
Block matmul_reduce(Expr m, Expr n) {
  return {Stmt::Load("in0", "A", {m, v("k")}), Stmt::Load("in1", "B", {n, v("k")}),
          Stmt::Compute("v0", ScalarOp::Mul, {Operand::value("in0"), Operand::value("in1")}),
          Stmt::Accum("acc0", Operand::value("v0"))};
}

TEST(Print, LoopProgramGolden) {
  LoopProgram p;
  p.tensors = {decl("A", DType::F32, {4096, 4096}, TensorRole::Input),
               decl("B", DType::F32, {v("N"), v("K")}, TensorRole::Input),
               decl("C", DType::F32, {v("M"), v("N")}, TensorRole::Output),
               decl("t0", DType::F32, {v("M"), v("N")}, TensorRole::Temp)};
  p.symbols = {"M", "N", "K"};
  Block inner = {Stmt::Init("acc0", 0.0),
                 Stmt::For("k", v("K"), LoopKind::Reduce, "k", matmul_reduce(v("m"), v("n"))),
                 Stmt::Write("t0", {v("m"), v("n")}, Operand::value("acc0"))};
  p.ops.push_back(LoopOp{
      "matmul", {"A", "B"}, "t0",
      {Stmt::For("m", v("M"), LoopKind::Parallel, "m",
                 {Stmt::For("n", v("N"), LoopKind::Parallel, "n", inner)})}});
  EXPECT_EQ(print(p),
            "tensors:\n"
            "  A: f32[4096, 4096] input\n"
            "  B: f32[N, K] input\n"
            "  C: f32[M, N] output\n"
            "  t0: f32[M, N] temp\n"
            "symbols: M, N, K\n"
            "matmul = LoopOp(A, B) -> t0\n"
            "  for m in 0..M\n"
            "    for n in 0..N\n"
            "      acc0 = 0\n"
            "      for k in 0..K reduce\n"
            "        in0 = load A[m, k]\n"
            "        in1 = load B[n, k]\n"
            "        v0 = multiply(in0, in1)\n"
            "        acc0 <- add(acc0, v0)\n"
            "      t0[m, n] = acc0\n");
}

TEST(Print, TileProgramShowsTiersAxesGuardsAndImmediates) {
  TileProgram p;
  p.tensors = {decl("X", DType::BF16, {10}, TensorRole::Input),
               decl("Y", DType::F16, {10}, TensorRole::Output)};
  Expr i = v("i_b") * 4 + v("i_r");
  Block body = {Stmt::If(i < 10, {Stmt::Load("x", "X", {i}),
                                  Stmt::Compute("y", ScalarOp::Mul,
                                                {Operand::value("x"), Operand::constant(0.5)}),
                                  Stmt::Compute("z", ScalarOp::Relu, {Operand::value("y")}),
                                  Stmt::Write("Y", {i}, Operand::value("z"))})};
  Stmt reg = Stmt::For("i_r", 4, LoopKind::Parallel, "i", body, Tier::Register);
  reg.unroll = true;
  p.ops.push_back(TileOp{"relu", {"X"}, "Y",
                         {Stmt::For("i_b", 3, LoopKind::Parallel, "i", {reg}, Tier::Grid)}});
  EXPECT_EQ(print(p),
            "tensors:\n"
            "  X: bf16[10] input\n"
            "  Y: f16[10] output\n"
            "relu = TileOp(X) -> Y\n"
            "  for i_b in 0..3 grid  # i\n"
            "    for i_r in 0..4 register unroll  # i\n"
            "      if i_b * 4 + i_r < 10:\n"
            "        x = load X[i_b * 4 + i_r]\n"
            "        y = multiply(x, 0.5)\n"
            "        z = relu(y)\n"
            "        Y[i_b * 4 + i_r] = z\n");
}

TEST(Print, KernelProgramGolden) {
  KernelProgram p;
  p.tensors = {decl("A", DType::F32, {v("M"), v("K")}, TensorRole::Input),
               decl("B", DType::F32, {v("N"), v("K")}, TensorRole::Input),
               decl("C", DType::F32, {v("M"), v("N")}, TensorRole::Output)};
  p.symbols = {"M", "N", "K"};
  KernelOp k;
  k.name = "k_matmul";
  k.params = {"A", "B", "C", "M", "N", "K"};
  k.grid[0] = ceil_div(v("N"), 16);
  k.grid[1] = v("M");
  k.block_threads = 16;
  k.min_blocks_per_sm = 2;
  Expr m = v("m"), n = v("n");
  k.body = {Stmt::Let("m", v("blockIdx.y")),
            Stmt::Let("n", v("blockIdx.x") * 16 + v("threadIdx.x")),
            Stmt::If(n < v("N"),
                     {Stmt::Init("acc", -1.25),
                      Stmt::For("k", v("K"), LoopKind::Reduce, "k",
                                {Stmt::Load("a", "A", {m * v("K") + v("k")}),
                                 Stmt::Load("b", "B", {n * v("K") + v("k")}),
                                 Stmt::Atom("fma_f32", "acc",
                                            {Operand::value("a"), Operand::value("b")})}),
                      Stmt::Write("C", {m * v("N") + n}, Operand::value("acc"))})};
  p.kernels.push_back(k);
  EXPECT_EQ(print(p),
            "tensors:\n"
            "  A: f32[M, K] input\n"
            "  B: f32[N, K] input\n"
            "  C: f32[M, N] output\n"
            "symbols: M, N, K\n"
            "kernel k_matmul<<<grid((N + 15) / 16, M, 1), block(16)>>>(A, B, C, M, N, K)"
            " min_blocks=2\n"
            "  let m = blockIdx.y\n"
            "  let n = blockIdx.x * 16 + threadIdx.x\n"
            "  if n < N:\n"
            "    acc = -1.25\n"
            "    for k in 0..K reduce\n"
            "      a = load A[m * K + k]\n"
            "      b = load B[n * K + k]\n"
            "      acc <- fma_f32(a, b)\n"
            "    C[m * N + n] = acc\n");
}

TEST(Print, BlockIndentIsTwoSpacesPerLevel) {
  Block b = {Stmt::For("j", 2, LoopKind::Parallel, "j", {Stmt::Init("s", 3)})};
  EXPECT_EQ(print_block(b), "for j in 0..2\n  s = 3\n");
  EXPECT_EQ(print_block(b, 2), "    for j in 0..2\n      s = 3\n");
}

}  // namespace
}  // namespace loom
