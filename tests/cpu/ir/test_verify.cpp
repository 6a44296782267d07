#include <gtest/gtest.h>

#include "ir/error.h"
#include "gemm_kernels.h"
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

// ---- the constructs of the SIMT GEMM optimizations ---------------------------------

Stmt with_index(Stmt s, std::vector<Expr> dst_index) {
  s.dst_index = std::move(dst_index);
  return s;
}

// The tile matmul with `acc` as a one-element register array.
TileProgram tile_register_matmul() {
  TileProgram p = tile_matmul();
  Block& inner = p.ops[0].body[0].body[0].body[0].body[0].body;  // under the guard
  inner[0] = with_index(Stmt::Init("acc0", 0.0), {0});
  inner.insert(inner.begin(), Stmt::Alloc("acc0", {1}));
  inner[2].body[3] = with_index(Stmt::Accum("acc0", val("v0")), {0});
  inner[3].args[0] = Operand::value("acc0", {0});
  return p;
}

// A tile matmul that stages rows of A into a shared slab As[1, K] (K = 8 constant).
TileProgram tile_staged_matmul() {
  TileProgram p = tile_matmul();
  p.symbols = {"M", "N"};
  p.tensors[0].shape = {v("M"), 8};
  p.tensors[1].shape = {v("N"), 8};
  TensorDecl as = decl("As", {1, 8}, TensorRole::Shared);
  p.tensors.push_back(as);
  Stmt& n_loop = p.ops[0].body[0].body[0].body[0];
  Block& inner = n_loop.body[0].body;
  inner[1].extent = 8;
  inner[1].body[0] = Stmt::Load("in0", "As", {0, v("k")});
  StageCopy c;
  c.shared = "As";
  c.vars = {"r", "c"};
  c.extents = {1, 8};
  c.src = "A";
  c.src_index = {v("m_b") * 4 + v("m_t") + v("r"), v("c")};
  n_loop.body = {Stmt::Stage("sync", {c}, n_loop.body)};
  return p;
}

Block& k_body(TileProgram& p) {
  Stmt* k = nullptr;
  walk(p.ops[0].body, [&](Stmt& s) {
    if (s.kind == StmtKind::For && s.var == "k" && !k) k = &s;
  });
  return k->body;
}

Stmt& first_stage(TileProgram& p) {
  Stmt* st = nullptr;
  walk(p.ops[0].body, [&](Stmt& s) {
    if (s.kind == StmtKind::Stage && !st) st = &s;
  });
  return *st;
}

KernelProgram gemm(test::Staging st = test::Staging::Sync) {
  test::GemmKernelOptions o;
  o.staging = st;
  return test::gemm_kernel(o);
}

// The ko loop of gemm(): fills, [commit, wait,] barrier, compute, barrier.
Block& ko_loop(KernelProgram& p) { return p.kernels[0].body[8].body; }

TEST(Verify, AcceptsTheNewConstructsWhereTheyBelong) {
  EXPECT_NO_THROW(verify(tile_register_matmul()));
  EXPECT_NO_THROW(verify(tile_staged_matmul()));
  for (auto st : {test::Staging::Sync, test::Staging::CpAsync, test::Staging::Pipelined})
    EXPECT_NO_THROW(verify(gemm(st)));
}

TEST(Verify, LoopIrHasNoneOfTheNewConstructs) {
  LoopProgram p = loop_matmul();
  p.ops[0].body.insert(p.ops[0].body.begin(), Stmt::Alloc("r", {4}));
  EXPECT_REJECTED(p, "Loop IR", "alloc r[4]", "Alloc appears from Tile IR on");

  LoopProgram b = loop_matmul();
  loop_reduce(b).push_back(Stmt::Barrier());
  EXPECT_REJECTED(b, "barrier", "only in Kernel IR");

  LoopProgram w = loop_matmul();
  loop_reduce(w)[0].width = 4;
  EXPECT_REJECTED(w, "vector accesses appear from Tile IR on");

  LoopProgram q = loop_matmul();
  loop_reduce(q)[0].pred = v("k") < v("K");
  EXPECT_REJECTED(q, "in0 = load A[m, k] if k < K", "predicated loads");

  LoopProgram i = loop_matmul();
  loop_reduce(i)[3].args[0].index = {0};
  EXPECT_REJECTED(i, "register arrays appear from Tile IR on");

  LoopProgram sh = loop_matmul();
  sh.tensors.push_back(decl("S", {4}, TensorRole::Shared));
  EXPECT_REJECTED(sh, "shared tensor `S` in Loop IR");
}

