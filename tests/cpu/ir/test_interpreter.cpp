#include "ir/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ir/error.h"

namespace loom {
namespace {

Expr v(const char* name) { return Expr::var(name); }
Operand val(const char* name) { return Operand::value(name); }

TensorDecl decl(std::string name, DType dt, std::vector<Expr> shape, TensorRole role) {
  TensorDecl t;
  t.name = std::move(name);
  t.dtype = dt;
  t.shape = std::move(shape);
  t.role = role;
  return t;
}

// A [M, K], B [N, K] (B used transposed, as linear layers store it), C [M, N].
void declare_matmul(ProgramBase& p, DType in, DType out) {
  p.tensors = {decl("A", in, {v("M"), v("K")}, TensorRole::Input),
               decl("B", in, {v("N"), v("K")}, TensorRole::Input),
               decl("C", out, {v("M"), v("N")}, TensorRole::Output)};
  p.symbols = {"M", "N", "K"};
}

Block matmul_cell(Expr m, Expr n) {
  return {Stmt::Init("acc0", 0.0),
          Stmt::For("k", v("K"), LoopKind::Reduce, "k",
                    {Stmt::Load("in0", "A", {m, v("k")}), Stmt::Load("in1", "B", {n, v("k")}),
                     Stmt::Compute("v0", ScalarOp::Mul, {val("in0"), val("in1")}),
                     Stmt::Accum("acc0", val("v0"))}),
          Stmt::Write("C", {m, n}, val("acc0"))};
}

LoopProgram loop_matmul(DType in = DType::F32, DType out = DType::F32) {
  LoopProgram p;
  declare_matmul(p, in, out);
  p.ops.push_back(LoopOp{"matmul", {"A", "B"}, "C",
                         {Stmt::For("m", v("M"), LoopKind::Parallel, "m",
                                    {Stmt::For("n", v("N"), LoopKind::Parallel, "n",
                                               matmul_cell(v("m"), v("n")))})}});
  return p;
}

// m split by 4 into grid x thread loops; `guarded` adds the bounds guard that a tiling
// pass must emit when 4 does not divide M.
TileProgram tile_matmul(bool guarded) {
  TileProgram p;
  declare_matmul(p, DType::F32, DType::F32);
  Expr m = v("m_b") * 4 + v("m_t");
  Block cell = matmul_cell(m, v("n"));
  Block n_loop = {Stmt::For("n", v("N"), LoopKind::Parallel, "n",
                            guarded ? Block{Stmt::If(m < v("M"), cell)} : cell)};
  p.ops.push_back(TileOp{
      "matmul", {"A", "B"}, "C",
      {Stmt::For("m_b", ceil_div(v("M"), 4), LoopKind::Parallel, "m",
                 {Stmt::For("m_t", 4, LoopKind::Parallel, "m", n_loop, Tier::Thread)},
                 Tier::Grid)}});
  return p;
}

// One block per (4 rows of C, 4 columns of C), 16 threads each; flat offsets.
KernelProgram kernel_matmul() {
  KernelProgram p;
  declare_matmul(p, DType::F32, DType::F32);
  KernelOp k;
  k.name = "k_matmul";
  k.params = {"A", "B", "C", "M", "N", "K"};
  k.grid[0] = ceil_div(v("N"), 4);
  k.grid[1] = ceil_div(v("M"), 4);
  k.block_threads = 16;
  Expr m = v("m"), n = v("n"), kk = v("k");
  k.body = {Stmt::Let("m", v("blockIdx.y") * 4 + v("threadIdx.x") / 4),
            Stmt::Let("n", v("blockIdx.x") * 4 + v("threadIdx.x") % 4),
            Stmt::If(m < v("M") && n < v("N"),
                     {Stmt::Init("acc0", 0.0),
                      Stmt::For("k", v("K"), LoopKind::Reduce, "k",
                                {Stmt::Load("in0", "A", {m * v("K") + kk}),
                                 Stmt::Load("in1", "B", {n * v("K") + kk}),
                                 Stmt::Atom("fma_f32", "acc0", {val("in0"), val("in1")})}),
                      Stmt::Write("C", {m * v("N") + n}, val("acc0"))})};
  p.kernels.push_back(k);
  return p;
}

Bindings matmul_inputs(const ProgramBase& p, int64_t M, int64_t N, int64_t K, uint64_t seed) {
  Bindings b;
  b.symbols = {{"M", M}, {"N", N}, {"K", K}};
  make_random_inputs(p, b, seed);
  return b;
}

// Naive triple loop in double, C[m, n] = sum_k A[m, k] * B[n, k].
std::vector<double> reference(const Bindings& b) {
  const HostTensor& A = b.tensors.at("A");
  const HostTensor& B = b.tensors.at("B");
  int64_t M = A.shape[0], K = A.shape[1], N = B.shape[0];
  std::vector<double> c(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += A.data[size_t(m * K + k)] * B.data[size_t(n * K + k)];
      c[size_t(m * N + n)] = s;
    }
  return c;
}

void expect_matches_reference(const Bindings& b) {
  std::vector<double> ref = reference(b);
  const HostTensor& C = b.tensors.at("C");
  ASSERT_EQ(C.data.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(C.data[i], double(float(ref[i])), 1e-6) << "element " << i;
}

template <class P>
std::string error_of(const P& p, Bindings& b) {
  try {
    interpret(p, b);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Interpreter, LoopMatmulMatchesNaiveTripleLoop) {
  LoopProgram p = loop_matmul();
  Bindings b = matmul_inputs(p, 5, 7, 3, 1);
  EXPECT_TRUE(std::isnan(b.tensors.at("C").data[0]));
  interpret(p, b);
  EXPECT_EQ(b.tensors.at("C").shape, (std::vector<int64_t>{5, 7}));
  expect_matches_reference(b);
}

TEST(Interpreter, RandomInputsAreSeededBoundedAndRounded) {
  LoopProgram p = loop_matmul(DType::BF16, DType::F32);
  Bindings a = matmul_inputs(p, 5, 7, 3, 42), b = matmul_inputs(p, 5, 7, 3, 42);
  Bindings c = matmul_inputs(p, 5, 7, 3, 43);
  EXPECT_EQ(a.tensors.at("A").data, b.tensors.at("A").data);
  EXPECT_NE(a.tensors.at("A").data, c.tensors.at("A").data);
  for (double x : a.tensors.at("B").data) {
    EXPECT_GE(x, -1.0);
    EXPECT_LE(x, 1.0);
    EXPECT_EQ(x, round_to_dtype(DType::BF16, x));
  }
  for (double x : a.tensors.at("C").data) EXPECT_TRUE(std::isnan(x));
}

TEST(Interpreter, WriteRoundsToBf16Output) {
  LoopProgram p = loop_matmul(DType::F32, DType::BF16);
  Bindings b = matmul_inputs(p, 5, 7, 3, 2);
  interpret(p, b);
  std::vector<double> ref = reference(b);
  const HostTensor& C = b.tensors.at("C");
  int differs = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(C.data[i], round_to_dtype(DType::BF16, ref[i])) << "element " << i;
    differs += C.data[i] != ref[i];
  }
  EXPECT_GT(differs, 0) << "bf16 rounding should change some of the f64 sums";
}

TEST(Interpreter, LoadOfTf32TensorRoundsToTf32) {
  LoopProgram p;
  p.tensors = {decl("X", DType::TF32, {3}, TensorRole::Input),
               decl("Y", DType::F32, {3}, TensorRole::Output)};
  p.ops.push_back(LoopOp{"copy", {"X"}, "Y",
                         {Stmt::For("i", 3, LoopKind::Parallel, "i",
                                    {Stmt::Load("x", "X", {v("i")}),
                                     Stmt::Write("Y", {v("i")}, val("x"))})}});
  Bindings b;
  // 1 + 2^-12 is below tf32's 10-bit mantissa; 1 + 2^-11 is a tie, rounded away.
  b.tensors["X"] = HostTensor{DType::TF32, {3}, {1.0 + 0x1p-12, 1.0 + 0x1p-11, -0.75}};
  interpret(p, b);
  const std::vector<double>& y = b.tensors.at("Y").data;
  EXPECT_EQ(y[0], 1.0);
  EXPECT_EQ(y[1], 1.0 + 0x1p-10);
  EXPECT_EQ(y[2], -0.75);
}

TEST(Interpreter, MissingGuardIsCaughtByBoundsCheck) {
  // M = 5 tiled by 4: the second grid block's rows 5..7 do not exist.
  TileProgram bad = tile_matmul(false);
  Bindings b = matmul_inputs(bad, 5, 7, 3, 3);
  std::string msg = error_of(bad, b);
  EXPECT_NE(msg.find("tensor A"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 0 (m_b * 4 + m_t) = 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[5, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("op matmul"), std::string::npos) << msg;

  TileProgram good = tile_matmul(true);
  Bindings g = matmul_inputs(good, 5, 7, 3, 3);
  interpret(good, g);
  expect_matches_reference(g);
}

TEST(Interpreter, OutOfRangeWriteIsCaught) {
  LoopProgram p = loop_matmul();
  p.ops[0].body[0].body[0].body[2] = Stmt::Write("C", {v("m"), v("n") + 1}, val("acc0"));
  Bindings b = matmul_inputs(p, 2, 3, 2, 4);
  std::string msg = error_of(p, b);
  EXPECT_NE(msg.find("C[m, n + 1] = acc0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 1 (n + 1) = 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
}

TEST(Interpreter, KernelProgramComputesTheSameMatmul) {
  KernelProgram p = kernel_matmul();
  Bindings b = matmul_inputs(p, 5, 7, 3, 5);
  interpret(p, b);
  expect_matches_reference(b);
  // Same inputs through the Loop IR program give bit-identical results.
  LoopProgram l = loop_matmul();
  Bindings lb = b;
  lb.tensors.erase("C");
  interpret(l, lb);
  EXPECT_EQ(lb.tensors.at("C").data, b.tensors.at("C").data);
}

TEST(Interpreter, KernelFlatOffsetOutOfRangeIsCaught) {
  KernelProgram p = kernel_matmul();
  p.kernels[0].body[2].cond = v("m") < v("M") + 1 && v("n") < v("N");  // one row too many
  Bindings b = matmul_inputs(p, 5, 7, 3, 6);
  std::string msg = error_of(p, b);
  EXPECT_NE(msg.find("kernel k_matmul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor A of shape [5, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset m * K + k = 15"), std::string::npos) << msg;
}

TEST(Interpreter, UnknownAtomIsAnError) {
  KernelProgram p = kernel_matmul();
  p.kernels[0].body[2].body[1].body[2].atom = "mma_m16n8k16";
  Bindings b = matmul_inputs(p, 4, 4, 4, 7);
  EXPECT_NE(error_of(p, b).find("interpreter: unknown atom mma_m16n8k16"), std::string::npos);
}

TEST(Interpreter, BindingsAreChecked) {
  LoopProgram p = loop_matmul();
  Bindings no_sym = matmul_inputs(p, 5, 7, 3, 8);
  no_sym.symbols.erase("K");
  EXPECT_NE(error_of(p, no_sym).find("symbol K has no value"), std::string::npos);

  Bindings no_input = matmul_inputs(p, 5, 7, 3, 8);
  no_input.tensors.erase("B");
  EXPECT_NE(error_of(p, no_input).find("input tensor B has no data"), std::string::npos);

  Bindings wrong_shape = matmul_inputs(p, 5, 7, 3, 8);
  wrong_shape.symbols["M"] = 6;
  std::string msg = error_of(p, wrong_shape);
  EXPECT_NE(msg.find("tensor A is declared with shape [6, 3] but its HostTensor has shape [5, 3]"),
            std::string::npos)
      << msg;
}

TEST(Interpreter, ScalarsAreLexicallyScoped) {
  // An inner definition shadows the outer one only inside its block.
  LoopProgram p;
  p.tensors = {decl("Y", DType::F32, {2}, TensorRole::Output)};
  p.ops.push_back(LoopOp{"scope", {}, "Y",
                         {Stmt::Init("s", 1.0),
                          Stmt::For("i", 2, LoopKind::Parallel, "i",
                                    {Stmt::If(v("i") < 1, {Stmt::Init("s", 5.0)}),
                                     Stmt::Write("Y", {v("i")}, val("s"))})}});
  Bindings b;
  interpret(p, b);
  EXPECT_EQ(b.tensors.at("Y").data, (std::vector<double>{1.0, 1.0}));

  // A value defined inside an If is not visible after it.
  p.ops[0].body = {Stmt::If(Expr(1) < 2, {Stmt::Init("t", 2.0)}),
                   Stmt::Write("Y", {0}, val("t"))};
  Bindings c;
  EXPECT_NE(error_of(p, c).find("value t is used before it is defined"), std::string::npos);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

Stmt at(Stmt s, std::vector<Expr> dst_index) {
  s.dst_index = std::move(dst_index);
  return s;
}

Stmt when(Stmt s, Expr pred) {
  s.pred = std::move(pred);
  return s;
}

Stmt reg_loop(const char* var, int64_t extent, Block body) {
  return Stmt::For(var, extent, LoopKind::Parallel, var, std::move(body), Tier::Register);
}

// C = A B^T with a FM x FN register tile per grid cell: per k, load a[FM] and b[FN]
// (predicated at the M/N edges) and accumulate their outer product into acc[FM, FN].
TileProgram tile_outer_product(int64_t FM, int64_t FN, bool predicated) {
  TileProgram p;
  declare_matmul(p, DType::F32, DType::F32);
  Expr m = v("mb") * FM + v("i"), n = v("nb") * FN + v("j");
  Stmt la = at(Stmt::Load("a", "A", {m, v("k")}), {v("i")});
  Stmt lb = at(Stmt::Load("b", "B", {n, v("k")}), {v("j")});
  if (predicated) {
    la.pred = m < v("M");
    lb.pred = n < v("N");
  }
  Block cell = {
      Stmt::Alloc("acc", {FM, FN}), Stmt::Alloc("a", {FM}), Stmt::Alloc("b", {FN}),
      reg_loop("i", FM, {reg_loop("j", FN, {at(Stmt::Init("acc", 0.0), {v("i"), v("j")})})}),
      Stmt::For("k", v("K"), LoopKind::Reduce, "k",
                {reg_loop("i", FM, {la}), reg_loop("j", FN, {lb}),
                 reg_loop("i", FM,
                          {reg_loop("j", FN,
                                    {Stmt::Compute("t", ScalarOp::Mul,
                                                   {Operand::value("a", {v("i")}),
                                                    Operand::value("b", {v("j")})}),
                                     at(Stmt::Accum("acc", val("t")), {v("i"), v("j")})})})}),
      reg_loop("i", FM,
               {reg_loop("j", FN,
                         {Stmt::If(m < v("M") && n < v("N"),
                                   {Stmt::Write("C", {m, n},
                                                Operand::value("acc", {v("i"), v("j")}))})})})};
  p.ops.push_back(TileOp{"matmul", {"A", "B"}, "C",
                         {Stmt::For("mb", ceil_div(v("M"), FM), LoopKind::Parallel, "m",
                                    {Stmt::For("nb", ceil_div(v("N"), FN), LoopKind::Parallel,
                                               "n", cell, Tier::Grid)},
                                    Tier::Grid)}});
  return p;
}

TEST(InterpreterTile, RegisterOuterProductMatchesNaiveMatmul) {
  TileProgram p = tile_outer_product(4, 2, true);
  verify(p);
  Bindings b = matmul_inputs(p, 7, 5, 6, 21);
  interpret(p, b);
  expect_matches_reference(b);
  // Same summation order as Loop IR: bit-identical.
  Bindings l = b;
  l.tensors.erase("C");
  interpret(loop_matmul(), l);
  EXPECT_EQ(l.tensors.at("C").data, b.tensors.at("C").data);
}

TEST(InterpreterTile, PredicatedLoadsReturnZeroWithoutTouchingMemory) {
  // Without the predicates the edge cells read past A and B...
  TileProgram bad = tile_outer_product(4, 2, false);
  Bindings b = matmul_inputs(bad, 7, 5, 6, 22);
  std::string msg = error_of(bad, b);
  EXPECT_NE(msg.find("index 0 (nb * 2 + j) = 5 is out of range for tensor B"), std::string::npos)
      << msg;
  // ...and with them an out-of-range load yields 0 (no bounds error).
  TileProgram p;
  p.tensors = {decl("X", DType::F32, {3}, TensorRole::Input),
               decl("Y", DType::F32, {6}, TensorRole::Output)};
  p.ops.push_back(TileOp{"shift", {"X"}, "Y",
                         {Stmt::For("i", 6, LoopKind::Parallel, "i",
                                    {when(Stmt::Load("x", "X", {v("i") - 2}),
                                          Expr(2) <= v("i") && v("i") - 2 < 3),
                                     Stmt::Write("Y", {v("i")}, val("x"))})}});
  Bindings c;
  c.tensors["X"] = HostTensor{DType::F32, {3}, {1.5, -2.0, 3.25}};
  interpret(p, c);
  EXPECT_EQ(c.tensors.at("Y").data, (std::vector<double>{0, 0, 1.5, -2.0, 3.25, 0}));
}

// Y[r, :] = X[r, :] through a register array a[2, 4], one vector load and one vector
// store of 4 per row.
TileProgram vector_copy(int64_t first, int width) {
  TileProgram p;
  p.tensors = {decl("X", DType::F32, {2, 4}, TensorRole::Input),
               decl("Y", DType::F32, {2, 4}, TensorRole::Output)};
  Stmt load = at(Stmt::Load("a", "X", {v("r"), 0}), {v("r"), first});
  load.width = width;
  Stmt store = Stmt::Write("Y", {v("r"), 0}, Operand::value("a", {v("r"), first}));
  store.width = width;
  p.ops.push_back(TileOp{"copy", {"X"}, "Y",
                         {Stmt::Alloc("a", {2, 4}),
                          Stmt::For("r", 2, LoopKind::Parallel, "r", {load, store})}});
  return p;
}

TEST(InterpreterTile, VectorLoadAndStoreMoveConsecutiveElements) {
  TileProgram p = vector_copy(0, 4);
  verify(p);
  Bindings b;
  b.tensors["X"] = HostTensor{DType::F32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}};
  interpret(p, b);
  EXPECT_EQ(b.tensors.at("Y").data, b.tensors.at("X").data);

  // A vector starting at register element 2 of 4 runs off the array.
  TileProgram over = vector_copy(2, 4);
  Bindings c = b;
  std::string msg = error_of(over, c);
  EXPECT_NE(msg.find("register array a[2, 4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 1 (2) = 2 (+3 for the vector)"), std::string::npos) << msg;

  // A vector of 4 from column 1 runs off the tensor row.
  TileProgram row = vector_copy(0, 4);
  row.ops[0].body[1].body[0].index = {v("r"), 1};
  Bindings d = b;
  msg = error_of(row, d);
  EXPECT_NE(msg.find("index 1 (1) = 1 (+3 for the vector) is out of range for tensor X"),
            std::string::npos)
      << msg;
}

TEST(InterpreterTile, RegisterArraysStartAsNaNAndAreChecked) {
  TileProgram p;
  p.tensors = {decl("Y", DType::F32, {2}, TensorRole::Output)};
  p.ops.push_back(TileOp{"regs", {}, "Y",
                         {Stmt::Alloc("r", {2}), at(Stmt::Init("r", 4.0), {1}),
                          Stmt::For("i", 2, LoopKind::Parallel, "i",
                                    {Stmt::Write("Y", {v("i")}, Operand::value("r", {v("i")}))})}});
  Bindings b;
  interpret(p, b);
  EXPECT_TRUE(std::isnan(b.tensors.at("Y").data[0]));
  EXPECT_EQ(b.tensors.at("Y").data[1], 4.0);

  p.ops[0].body[1].dst_index = {2};
  Bindings c;
  std::string msg = error_of(p, c);
  EXPECT_NE(msg.find("index 0 (2) = 2 is out of range for register array r[2]"),
            std::string::npos)
      << msg;

  p.ops[0].body[1].dst_index = {};
  Bindings d;
  msg = error_of(p, d);
  EXPECT_NE(msg.find("`r` is a register array; assign one element"), std::string::npos) << msg;
}

TEST(InterpreterTile, AtomicWriteAddsRoundedToTheTensorDtype) {
  TileProgram p;
  p.tensors = {decl("Y", DType::BF16, {1}, TensorRole::Output)};
  Stmt add = Stmt::Write("Y", {0}, Operand::constant(1.0 / 256));
  add.atomic_add = true;
  p.ops.push_back(TileOp{"acc", {}, "Y", {Stmt::For("i", 3, LoopKind::Parallel, "i", {add})}});
  Bindings b;
  b.tensors["Y"] = HostTensor{DType::BF16, {1}, {1.0}};
  interpret(p, b);
  // bf16 has 8 bits of mantissa: 1 + 2^-8 rounds to even (1) each time.
  EXPECT_EQ(b.tensors.at("Y").data[0], 1.0);
  b.tensors["Y"].data[0] = 0.0;
  interpret(p, b);
  EXPECT_EQ(b.tensors.at("Y").data[0], 3.0 / 256);
}

// C = A B^T staged through shared slabs As [BM, BK] and Bs [BN, BK] per k step; the
// slabs are zero-filled past the edges of A and B, so no guard is needed in the
// reduction. `pad` and `swizzle` change only the shared layouts.
TileProgram tile_staged(int64_t BM, int64_t BN, int64_t BK, int64_t pad = 0, Swizzle sw = {}) {
  TileProgram p;
  declare_matmul(p, DType::F32, DType::F32);
  TensorDecl as = decl("As", DType::F32, {BM, BK}, TensorRole::Shared);
  TensorDecl bs = decl("Bs", DType::F32, {BN, BK}, TensorRole::Shared);
  as.pad = bs.pad = pad;
  as.swizzle = bs.swizzle = sw;
  p.tensors.push_back(as);
  p.tensors.push_back(bs);
  Expr m = v("mb") * BM + v("i"), n = v("nb") * BN + v("j");
  Expr k0 = v("ko") * BK;
  Block inner = {
      reg_loop("i", BM,
               {reg_loop("j", BN,
                         {Stmt::For("kk", BK, LoopKind::Reduce, "k",
                                    {Stmt::Load("a", "As", {v("i"), v("kk")}),
                                     Stmt::Load("b", "Bs", {v("j"), v("kk")}),
                                     Stmt::Compute("t", ScalarOp::Mul, {val("a"), val("b")}),
                                     at(Stmt::Accum("acc", val("t")), {v("i"), v("j")})})})})};
  auto copy = [&](const char* shared, int64_t rows, const char* src, Expr row0) {
    StageCopy c;
    c.shared = shared;
    c.vars = {"r", "c"};
    c.extents = {rows, BK};
    c.src = src;
    c.src_index = {row0 + v("r"), k0 + v("c")};
    return c;
  };
  Stmt stage = Stmt::Stage(
      "sync", {copy("As", BM, "A", v("mb") * BM), copy("Bs", BN, "B", v("nb") * BN)}, inner);
  Block cell = {
      Stmt::Alloc("acc", {BM, BN}),
      reg_loop("i", BM, {reg_loop("j", BN, {at(Stmt::Init("acc", 0.0), {v("i"), v("j")})})}),
      Stmt::For("ko", ceil_div(v("K"), BK), LoopKind::Reduce, "k", {stage}),
      reg_loop("i", BM,
               {reg_loop("j", BN,
                         {Stmt::If(m < v("M") && n < v("N"),
                                   {Stmt::Write("C", {m, n},
                                                Operand::value("acc", {v("i"), v("j")}))})})})};
  p.ops.push_back(TileOp{"matmul", {"A", "B"}, "C",
                         {Stmt::For("mb", ceil_div(v("M"), BM), LoopKind::Parallel, "m",
                                    {Stmt::For("nb", ceil_div(v("N"), BN), LoopKind::Parallel,
                                               "n", cell, Tier::Grid)},
                                    Tier::Grid)}});
  return p;
}

TEST(InterpreterTile, StageZeroFillsPastTheEdges) {
  // K = 11 is not a multiple of BK = 4, and M, N are not multiples of the tile.
  TileProgram p = tile_staged(4, 4, 4);
  verify(p);
  Bindings b = matmul_inputs(p, 9, 6, 11, 31);
  EXPECT_EQ(b.tensors.count("As"), 0u) << "shared tensors are not bindings";
  interpret(p, b);
  expect_matches_reference(b);
  EXPECT_EQ(b.tensors.count("As"), 0u);
}

TEST(InterpreterTile, StageBoxLargerThanItsSharedTensorIsAnError) {
  TileProgram p = tile_staged(4, 4, 4);
  Stmt* stage = nullptr;
  walk(p.ops[0].body, [&](Stmt& s) {
    if (s.kind == StmtKind::Stage) stage = &s;
  });
  ASSERT_NE(stage, nullptr);
  stage->copies[0].extents[1] = 5;
  Bindings b = matmul_inputs(p, 4, 4, 4, 32);
  std::string msg = error_of(p, b);
  EXPECT_NE(msg.find("stage box of As is 5 = 5 along dimension 1"), std::string::npos) << msg;
}

TEST(InterpreterTile, PaddedAndSwizzledStagesGiveIdenticalResults) {
  TileProgram plain = tile_staged(4, 8, 8);
  TileProgram padded = tile_staged(4, 8, 8, 3);
  TileProgram swizzled = tile_staged(4, 8, 8, 0, Swizzle{1, 1, 2});
  EXPECT_NE(swizzled.tensors[3].physical(8), 8);  // the swizzle does move elements
  verify(padded);
  verify(swizzled);
  Bindings a = matmul_inputs(plain, 10, 13, 21, 33), b = a, c = a;
  interpret(plain, a);
  interpret(padded, b);
  interpret(swizzled, c);
  expect_matches_reference(a);
  EXPECT_EQ(a.tensors.at("C").data, b.tensors.at("C").data);
  EXPECT_EQ(a.tensors.at("C").data, c.tensors.at("C").data);
}

TEST(InterpreterTile, UnstagedSharedReadIsCaught) {
  // Reading a shared tensor outside any stage (nothing wrote it) is an error, not NaN.
  TileProgram p = tile_staged(4, 4, 4);
  Block& cell = p.ops[0].body[0].body[0].body;
  cell.insert(cell.begin(), Stmt::Load("early", "As", {0, 0}));
  Bindings b = matmul_inputs(p, 4, 4, 4, 34);
  std::string msg = error_of(p, b);
  EXPECT_NE(msg.find("uninitialized shared read"), std::string::npos) << msg;
}

TEST(InterpreterTile, LetBindsInTileIr) {
  // Rasterization binds the tile coordinates with lets.
  TileProgram p = tile_outer_product(2, 2, true);
  Stmt& mb = p.ops[0].body[0];
  mb.var = "mb_raw";
  mb.body.insert(mb.body.begin(), Stmt::Let("mb", v("mb_raw")));
  verify(p);
  Bindings b = matmul_inputs(p, 5, 3, 4, 35);
  interpret(p, b);
  expect_matches_reference(b);
}

}  // namespace
}  // namespace loom
