#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/program.h"

namespace loom {
namespace {

Expr v(const char* name) { return Expr::var(name); }
Operand val(const char* name) { return Operand::value(name); }

TensorDecl decl(std::string name, std::vector<Expr> shape, TensorRole role) {
  TensorDecl t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.role = role;
  return t;
}

void declare_matmul(ProgramBase& p) {
  p.tensors = {decl("A", {v("M"), v("K")}, TensorRole::Input),
               decl("B", {v("N"), v("K")}, TensorRole::Input),
               decl("C", {v("M"), v("N")}, TensorRole::Output)};
  p.symbols = {"M", "N", "K"};
}

Block reduce_body(std::vector<Expr> a_idx, std::vector<Expr> b_idx) {
  return {Stmt::Load("in0", "A", std::move(a_idx)), Stmt::Load("in1", "B", std::move(b_idx)),
          Stmt::Compute("v0", ScalarOp::Mul, {val("in0"), val("in1")}),
          Stmt::Accum("acc0", val("v0"))};
}

// C[m, n] = sum_k A[m, k] * B[n, k]
LoopProgram loop_matmul() {
  LoopProgram p;
  declare_matmul(p);
  Block inner = {Stmt::Init("acc0", 0.0),
                 Stmt::For("k", v("K"), LoopKind::Reduce, "k",
                           reduce_body({v("m"), v("k")}, {v("n"), v("k")})),
                 Stmt::Write("C", {v("m"), v("n")}, val("acc0"))};
  p.ops.push_back(LoopOp{"matmul", {"A", "B"}, "C",
                         {Stmt::For("m", v("M"), LoopKind::Parallel, "m",
                                    {Stmt::For("n", v("N"), LoopKind::Parallel, "n", inner)})}});
  return p;
}

// The same matmul with m split into grid x thread loops (guarded).
TileProgram tile_matmul() {
  TileProgram p;
  declare_matmul(p);
  Expr m = v("m_b") * 4 + v("m_t");
  Block inner = {Stmt::If(m < v("M"),
                          {Stmt::Init("acc0", 0.0),
                           Stmt::For("k", v("K"), LoopKind::Reduce, "k",
                                     reduce_body({m, v("k")}, {v("n"), v("k")})),
                           Stmt::Write("C", {m, v("n")}, val("acc0"))})};
  p.ops.push_back(TileOp{
      "matmul", {"A", "B"}, "C",
      {Stmt::For("m_b", ceil_div(v("M"), 4), LoopKind::Parallel, "m",
                 {Stmt::For("m_t", 4, LoopKind::Parallel, "m",
                            {Stmt::For("n", v("N"), LoopKind::Parallel, "n", inner)},
                            Tier::Thread)},
                 Tier::Grid)}});
  return p;
}

KernelProgram kernel_matmul() {
  KernelProgram p;
  declare_matmul(p);
  KernelOp k;
  k.name = "k_matmul";
  k.params = {"A", "B", "C", "M", "N", "K"};
  k.grid[0] = v("N");
  k.grid[1] = ceil_div(v("M"), 4);
  k.block_threads = 4;
  Expr m = v("m"), n = v("n");
  k.body = {Stmt::Let("m", v("blockIdx.y") * 4 + v("threadIdx.x")),
            Stmt::Let("n", v("blockIdx.x")),
            Stmt::If(m < v("M"),
                     {Stmt::Init("acc0", 0.0),
                      Stmt::For("k", v("K"), LoopKind::Reduce, "k",
                                {Stmt::Load("in0", "A", {m * v("K") + v("k")}),
                                 Stmt::Load("in1", "B", {n * v("K") + v("k")}),
                                 Stmt::Atom("fma_f32", "acc0", {val("in0"), val("in1")})}),
                      Stmt::Write("C", {m * v("N") + n}, val("acc0"))})};
  p.kernels.push_back(k);
  return p;
}

// The innermost reduce loop's body of the loop and tile programs above.
Block& loop_reduce(LoopProgram& p) { return p.ops[0].body[0].body[0].body[1].body; }
Block& tile_reduce(TileProgram& p) {
  return p.ops[0].body[0].body[0].body[0].body[0].body[1].body;
}

template <class P>
std::string error_of(const P& p) {
  try {
    verify(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Expects verify(p) to throw a message containing every given part.
#define EXPECT_REJECTED(p, ...)                                                         \
  do {                                                                                  \
    std::string msg = error_of(p);                                                      \
    EXPECT_FALSE(msg.empty()) << "verifier accepted the program";                       \
    for (const char* part : {__VA_ARGS__})                                              \
      EXPECT_NE(msg.find(part), std::string::npos) << "missing `" << part << "` in: " << msg; \
  } while (0)

TEST(Verify, AcceptsWellFormedProgramsOfEachLevel) {
  EXPECT_NO_THROW(verify(loop_matmul()));
  EXPECT_NO_THROW(verify(tile_matmul()));
  EXPECT_NO_THROW(verify(kernel_matmul()));
}

TEST(Verify, RejectsUndefinedValue) {
  LoopProgram p = loop_matmul();
  loop_reduce(p)[2] = Stmt::Compute("v0", ScalarOp::Mul, {val("in0"), val("in2")});
  EXPECT_REJECTED(p, "Loop IR", "op matmul", "v0 = multiply(in0, in2)", "`in2`",
                  "before it is defined");
}

TEST(Verify, RejectsValueUsedOutsideItsScope) {
  LoopProgram p = loop_matmul();
  // in0 is defined inside the k loop; the write after the loop cannot see it.
  p.ops[0].body[0].body[0].body[2] = Stmt::Write("C", {v("m"), v("n")}, val("in0"));
  EXPECT_REJECTED(p, "C[m, n] = in0", "`in0`");
}

TEST(Verify, RejectsWrongRank) {
  LoopProgram p = loop_matmul();
  loop_reduce(p)[0] = Stmt::Load("in0", "A", {v("m")});
  EXPECT_REJECTED(p, "in0 = load A[m]", "1 indices", "needs 2");
  KernelProgram k = kernel_matmul();
  k.kernels[0].body[2].body[1].body[0] = Stmt::Load("in0", "A", {v("m"), v("k")});
  EXPECT_REJECTED(k, "Kernel IR", "kernel k_matmul", "load A[m, k]", "flat");
}

TEST(Verify, RejectsLetInLoopIrAndAtomOutsideKernelIr) {
  LoopProgram p = loop_matmul();
  p.ops[0].body.insert(p.ops[0].body.begin(), Stmt::Let("z", 0));
  EXPECT_REJECTED(p, "Loop IR", "let z = 0", "from Tile IR on");
  // Rasterization binds tile coordinates with lets in Tile IR.
  TileProgram lt = tile_matmul();
  lt.ops[0].body[0].body.insert(lt.ops[0].body[0].body.begin(), Stmt::Let("z", v("m_b") * 2));
  EXPECT_NO_THROW(verify(lt));
  TileProgram t = tile_matmul();
  tile_reduce(t)[3] = Stmt::Atom("fma_f32", "acc0", {val("in0"), val("in1")});
  EXPECT_REJECTED(t, "Tile IR", "acc0 <- fma_f32(in0, in1)", "only in Kernel IR");
}

TEST(Verify, RejectsTiersInLoopIr) {
  LoopProgram p = loop_matmul();
  p.ops[0].body[0].tier = Tier::Grid;
  EXPECT_REJECTED(p, "for m in 0..M grid", "no tier");
}

TEST(Verify, RejectsGridLoopInsideThreadLoop) {
  TileProgram p = tile_matmul();
  std::swap(p.ops[0].body[0].tier, p.ops[0].body[0].body[0].tier);
  EXPECT_REJECTED(p, "Tile IR", "for m_t in 0..4 grid",
                  "grid loop may not be nested inside a thread");
  // A serial loop between them does not hide the inversion.
  TileProgram q = tile_matmul();
  Stmt& n_loop = q.ops[0].body[0].body[0].body[0];
  n_loop.body[0].body[1].tier = Tier::Register;  // the k loop
  n_loop.body[0].body[1].body = {Stmt::For("r", 1, LoopKind::Parallel, "r",
                                           n_loop.body[0].body[1].body, Tier::Thread)};
  EXPECT_REJECTED(q, "for r in 0..1 thread", "inside a register");
}

TEST(Verify, RejectsWriteToInput) {
  LoopProgram p = loop_matmul();
  p.ops[0].body[0].body[0].body.push_back(Stmt::Write("A", {v("m"), v("n")}, val("acc0")));
  EXPECT_REJECTED(p, "A[m, n] = acc0", "input tensor `A`");
  LoopProgram q = loop_matmul();
  q.ops[0].output = "A";
  EXPECT_REJECTED(q, "op matmul", "output `A` is an input");
}

TEST(Verify, RejectsAccumWithoutInit) {
  LoopProgram p = loop_matmul();
  p.ops[0].body[0].body[0].body[0] = Stmt::Load("acc0", "A", {v("m"), v("n")});
  EXPECT_REJECTED(p, "acc0 <- add(acc0, v0)", "not initialized by an Init");
}

TEST(Verify, RejectsComputeArity) {
  LoopProgram p = loop_matmul();
  loop_reduce(p)[2] = Stmt::Compute("v0", ScalarOp::Mul, {val("in0")});
  EXPECT_REJECTED(p, "multiply takes 2 operands, not 1");
}

TEST(Verify, RejectsOutOfScopeIndexVariables) {
  LoopProgram p = loop_matmul();
  loop_reduce(p)[0] = Stmt::Load("in0", "A", {v("m"), v("q")});
  EXPECT_REJECTED(p, "load A[m, q]", "`q`", "neither an enclosing loop");
  LoopProgram e = loop_matmul();
  e.ops[0].body[0].extent = v("n");
  EXPECT_REJECTED(e, "for m in 0..n", "loop extent uses `n`");
}

TEST(Verify, RejectsShadowingLoopVariables) {
  LoopProgram p = loop_matmul();
  p.ops[0].body[0].body[0].var = "m";
  EXPECT_REJECTED(p, "for m in 0..N", "already bound");
  LoopProgram s = loop_matmul();
  s.ops[0].body[0].var = "K";
  EXPECT_REJECTED(s, "for K in 0..M", "shadows a symbol");
}

TEST(Verify, RejectsUndeclaredTensorAndUnwrittenOutput) {
  LoopProgram p = loop_matmul();
  loop_reduce(p)[1] = Stmt::Load("in1", "Z", {v("n"), v("k")});
  EXPECT_REJECTED(p, "tensor `Z` is not declared");
  LoopProgram q = loop_matmul();
  q.tensors.push_back(decl("D", {v("M"), v("N")}, TensorRole::Temp));
  q.ops[0].output = "D";
  EXPECT_REJECTED(q, "never writes its output `D`");
}

TEST(Verify, RejectsOutputOrTempThatNothingWrites) {
  LoopProgram p = loop_matmul();
  p.tensors.push_back(decl("t9", {v("M")}, TensorRole::Temp));
  EXPECT_REJECTED(p, "temp tensor `t9` is never written");
  KernelProgram k = kernel_matmul();
  k.tensors.push_back(decl("D", {v("M")}, TensorRole::Output));
  EXPECT_REJECTED(k, "Kernel IR", "output tensor `D` is never written");
}

TEST(Verify, KernelRules) {
  KernelProgram grid_loop = kernel_matmul();
  grid_loop.kernels[0].body[2].body[1].tier = Tier::Grid;
  EXPECT_REJECTED(grid_loop, "for k in 0..K grid", "Let bindings");

  KernelProgram threads = kernel_matmul();
  threads.kernels[0].block_threads = 2048;
  EXPECT_REJECTED(threads, "2048 threads", "1 to 1024");
  threads.kernels[0].block_threads = 0;
  EXPECT_REJECTED(threads, "0 threads");

  KernelProgram no_tensor = kernel_matmul();
  no_tensor.kernels[0].params = {"A", "C", "M", "N", "K"};
  EXPECT_REJECTED(no_tensor, "tensor `B`", "parameters");

  KernelProgram no_symbol = kernel_matmul();
  no_symbol.kernels[0].params = {"A", "B", "C", "M", "N"};
  EXPECT_REJECTED(no_symbol, "symbol `K`");

  KernelProgram builtin = kernel_matmul();
  builtin.kernels[0].body[0] = Stmt::Let("m", v("blockIdx.w"));
  EXPECT_REJECTED(builtin, "let m = blockIdx.w", "`blockIdx.w`");

  KernelProgram atom = kernel_matmul();
  atom.kernels[0].body[2].body[1].body[2].dst = "acc9";
  EXPECT_REJECTED(atom, "acc9 <- fma_f32(in0, in1)", "not defined");
}

}  // namespace
}  // namespace loom