TEST(Verify, TileIrHasNoBarriersOrAsyncCopies) {
  TileProgram t = tile_staged_matmul();
  k_body(t).push_back(Stmt::Barrier());
  EXPECT_REJECTED(t, "Tile IR", "barrier", "only in Kernel IR");

  TileProgram a = tile_staged_matmul();
  k_body(a).push_back(Stmt::AsyncCopy("As", 0, "A", 0, 1, Expr(1)));
  EXPECT_REJECTED(a, "cp.async As[0] <- A[0] x1", "only in Kernel IR");
  TileProgram w = tile_staged_matmul();
  k_body(w).push_back(Stmt::AsyncWait(0));
  EXPECT_REJECTED(w, "cp.async.wait 0", "only in Kernel IR");
}

TEST(Verify, RegisterArraysNeedAnAllocOfTheirRank) {
  TileProgram no_alloc = tile_register_matmul();
  Block& inner = no_alloc.ops[0].body[0].body[0].body[0].body[0].body;
  inner.erase(inner.begin());
  EXPECT_REJECTED(no_alloc, "acc0[0] = 0", "no Alloc", "register array");

  TileProgram rank = tile_register_matmul();
  rank.ops[0].body[0].body[0].body[0].body[0].body[2].body[3].dst_index = {0, 0};
  EXPECT_REJECTED(rank, "acc0[0, 0] <- add(acc0[0, 0], v0)", "rank 1", "2 indices");

  TileProgram scalar_use = tile_register_matmul();
  scalar_use.ops[0].body[0].body[0].body[0].body[0].body[3].args[0].index.clear();
  EXPECT_REJECTED(scalar_use, "C[m_b * 4 + m_t, n] = acc0", "is a register array");

  TileProgram extent = tile_register_matmul();
  extent.ops[0].body[0].body[0].body[0].body[0].body[0].index = {v("N")};
  EXPECT_REJECTED(extent, "alloc acc0[N]", "not a positive constant");

  TileProgram vec = tile_register_matmul();
  Stmt& load = k_body(vec)[0];
  load.width = 2;
  EXPECT_REJECTED(vec, "load.v2 A", "register-array elements");
  load = with_index(Stmt::Load("in0", "A", {v("m_b") * 4 + v("m_t"), v("k")}), {0});
  load.width = 2;
  Block& inner2 = vec.ops[0].body[0].body[0].body[0].body[0].body;
  inner2.insert(inner2.begin(), Stmt::Alloc("in0", {1}));
  EXPECT_REJECTED(vec, "in0[0] = load.v2 A", "overruns its last extent 1");
}

TEST(Verify, StageCopiesAreCheckedAndScoped) {
  TileProgram role = tile_staged_matmul();
  role.tensors.back().role = TensorRole::Temp;
  EXPECT_REJECTED(role, "stage sync:", "`As`, which is not a shared tensor");

  TileProgram rank = tile_staged_matmul();
  first_stage(rank).copies[0].vars = {"c"};
  EXPECT_REJECTED(rank, "1 box variables and 2 extents");

  TileProgram src = tile_staged_matmul();
  first_stage(src).copies[0].src_index.pop_back();
  EXPECT_REJECTED(src, "reads `A` (rank 2) with 1 indices");

  // The box variables exist only inside the copy, not in the stage's body.
  TileProgram scope = tile_staged_matmul();
  first_stage(scope).body[0].body[1].body[0] = Stmt::Load("in0", "As", {0, v("c")});
  EXPECT_REJECTED(scope, "load As[0, c]", "`c`", "neither an enclosing loop");

  TileProgram box = tile_staged_matmul();
  first_stage(box).copies[0].extents[1] = 9;
  EXPECT_REJECTED(box, "extent 9 exceeds dimension 1 of `As`");

  TileProgram mode = tile_staged_matmul();
  first_stage(mode).mode = "dma";
  EXPECT_REJECTED(mode, "stage mode `dma`");
}

