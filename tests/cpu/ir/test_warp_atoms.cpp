// Warp atoms (mma.sync) in Kernel IR: hand-built kernels in which every lane loads its A
// and B fragment values from global memory, runs the atom and stores its C fragment;
// the interpreter's answer is compared with a CPU matmul of the rounded inputs.
//
// The fragment layouts are written out here from the PTX ISA formulas (9.7.14.5.8
// "Matrix Fragments for mma.m16n8k16 with floating point type", 9.7.14.5.7 "... for
// mma.m16n8k8"), once, as templates that give both the kernel's index expressions and
// the WarpAtom maps. This test links only loom_ir (+ loom_frontend), not the atom table;
// building a WarpAtom from a table entry (warp_atom()) is tested in
// tests/cpu/atoms/test_warp_atom.cpp.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/program.h"

namespace loom {
namespace {

Expr var(const std::string& n) { return Expr::var(n); }

enum class Shape { F16F32, F16F16, TF32F32 };  // m16n8k16 f16 -> f32 / f16, m16n8k8 tf32 -> f32

const char* atom_id(Shape s) {
  switch (s) {
    case Shape::F16F32: return "mma_m16n8k16_f32_f16";
    case Shape::F16F16: return "mma_m16n8k16_f16_f16";
    case Shape::TF32F32: return "mma_m16n8k8_f32_tf32";
  }
  return "?";
}
int k_of(Shape s) { return s == Shape::TF32F32 ? 8 : 16; }
int a_values(Shape s) { return s == Shape::TF32F32 ? 4 : 8; }
int b_values(Shape s) { return s == Shape::TF32F32 ? 2 : 4; }
DType in_type(Shape s) { return s == Shape::TF32F32 ? DType::TF32 : DType::F16; }
DType acc_type(Shape s) { return s == Shape::F16F16 ? DType::F16 : DType::F32; }

// (row, col) of value v of the lane with groupID g = lane / 4 and threadID_in_group
// t = lane % 4. T is int (the WarpAtom maps) or Expr (the kernel's load offsets).
template <class T>
std::pair<T, T> a_coord(Shape s, T g, T t, T v) {
  if (s == Shape::TF32F32) return {g + 8 * (v % 2), t + 4 * (v / 2)};
  return {g + 8 * ((v / 2) % 2), 2 * t + v % 2 + 8 * (v / 4)};
}
template <class T>
std::pair<T, T> b_coord(Shape s, T g, T t, T v) {
  if (s == Shape::TF32F32) return {t + 4 * v, g};
  return {2 * t + v % 2 + 8 * (v / 2), g};
}
template <class T>
std::pair<T, T> c_coord(Shape, T g, T t, T v) {
  return {g + 8 * (v / 2), 2 * t + v % 2};
}

WarpAtom warp_atom_of(Shape s) {
  WarpAtom w;
  w.id = atom_id(s);
  w.m = 16, w.n = 8, w.k = k_of(s);
  w.a_type = w.b_type = in_type(s);
  w.acc_type = acc_type(s);
  w.a_values = a_values(s), w.b_values = b_values(s), w.c_values = 4;
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int v = 0; v < w.a_values; ++v) w.a.push_back(a_coord<int>(s, g, t, v));
    for (int v = 0; v < w.b_values; ++v) w.b.push_back(b_coord<int>(s, g, t, v));
    for (int v = 0; v < w.c_values; ++v) w.c.push_back(c_coord<int>(s, g, t, v));
  }
  return w;
}

struct MmaKernel {
  Shape shape = Shape::F16F32;
  int warps = 1;    // warp w computes rows 16w .. 16w + 15
  int frags_n = 1;  // 8-column C fragments per warp, kept in one array acc[frags_n, 4]
  int ksteps = 1;   // atoms accumulated along K
  bool bias = false;                 // C starts from a Bias tensor instead of 0
  DType inputs = DType::F16;         // dtype of the A and B tensors
  int a_alloc = 0;                   // A fragment array size; 0: the atom's
  int block_threads = 0;             // 0: 32 * warps
  std::optional<Expr> guard;         // an If around the atom
  int M() const { return 16 * warps; }
  int N() const { return 8 * frags_n; }
  int K() const { return k_of(shape) * ksteps; }
};

TensorDecl decl(std::string name, DType dt, std::vector<Expr> shape, TensorRole role) {
  TensorDecl t;
  t.name = std::move(name);
  t.dtype = dt;
  t.shape = std::move(shape);
  t.role = role;
  return t;
}

