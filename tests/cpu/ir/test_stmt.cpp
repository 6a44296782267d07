#include "ir/stmt.h"

#include "ir/error.h"
#include "ir/program.h"
#include "ir/same.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

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
  EXPECT_STREQ(scalar_op_name(ScalarOp::GeluTanh), "gelu_tanh");
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
  // torch.nn.functional.gelu(x, approximate='tanh') in float64 at 1 and -2.
  EXPECT_NEAR(eval_scalar_op(ScalarOp::GeluTanh, 1.0), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(eval_scalar_op(ScalarOp::GeluTanh, -2.0), -0.04540230591222494, 1e-15);
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

// same_program (the pass tests' reason to skip a run) sees a change to any one field of
// a statement, a nested statement, an operand, a stage copy, a tensor, a kernel and the
// kernel's atoms and tensor maps; a copy, and expressions built twice, are the same.
KernelProgram sample_kernel() {
  KernelProgram p;
  p.symbols = {"M"};
  TensorDecl t;
  t.name = "As";
  t.shape = {Expr(4), Expr(8)};
  t.role = TensorRole::Shared;
  p.tensors = {t};
  KernelOp k;
  k.name = "k";
  k.params = {"A"};
  k.tma = {TmaDescriptor{"A_tmap", "A", "As", {8, 4}, 0}};
  WarpAtom w;
  w.id = "mma";
  w.a = {{0, 1}};
  k.warp_atoms = {w};
  WarpCopy c;
  c.id = "ldmatrix_x4";
  c.dst = {{0, 1}};
  k.warp_copies = {c};
  Stmt s = Stmt::Load("x", "A", {Expr::var("i") + 1});
  s.args = {Operand::value("y", {Expr(2)})};
  s.copies = {StageCopy{"As", {Expr(0)}, {"r"}, {Expr(4)}, "A", {Expr::var("r")}}};
  s.body = {Stmt::Barrier()};
  k.body = {Stmt::For("i", Expr::var("M"), LoopKind::Parallel, "m", {s})};
  p.kernels = {k};
  return p;
}

TEST(SameProgram, EveryFieldCounts) {
  const KernelProgram base = sample_kernel();
  EXPECT_TRUE(same_program(base, sample_kernel()));
  EXPECT_TRUE(same_program(base, KernelProgram(base)));
  using Edit = std::function<void(KernelProgram&)>;
  auto stmt = [](KernelProgram& p) -> Stmt& { return p.kernels[0].body[0].body[0]; };
  const std::vector<std::pair<std::string, Edit>> edits = {
      {"kind", [&](KernelProgram& p) { stmt(p).kind = StmtKind::Write; }},
      {"var", [&](KernelProgram& p) { stmt(p).var = "j"; }},
      {"extent", [&](KernelProgram& p) { stmt(p).extent = Expr(3); }},
      {"loop_kind", [&](KernelProgram& p) { stmt(p).loop_kind = LoopKind::Reduce; }},
      {"tier", [&](KernelProgram& p) { stmt(p).tier = Tier::Warp; }},
      {"axis", [&](KernelProgram& p) { stmt(p).axis = "n"; }},
      {"unroll", [&](KernelProgram& p) { stmt(p).unroll = true; }},
      {"no_unroll", [&](KernelProgram& p) { stmt(p).no_unroll = true; }},
      {"cond", [&](KernelProgram& p) { stmt(p).cond = Expr(1); }},
      {"value", [&](KernelProgram& p) { stmt(p).value = Expr(2); }},
      {"dst", [&](KernelProgram& p) { stmt(p).dst = "z"; }},
      {"tensor", [&](KernelProgram& p) { stmt(p).tensor = "B"; }},
      {"index", [&](KernelProgram& p) { stmt(p).index = {Expr::var("i") + 2}; }},
      {"op", [&](KernelProgram& p) { stmt(p).op = ScalarOp::Max; }},
      {"args", [&](KernelProgram& p) { stmt(p).args.push_back(Operand::constant(1)); }},
      {"operand name", [&](KernelProgram& p) { stmt(p).args[0].name = "w"; }},
      {"operand imm", [&](KernelProgram& p) { stmt(p).args[0].imm = 0.5; }},
      {"operand index", [&](KernelProgram& p) { stmt(p).args[0].index = {Expr(3)}; }},
      {"imm", [&](KernelProgram& p) { stmt(p).imm = 2; }},
      {"atom", [&](KernelProgram& p) { stmt(p).atom = "fma_f32"; }},
      {"dst_index", [&](KernelProgram& p) { stmt(p).dst_index = {Expr(0)}; }},
      {"width", [&](KernelProgram& p) { stmt(p).width = 4; }},
      {"pred", [&](KernelProgram& p) { stmt(p).pred = Expr::var("i") < 3; }},
      {"atomic_add", [&](KernelProgram& p) { stmt(p).atomic_add = true; }},
      {"scale_d", [&](KernelProgram& p) { stmt(p).scale_d = Expr(0); }},
      {"multicast", [&](KernelProgram& p) { stmt(p).multicast = Expr(3); }},
      {"remote", [&](KernelProgram& p) { stmt(p).remote = true; }},
      {"mbar", [&](KernelProgram& p) { stmt(p).mbar = Expr(1); }},
      {"src", [&](KernelProgram& p) { stmt(p).src = "B"; }},
      {"src_index", [&](KernelProgram& p) { stmt(p).src_index = {Expr(1)}; }},
      {"copy shared", [&](KernelProgram& p) { stmt(p).copies[0].shared = "Bs"; }},
      {"copy prefix", [&](KernelProgram& p) { stmt(p).copies[0].shared_prefix = {Expr(1)}; }},
      {"copy vars", [&](KernelProgram& p) { stmt(p).copies[0].vars = {"q"}; }},
      {"copy extents", [&](KernelProgram& p) { stmt(p).copies[0].extents = {Expr(2)}; }},
      {"copy src", [&](KernelProgram& p) { stmt(p).copies[0].src = "B"; }},
      {"copy src_index", [&](KernelProgram& p) { stmt(p).copies[0].src_index = {Expr(0)}; }},
      {"mode", [&](KernelProgram& p) { stmt(p).mode = "tma"; }},
      {"nested body", [&](KernelProgram& p) { stmt(p).body[0].imm = 64; }},
      {"tensor name", [](KernelProgram& p) { p.tensors[0].name = "Bs"; }},
      {"tensor dtype", [](KernelProgram& p) { p.tensors[0].dtype = DType::F16; }},
      {"tensor shape", [](KernelProgram& p) { p.tensors[0].shape[1] = Expr(9); }},
      {"tensor role", [](KernelProgram& p) { p.tensors[0].role = TensorRole::Temp; }},
      {"tensor pad", [](KernelProgram& p) { p.tensors[0].pad = 1; }},
      {"tensor swizzle", [](KernelProgram& p) { p.tensors[0].swizzle.bits = 3; }},
      {"tensor overlay", [](KernelProgram& p) { p.tensors[0].overlay = 1; }},
      {"tensor row_chunk", [](KernelProgram& p) { p.tensors[0].row_chunk = 4; }},
      {"tensor zero_init", [](KernelProgram& p) { p.tensors[0].zero_init = true; }},
      {"symbols", [](KernelProgram& p) { p.symbols.push_back("N"); }},
      {"kernel name", [](KernelProgram& p) { p.kernels[0].name = "k2"; }},
      {"params", [](KernelProgram& p) { p.kernels[0].params.push_back("M"); }},
      {"grid", [](KernelProgram& p) { p.kernels[0].grid[2] = Expr(2); }},
      {"block_threads", [](KernelProgram& p) { p.kernels[0].block_threads = 128; }},
      {"cluster", [](KernelProgram& p) { p.kernels[0].cluster[0] = 2; }},
      {"min_blocks", [](KernelProgram& p) { p.kernels[0].min_blocks_per_sm = 1; }},
      {"wait_prior_grid", [](KernelProgram& p) { p.kernels[0].wait_prior_grid = true; }},
      {"trigger", [](KernelProgram& p) { p.kernels[0].trigger_dependents = true; }},
      {"tma box", [](KernelProgram& p) { p.kernels[0].tma[0].box[0] = 16; }},
      {"tma swizzle", [](KernelProgram& p) { p.kernels[0].tma[0].swizzle_bytes = 128; }},
      {"mbarriers", [](KernelProgram& p) { p.kernels[0].mbarriers = 2; }},
      {"warp atom map", [](KernelProgram& p) { p.kernels[0].warp_atoms[0].a[0].second = 2; }},
      {"warp atom type", [](KernelProgram& p) { p.kernels[0].warp_atoms[0].b_type = DType::BF16; }},
      {"warp atom values", [](KernelProgram& p) { p.kernels[0].warp_atoms[0].c_values = 4; }},
      {"warp copy dst", [](KernelProgram& p) { p.kernels[0].warp_copies[0].dst[0].first = 3; }},
      {"warp copy to_shared", [](KernelProgram& p) { p.kernels[0].warp_copies[0].to_shared = true; }},
      {"kernel body", [](KernelProgram& p) { p.kernels[0].body.push_back(Stmt::Barrier()); }},
  };
  for (const auto& [what, edit] : edits) {
    KernelProgram changed = sample_kernel();
    edit(changed);
    EXPECT_FALSE(same_program(base, changed)) << what;
    EXPECT_FALSE(same_program(changed, base)) << what;
  }
  LoopProgram l;
  l.ops = {LoopOp{"matmul", {"A"}, "out", {Stmt::Barrier()}}};
  LoopProgram l2 = l;
  EXPECT_TRUE(same_program(l, l2));
  l2.ops[0].inputs.push_back("B");
  EXPECT_FALSE(same_program(l, l2));
  TileProgram t;
  t.ops = {TileOp{"matmul", {"A"}, "out", {}}};
  TileProgram t2 = t;
  EXPECT_TRUE(same_program(t, t2));
  t2.ops[0].output = "tmp";
  EXPECT_FALSE(same_program(t, t2));
}

}  // namespace
}  // namespace loom
