// warp_atom(): the Kernel IR description of each mma entry of the atom table. Its maps
// must be the table's layout functions sampled lane by lane, and a kernel that uses it
// must pass the verifier and compute A·B + C on the CPU interpreter.
#include <gtest/gtest.h>

#include <random>

#include "atoms/atoms.h"
#include "ir/error.h"
#include "ir/interpreter.h"

namespace loom {
namespace {

std::vector<const AtomDef*> mma_atoms() {
  std::vector<const AtomDef*> out;
  for (const AtomDef& a : atom_table())
    if (a.kind == AtomKind::Compute && a.threads == 32) out.push_back(&a);
  return out;
}

TEST(WarpAtom, EveryMmaAtomIsSampled) {
  ASSERT_EQ(mma_atoms().size(), 4u);  // f16, bf16, f16-accumulate, tf32
  for (const AtomDef* a : mma_atoms()) {
    SCOPED_TRACE(a->id);
    const WarpAtom w = warp_atom(*a);
    EXPECT_EQ(w.id, a->id);
    EXPECT_EQ(w.m, a->m);
    EXPECT_EQ(w.n, a->n);
    EXPECT_EQ(w.k, a->k);
    EXPECT_EQ(w.a_type, a->a_type);
    EXPECT_EQ(w.b_type, a->b_type);
    EXPECT_EQ(w.acc_type, a->acc_type);
    auto expect_sampled = [&](const char* op, const std::vector<std::pair<int, int>>& map,
                              int values) {
      const OperandLayout& l = operand_layout(*a, op);
      ASSERT_EQ(values, l.values_per_thread) << op;
      ASSERT_EQ(map.size(), size_t(32 * values)) << op;
      for (int lane = 0; lane < 32; ++lane)
        for (int v = 0; v < values; ++v)
          EXPECT_EQ(map[size_t(lane * values + v)], l.map(lane, v))
              << op << " lane " << lane << " value " << v;
    };
    expect_sampled("A", w.a, w.a_values);
    expect_sampled("B", w.b, w.b_values);
    expect_sampled("C", w.c, w.c_values);
  }
}

TEST(WarpAtom, OnlyWarpComputeAtomsHaveOne) {
  EXPECT_THROW(warp_atom(atom("fma_f32")), Error);
  try {
    warp_atom(atom("ldmatrix_x4"));
    ADD_FAILURE() << "ldmatrix has no warp-atom description";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a warp-collective compute atom"),
              std::string::npos)
        << e.what();
  }
}

TensorDecl decl(std::string name, DType dt, int64_t n, TensorRole role) {
  TensorDecl t;
  t.name = std::move(name);
  t.dtype = dt;
  t.shape = {n};
  t.role = role;
  return t;
}

// One warp runs the atom on fragments stored lane-major in global memory:
// Af[lane * a_values + v] holds A's element (w.a[lane * a_values + v]), likewise B, and
// Cin/Cout hold C and D the same way. What it computes depends on the maps only.
KernelProgram fragment_kernel(const WarpAtom& w) {
  KernelProgram p;
  p.tensors = {decl("Af", w.a_type, 32 * w.a_values, TensorRole::Input),
               decl("Bf", w.b_type, 32 * w.b_values, TensorRole::Input),
               decl("Cin", DType::F32, 32 * w.c_values, TensorRole::Input),
               decl("Cout", DType::F32, 32 * w.c_values, TensorRole::Output)};
  KernelOp k;
  k.name = "k_fragments";
  k.params = {"Af", "Bf", "Cin", "Cout"};
  k.block_threads = 32;
  k.warp_atoms = {w};
  const Expr lane = Expr::var("threadIdx.x"), v = Expr::var("v");
  auto load = [&](const std::string& dst, const std::string& src, int values) {
    Stmt l = Stmt::Load(dst, src, {lane * values + v});
    l.dst_index = {v};
    return Stmt::For("v", values, LoopKind::Parallel, "", {l}, Tier::Register);
  };
  Stmt mma = Stmt::Atom(w.id, "c", {Operand::value("a"), Operand::value("b")});
  k.body = {Stmt::Alloc("a", {w.a_values}), load("a", "Af", w.a_values),
            Stmt::Alloc("b", {w.b_values}), load("b", "Bf", w.b_values),
            Stmt::Alloc("c", {w.c_values}), load("c", "Cin", w.c_values), mma,
            Stmt::For("v", w.c_values, LoopKind::Parallel, "",
                      {Stmt::Write("Cout", {lane * w.c_values + v}, Operand::value("c", {v}))},
                      Tier::Register)};
  p.kernels.push_back(std::move(k));
  return p;
}

TEST(WarpAtom, KernelsUsingEachAtomVerifyAndCompute) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (const AtomDef* a : mma_atoms()) {
    SCOPED_TRACE(a->id);
    const WarpAtom w = warp_atom(*a);
    const KernelProgram p = fragment_kernel(w);
    verify(p);
    // Tiles in row-major order, already in the types the atom reads (tf32: rounded as
    // cvt.rna does; round_to_dtype would keep its f32 storage).
    auto input = [&](DType t) {
      double x = uni(rng);
      return t == DType::TF32 ? double(round_to_tf32(float(x))) : round_to_dtype(t, x);
    };
    std::vector<double> A(size_t(w.m * w.k)), B(size_t(w.k * w.n)), C(size_t(w.m * w.n));
    for (double& x : A) x = input(w.a_type);
    for (double& x : B) x = input(w.b_type);
    for (double& x : C) x = round_to_dtype(w.acc_type, uni(rng));
    auto scatter = [](const std::vector<double>& tile, int cols,
                      const std::vector<std::pair<int, int>>& map, DType dt) {
      HostTensor h;
      h.dtype = dt;
      h.shape = {int64_t(map.size())};
      for (const auto& [r, c] : map) h.data.push_back(tile[size_t(r * cols + c)]);
      return h;
    };
    Bindings b;
    b.tensors["Af"] = scatter(A, w.k, w.a, w.a_type);
    b.tensors["Bf"] = scatter(B, w.n, w.b, w.b_type);
    b.tensors["Cin"] = scatter(C, w.n, w.c, DType::F32);
    interpret(p, b);
    const std::vector<double>& out = b.tensors.at("Cout").data;
    for (size_t i = 0; i < out.size(); ++i) {
      const auto [r, c] = w.c[i];
      double d = C[size_t(r * w.n + c)];
      for (int k = 0; k < w.k; ++k) d += A[size_t(r * w.k + k)] * B[size_t(k * w.n + c)];
      ASSERT_EQ(out[i], round_to_dtype(w.acc_type, d))
          << "D(" << r << ", " << c << ") from lane " << i / size_t(w.c_values) << " value "
          << i % size_t(w.c_values);
    }
  }
}

}  // namespace
}  // namespace loom