Stmt reg_for(const std::string& v, int extent, Block body) {
  Stmt f = Stmt::For(v, extent, LoopKind::Parallel, "", std::move(body), Tier::Register);
  f.unroll = true;
  return f;
}

Stmt element(Stmt s, std::vector<Expr> index) {
  s.dst_index = std::move(index);
  return s;
}

// C[M, N] = A[M, K] · B[K, N] (+ Bias), one warp per 16 rows.
KernelProgram mma_kernel(const MmaKernel& o) {
  const Shape sh = o.shape;
  const int M = o.M(), N = o.N(), K = o.K(), KA = k_of(sh);
  KernelProgram p;
  p.tensors = {decl("A", o.inputs, {M, K}, TensorRole::Input),
               decl("B", o.inputs, {K, N}, TensorRole::Input),
               decl("C", DType::F32, {M, N}, TensorRole::Output)};
  if (o.bias) p.tensors.push_back(decl("Bias", DType::F32, {M, N}, TensorRole::Input));
  KernelOp k;
  k.name = "k_mma";
  k.params = {"A", "B", "C"};
  if (o.bias) k.params.push_back("Bias");
  k.block_threads = o.block_threads ? o.block_threads : 32 * o.warps;
  k.warp_atoms = {warp_atom_of(sh)};

  const Expr warp = var("warp"), g = var("g"), t = var("t"), v = var("v"), j = var("j"),
             kk = var("kk");
  const Expr row0 = warp * 16;
  auto c_offset = [&] {
    auto [r, c] = c_coord<Expr>(sh, g, t, v);
    return (row0 + r) * N + j * 8 + c;
  };
  Stmt init = o.bias ? Stmt::Load("acc", "Bias", {c_offset()}) : Stmt::Init("acc", 0.0);
  auto [ar, ac] = a_coord<Expr>(sh, g, t, v);
  auto [br, bc] = b_coord<Expr>(sh, g, t, v);
  Stmt mma = element(
      Stmt::Atom(atom_id(sh), "acc", {Operand::value("a"), Operand::value("b", {j})}), {j});
  Stmt maybe_guarded = o.guard ? Stmt::If(*o.guard, {mma}) : mma;
  Block step = {
      Stmt::Alloc("a", {o.a_alloc ? o.a_alloc : a_values(sh)}),
      reg_for("v", a_values(sh),
              {element(Stmt::Load("a", "A", {(row0 + ar) * K + kk * KA + ac}), {v})}),
      Stmt::Alloc("b", {o.frags_n, b_values(sh)}),
      reg_for("j", o.frags_n,
              {reg_for("v", b_values(sh),
                       {element(Stmt::Load("b", "B", {(kk * KA + br) * N + j * 8 + bc}),
                                {j, v})})}),
      reg_for("j", o.frags_n, {maybe_guarded}),
  };
  k.body = {
      Stmt::Let("warp", var("threadIdx.x") / 32),
      Stmt::Let("lane", var("threadIdx.x") % 32),
      Stmt::Let("g", var("lane") / 4),
      Stmt::Let("t", var("lane") % 4),
      Stmt::Alloc("acc", {o.frags_n, 4}),
      reg_for("j", o.frags_n, {reg_for("v", 4, {element(init, {j, v})})}),
      Stmt::For("kk", o.ksteps, LoopKind::Reduce, "k", step),
      reg_for("j", o.frags_n,
              {reg_for("v", 4, {Stmt::Write("C", {c_offset()}, Operand::value("acc", {j, v}))})}),
  };
  p.kernels.push_back(std::move(k));
  return p;
}

// The value a tensor core reads from a register of type `t` (tf32: cvt.rna's 19 bits,
// not round_to_dtype's f32 storage).
double operand_value(DType t, double v) {
  return t == DType::TF32 ? double(round_to_tf32(float(v))) : round_to_dtype(t, v);
}