TEST(Verify, DivergentBarrierIsRejected) {
  KernelProgram direct = gemm();
  ko_loop(direct)[2] = Stmt::If(v("threadIdx.x") < 32, {Stmt::Barrier()});
  EXPECT_REJECTED(direct, "Kernel IR", "kernel k_gemm", "`barrier`", "divergent barrier",
                  "if threadIdx.x < 32:");

  // Through a let: tm = threadIdx.x / 8.
  KernelProgram via_let = gemm();
  ko_loop(via_let)[2] = Stmt::If(v("tm") < 2, {Stmt::Barrier()});
  EXPECT_REJECTED(via_let, "divergent barrier", "if tm < 2:");

  // A loop whose trip count depends on the thread diverges as well.
  KernelProgram loop = gemm();
  ko_loop(loop)[2] = Stmt::For("z", v("tn"), LoopKind::Parallel, "", {Stmt::Barrier()});
  EXPECT_REJECTED(loop, "divergent barrier", "for z in 0..tn");

  // A condition every thread of the block agrees on is fine.
  KernelProgram uniform = gemm();
  ko_loop(uniform)[2] = Stmt::If(v("ko") < v("K") && v("m0") < v("M"), {Stmt::Barrier()});
  EXPECT_NO_THROW(verify(uniform));
}

TEST(Verify, AsyncCopyRules) {
  KernelProgram dst = gemm(test::Staging::CpAsync);
  ko_loop(dst).push_back(Stmt::AsyncCopy("C", 0, "A", 0, 1, Expr(1)));
  EXPECT_REJECTED(dst, "cp.async C[0] <- A[0] x1", "`C` is not a shared tensor");

  KernelProgram src = gemm(test::Staging::CpAsync);
  ko_loop(src).push_back(Stmt::AsyncCopy("As", 0, "Bs", 0, 1, Expr(1)));
  EXPECT_REJECTED(src, "cp.async reads global memory; `Bs` is a shared tensor");

  KernelProgram width = gemm(test::Staging::CpAsync);
  ko_loop(width).push_back(Stmt::AsyncCopy("As", 0, "A", 0, 3, Expr(1)));
  EXPECT_REJECTED(width, "cp.async moves 4, 8 or 16 bytes; 3 x f32 is 12 bytes");
}

TEST(Verify, SharedTensorDeclarations) {
  KernelProgram param = gemm();
  param.kernels[0].params.push_back("As");
  EXPECT_REJECTED(param, "parameter `As` is a shared tensor");

  KernelProgram pad = gemm();
  pad.tensors[2].pad = 4;
  EXPECT_REJECTED(pad, "tensor `C` has a row pad or swizzle");

  // 24 elements are not whole 16-element swizzle blocks: bit 4 of offset 16 sets bit 3.
  KernelProgram swz = gemm();
  swz.tensors.push_back(test::tensor_decl("Xs", {3, 8}, TensorRole::Shared, 0, Swizzle{1, 3, 1}));
  EXPECT_REJECTED(swz, "shared tensor `Xs`: its swizzle moves offset 16 to 24, outside its 24");
  swz.tensors.back().swizzle = Swizzle{2, 0, 1};
  EXPECT_REJECTED(swz, "swizzle<2,0,1>", "shift >= bits");

  KernelProgram unused = gemm();
  unused.tensors.push_back(test::tensor_decl("Cs", {4, 4}, TensorRole::Shared));
  EXPECT_REJECTED(unused, "shared tensor `Cs` is never written");
}

}  // namespace
}  // namespace loom