// What the tensor cores compute: inputs rounded to the atom's input type (unless
// `round_inputs` is false), each K step D = C + Σ a·b in double, summed in k order,
// rounded to the accumulator type.
std::vector<double> reference(const MmaKernel& o, const Bindings& b, bool round_inputs = true) {
  const int M = o.M(), N = o.N(), K = o.K(), KA = k_of(o.shape);
  const DType in = round_inputs ? in_type(o.shape) : DType::F64, acc = acc_type(o.shape);
  const std::vector<double>& A = b.tensors.at("A").data;
  const std::vector<double>& B = b.tensors.at("B").data;
  std::vector<double> C(size_t(M * N));
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double c = o.bias ? b.tensors.at("Bias").data[size_t(m * N + n)] : 0.0;
      for (int s = 0; s < o.ksteps; ++s) {
        double d = round_to_dtype(acc, c);
        for (int k = s * KA; k < (s + 1) * KA; ++k)
          d += operand_value(in, A[size_t(m * K + k)]) * operand_value(in, B[size_t(k * N + n)]);
        c = round_to_dtype(acc, d);
      }
      C[size_t(m * N + n)] = c;
    }
  return C;
}

Bindings run(const MmaKernel& o, uint64_t seed) {
  KernelProgram p = mma_kernel(o);
  verify(p);
  Bindings b;
  make_random_inputs(p, b, seed);
  interpret(p, b);
  return b;
}

void expect_matches_reference(const MmaKernel& o, uint64_t seed) {
  Bindings b = run(o, seed);
  std::vector<double> want = reference(o, b);
  const std::vector<double>& got = b.tensors.at("C").data;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "C element (" << i / size_t(o.N()) << ", " << i % size_t(o.N())
                               << ")";
}

std::string verify_error(const KernelProgram& p) {
  try {
    verify(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string interpret_error(const KernelProgram& p) {
  Bindings b;
  make_random_inputs(p, b, 1);
  try {
    interpret(p, b);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(msg, part) \
  EXPECT_NE((msg).find(part), std::string::npos) << "missing `" << (part) << "` in: " << (msg)

TEST(WarpAtoms, F16OneWarpMatchesCpuMatmul) {
  expect_matches_reference(MmaKernel{}, 1);
  expect_matches_reference(MmaKernel{}, 2);
}

TEST(WarpAtoms, TwoWarpsFragmentArraysKStepsAndBias) {
  MmaKernel o;
  o.warps = 2;    // 64 threads
  o.frags_n = 2;  // acc[2, 4], selected as acc[j]
  o.ksteps = 2;   // the second atom accumulates onto the first's D
  o.bias = true;
  expect_matches_reference(o, 3);
}

TEST(WarpAtoms, F16AccumulatorRoundsToF16) {
  MmaKernel o;
  o.shape = Shape::F16F16;
  o.ksteps = 2;
  o.bias = true;  // an f32 bias enters the f16 accumulator rounded
  Bindings b = run(o, 4);
  std::vector<double> want = reference(o, b);
  EXPECT_EQ(b.tensors.at("C").data, want);
  for (double c : want) EXPECT_EQ(c, round_to_dtype(DType::F16, c));
  // Not a tautology: the f32-accumulated answer differs.
  MmaKernel f32 = o;
  f32.shape = Shape::F16F32;
  EXPECT_NE(reference(f32, b), want);
}

TEST(WarpAtoms, Tf32M16n8k8RoundsItsInputs) {
  MmaKernel o;
  o.shape = Shape::TF32F32;
  o.inputs = DType::F32;  // full f32 mantissas reach the atom, which rounds them to tf32
  o.warps = 2;
  o.ksteps = 2;
  expect_matches_reference(o, 5);
  Bindings b = run(o, 5);
  const std::vector<double> unrounded = reference(o, b, false);
  const std::vector<double>& got = b.tensors.at("C").data;
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += got[i] != unrounded[i];
  EXPECT_GT(differ, got.size() / 2) << "the inputs were not rounded to tf32";
}

TEST(WarpAtoms, WarpUniformIfSkipsWholeWarps) {
  MmaKernel o;
  o.warps = 2;
  o.guard = var("warp") < 1;  // depends on threadIdx, but not within a warp
  Bindings b = run(o, 6);
  std::vector<double> want = reference(o, b);
  const std::vector<double>& got = b.tensors.at("C").data;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], i < 16 * 8 ? want[i] : 0.0) << "element " << i;
}

TEST(WarpAtoms, DivergentLaneIsAnError) {
  MmaKernel o;
  o.warps = 2;
  o.guard = var("lane") < 31;
  KernelProgram p = mma_kernel(o);
  verify(p);  // whether lanes diverge is only known when it runs
  std::string msg = interpret_error(p);
  EXPECT_CONTAINS(msg, "thread 0");
  EXPECT_CONTAINS(msg, "acc[j] <- mma_m16n8k16_f32_f16(a, b[j])");
  EXPECT_CONTAINS(msg, "reached by 31 of the 32 lanes of warp 0");
  EXPECT_CONTAINS(msg, "hoist the atom out of the If");
}

TEST(WarpAtoms, UndeclaredAtomIsAnError) {
  KernelProgram p = mma_kernel(MmaKernel{});
  p.kernels[0].warp_atoms.clear();
  std::string msg = verify_error(p);
  EXPECT_CONTAINS(msg, "Kernel IR verifier: kernel k_mma");
  EXPECT_CONTAINS(msg, "atom mma_m16n8k16_f32_f16 is not declared in the kernel's warp_atoms");
  EXPECT_CONTAINS(msg, "declare the warp atom (KernelOp::warp_atoms)");
  EXPECT_CONTAINS(interpret_error(p), "interpreter: unknown atom mma_m16n8k16_f32_f16");
}

TEST(WarpAtoms, WrongFragmentSizeIsAnError) {
  MmaKernel o;
  o.a_alloc = 4;  // the f16 A fragment holds 8 values per lane
  KernelProgram p = mma_kernel(o);
  std::string msg = verify_error(p);
  EXPECT_CONTAINS(msg, "A fragment `a` selects 4 elements but mma_m16n8k16_f32_f16 holds 8 values "
                       "of A per lane");
  EXPECT_CONTAINS(interpret_error(p), "A fragment `a` [4] selects 4 elements; the atom holds 8");

  // Indexing every dimension names an element, not a fragment.
  p = mma_kernel(MmaKernel{});
  Stmt& atom = p.kernels[0].body[6].body[4].body[0];
  ASSERT_EQ(atom.kind, StmtKind::Atom);
  atom.dst_index = {var("j"), Expr(0)};
  EXPECT_CONTAINS(verify_error(p), "C/D fragment `acc` of rank 2 is indexed with 2 indices");
}

TEST(WarpAtoms, BlockOfWholeWarpsIsRequired) {
  MmaKernel o;
  o.block_threads = 48;
  KernelProgram p = mma_kernel(o);
  EXPECT_CONTAINS(verify_error(p), "runs on whole warps of 32 lanes but the block has 48 threads; "
                                   "make block_threads a multiple of 32");
  EXPECT_CONTAINS(interpret_error(p), "but the block has 48 threads");
}

TEST(WarpAtoms, DeclarationsAreChecked) {
  KernelProgram p = mma_kernel(MmaKernel{});
  WarpAtom& w = p.kernels[0].warp_atoms[0];
  w.b[5] = w.b[0];  // two lanes' values on one B element, another element on none
  EXPECT_CONTAINS(verify_error(p), "warp atom `mma_m16n8k16_f32_f16`: B element (0, 0) is held "
                                   "twice: by value 0 of lane 0 and by value 1 of lane 1");
  p = mma_kernel(MmaKernel{});
  p.kernels[0].warp_atoms[0].c.pop_back();
  EXPECT_CONTAINS(verify_error(p), "C/D map has 127 entries; 32 lanes x 4 values = 128 expected");
  p = mma_kernel(MmaKernel{});
  p.kernels[0].warp_atoms[0].a[3] = {16, 0};
  EXPECT_CONTAINS(verify_error(p), "A value 3 of lane 0 is (16, 0), outside the 16 x 16 tile");
  p = mma_kernel(MmaKernel{});
  p.kernels[0].warp_atoms.push_back(p.kernels[0].warp_atoms[0]);
  EXPECT_CONTAINS(verify_error(p), "is declared twice");
}

TEST(WarpAtoms, PrintMarksWarpAtoms) {
  MmaKernel o;
  o.frags_n = 2;
  std::string text = print(mma_kernel(o));
  EXPECT_CONTAINS(text, "  warp atom mma_m16n8k16_f32_f16: m16n8k16 A f16[16, 16] 8/lane, "
                        "B f16[16, 8] 4/lane, C/D f32[16, 8] 4/lane\n");
  EXPECT_CONTAINS(text, "acc[j] <- mma_m16n8k16_f32_f16(a, b[j])  warp\n");
  EXPECT_CONTAINS(text, "a[v] = load A[(warp * 16 + g + v / 2 % 2 * 8) * 16 + kk * 16 + t * 2 + "
                        "v % 2 + v / 4 * 8]");
}

}  // namespace
}  // namespace loom
