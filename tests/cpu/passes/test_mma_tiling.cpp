// Tensor-core tiling (ATOM=mma_f16 / mma_bf16 / mma_tf32): t:010 tiles by warps and
// atoms, t:030 keeps each atom's cells together, t:040 stages whole atoms, k:010 binds
// lanes, k:025 lowers ATOM nests to fragment loads and mma.sync. Every pass's output is
// run on the CPU interpreter (the Kernel IR one executes the warp atom through its
// fragment layouts) and compared with the naive Loop IR, on ragged shapes, transposes,
// batch, fused epilogues, both staging transports and several warp/atom splits. Then
// the IR shapes k:025 promises, the knob errors, and the atom table's affine form.
#include <gtest/gtest.h>

#include <tuple>
#include <utility>

#include "atoms/atoms.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "pass_check.h"
#include "passes/defaults.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

using passcheck::expect_close;
using passcheck::run_level;

struct MmaCase {
  std::string expr;
  std::string knobs;
  std::map<std::string, int64_t> sizes = {};
};

// Rounds every input of the program to tf32: with ATOM=mma_tf32 on f32 tensors the atom
// rounds its operands (cvt.rna), which the naive f32 program does not; on inputs that
// are already tf32 values both compute the same products.
void round_inputs_to_tf32(const ProgramBase& p, Bindings& b) {
  for (const auto& t : p.tensors)
    if (t.role == TensorRole::Input && t.dtype == DType::F32)
      for (double& v : b.tensors.at(t.name).data) v = round_to_tf32(float(v));
}

// Runs the whole pipeline, checking the output after every pass against the Loop IR
// straight from lowering. Returns the final state for shape checks.
CompileState check_mma_case(const MmaCase& c, uint64_t seed) {
  return passcheck::check_every_pass(c.expr, Knobs::parse(c.knobs), seed, c.sizes,
                                     round_inputs_to_tf32);
}

// Three tests (one per atom) so that ctest runs them side by side: until k:025 every lane
// of the interpreter computes its warp's whole tile, which takes a while.
TEST(MmaTiling, F16EveryPassMatchesTheNaiveLoopIr) {
  const std::vector<MmaCase> cases = {
      // The knob set on a ragged shape (guards on m, n; a K tail inside a slab).
      {"matmul(A[37,29]:f16, B[29,45]:f16)", "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=sync"},
      {"matmul(A[64,40]:f16, B[40,24]:f16)", "ATOM=mma_f16,WM=1,WN=1,FM=1,FN=1,BK=16,STAGE=sync,STAGES=1"},
      {"matmul(A[32,16]:f16, B[16,16]:f16)", "ATOM=mma_f16,WM=1,WN=1,FM=2,FN=2,BK=16,STAGE=sync"},
      // Both operands transposed (slabs in storage order: A_s[BK][BM], B_s[BN][BK]).
      {"matmul(A[29,37]:f16.T, B[45,29]:f16.T, out=f32)", "ATOM=mma_f16,WM=1,WN=1,FM=2,FN=2,BK=32,STAGE=cp_async,STAGES=2"},
      // Batch and a residual epilogue.
      {"bmm(A[3,20,24]:f16, B[3,24,17]:f16)", "ATOM=mma_f16,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=sync"},
      {"silu(add(matmul(A[40,50]:f16, B[50,30]:f16), R[40,30]:f16))", "ATOM=mma_f16,WM=4,WN=1,FM=1,FN=4,BK=16,STAGE=sync"},
      // Schedules the SIMT path already has, on mma tiles: padding, rasterization,
      // interleaved fragment loads.
      {"matmul(A[50,70]:f16, B[70,40]:f16)", "ATOM=mma_f16,WM=2,WN=1,FM=1,FN=2,BK=32,STAGE=sync,STAGES=2,PAD_SMEM=8"},
      {"matmul(A[70,30]:f16, B[30,20]:f16)", "ATOM=mma_f16,WM=1,WN=1,FM=1,FN=1,BK=16,STAGE=sync,GROUP_M=2"},
      {"matmul(A[30,30]:f16, B[30,20]:f16)", "ATOM=mma_f16,WM=1,WN=1,FM=2,FN=2,BK=16,STAGE=sync,INTERLEAVE_LOADS=1"},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_mma_case(cases[i], 300 + i);
}

TEST(MmaTiling, Bf16EveryPassMatchesTheNaiveLoopIr) {
  const std::vector<MmaCase> cases = {
      {"matmul(A[29,37]:bf16.T, B[29,45]:bf16)", "ATOM=mma_bf16,WM=2,WN=1,FM=1,FN=2,BK=32,STAGE=cp_async,STAGES=3"},
      {"matmul(A[37,29]:bf16, B[45,29]:bf16.T)", "ATOM=mma_bf16,WM=1,WN=2,FM=2,FN=1,BK=16,STAGE=sync,STAGES=2"},
      // A linear layer with symbolic sizes (guards everywhere, the K tail in the copy).
      {"gelu(linear(X[M,K]:bf16, W[N,K]:bf16, bias[N]:bf16))", "ATOM=mma_bf16,WM=2,WN=1,FM=1,FN=2,BK=16,STAGE=cp_async,STAGES=2",
       {{"M", 33}, {"N", 20}, {"K", 40}}},
      // K-outer slabs (A_s[BK][BM]): the fragment loads only see other offsets.
      {"matmul(A[50,70]:bf16, B[70,40]:bf16)", "ATOM=mma_bf16,WM=1,WN=1,FM=2,FN=2,BK=16,STAGE=sync,SLAB_KOUTER=1"},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_mma_case(cases[i], 400 + i);
}

TEST(MmaTiling, Tf32EveryPassMatchesTheNaiveLoopIr) {
  const std::vector<MmaCase> cases = {
      // tf32 tensors, and f32 tensors rounded by the atom; a bias + relu epilogue.
      {"relu(add(matmul(A[37,29]:tf32, B[29,45]:tf32), bias[45]:f32))", "ATOM=mma_tf32,WM=2,WN=2,FM=1,FN=2,BK=16,STAGE=sync"},
      {"matmul(A[37,29]:f32, B[45,29]:f32.T)", "ATOM=mma_tf32,WM=1,WN=2,FM=2,FN=2,BK=8,STAGE=cp_async,STAGES=3"},
      // Everything else from the defaults (2x2 warps of 2x4 atoms, BK = two atoms).
      {"matmul(A[20,36]:tf32, B[36,20]:tf32)", "ATOM=mma_tf32"},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_mma_case(cases[i], 500 + i);
}

// f32 tensors through mma_tf32: the kernel's answer is the product of the tf32-rounded
// inputs (cvt.rna), measurably not that of the f32 inputs.
TEST(MmaTiling, Tf32AtomRoundsF32Inputs) {
  CompileState s;
  s.graph = parse_expression("matmul(A[32,40]:f32, B[40,16]:f32)");
  s.knobs = Knobs::parse("ATOM=mma_tf32,WM=1,WN=1,FM=2,FN=2,BK=8,STAGE=sync");
  run_pipeline(s);
  Bindings raw;
  make_random_inputs(s.loop, raw, 9);
  Bindings rounded = raw;
  round_inputs_to_tf32(s.loop, rounded);
  HostTensor got = run_level(s, Level::Kernel, raw);
  expect_close(got, run_level(s, Level::Loop, rounded), DType::F32, "vs rounded inputs");
  HostTensor exact = run_level(s, Level::Loop, raw);
  double worst = 0;
  for (size_t i = 0; i < got.data.size(); ++i)
    worst = std::max(worst, std::fabs(got.data[i] - exact.data[i]));
  EXPECT_GT(worst, 1e-4) << "the f32 inputs were not rounded to tf32";
}

const Stmt* find_stmt(const Block& b, const std::function<bool(const Stmt&)>& pred) {
  const Stmt* found = nullptr;
  walk(b, [&](const Stmt& s) {
    if (!found && pred(s)) found = &s;
  });
  return found;
}

int count_stmts(const Block& b, const std::function<bool(const Stmt&)>& pred) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += pred(s); });
  return n;
}

TEST(MmaTiling, TileIrKeepsEachAtomsCellsTogether) {
  CompileState s = passcheck::compile_sm90a("matmul(A[64,64]:f16, B[64,64]:f16)",
                                            "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=sync",
                                            "t:040_stage_inputs");
  const Block& body = s.tile.ops.at(0).body;
  auto loop = [&](const std::string& var) {
    return find_stmt(body, [&](const Stmt& st) { return st.kind == StmtKind::For && st.var == var; });
  };
  ASSERT_TRUE(loop("m_w") && loop("n_w") && loop("m_a") && loop("m_e") && loop("k_e"));
  EXPECT_EQ(loop("m_w")->tier, Tier::Warp);
  EXPECT_EQ(loop("m_a")->tier, Tier::Register);
  EXPECT_EQ(loop("m_e")->tier, Tier::Atom);
  EXPECT_EQ(loop("m_e")->extent.const_value(), 16);
  EXPECT_EQ(loop("n_e")->extent.const_value(), 8);
  EXPECT_EQ(loop("k_e")->extent.const_value(), 16);
  EXPECT_EQ(loop("k_i")->extent.const_value(), 2);  // BK=32: two atoms deep
  // acc[FM, FN, AM, AN]; A tile in0[FM, AM, AK], B tile in1[FN, AK, AN].
  auto alloc = [&](const std::string& name) {
    const Stmt* a = find_stmt(body, [&](const Stmt& st) { return st.kind == StmtKind::Alloc && st.dst == name; });
    std::vector<int64_t> ext;
    if (a)
      for (const auto& e : a->index) ext.push_back(e.const_value());
    return ext;
  };
  EXPECT_EQ(alloc("acc3"), (std::vector<int64_t>{2, 4, 16, 8}));
  EXPECT_EQ(alloc("in0"), (std::vector<int64_t>{2, 16, 16}));
  EXPECT_EQ(alloc("in1"), (std::vector<int64_t>{4, 16, 8}));
  // Slabs in storage order: A_s[BM][BK], B_s[BK][BN].
  EXPECT_EQ(s.tile.tensor("A_s").shape[0].const_value(), 64);
  EXPECT_EQ(s.tile.tensor("A_s").shape[1].const_value(), 32);
  EXPECT_EQ(s.tile.tensor("B_s").shape[0].const_value(), 32);
  EXPECT_EQ(s.tile.tensor("B_s").shape[1].const_value(), 64);
  EXPECT_EQ(s.used_knobs.at("SLAB_KOUTER"), "0");
}

TEST(MmaTiling, LowerMmaLeavesFragmentsAndOneWarpAtomPerAtom) {
  for (auto [atom_knob, dtype, id, a_vals, b_vals] :
       std::vector<std::tuple<std::string, std::string, std::string, int, int>>{
           {"mma_f16", "f16", "mma_m16n8k16_f32_f16", 8, 4},
           {"mma_bf16", "bf16", "mma_m16n8k16_f32_bf16", 8, 4},
           {"mma_tf32", "f32", "mma_m16n8k8_f32_tf32", 4, 2}}) {
    SCOPED_TRACE(atom_knob);
    CompileState s = passcheck::compile_sm90a(
        "matmul(A[64,64]:" + dtype + ", B[64,64]:" + dtype + ")",
        "ATOM=" + atom_knob +
            ",WM=2,WN=2,FM=2,FN=4,BK=16,STAGE=sync,"
            "LDMATRIX=0",  // element loads here; test_ldmatrix.cpp has the copies
        "k:025_lower_mma");
    const KernelOp& k = s.kernel.kernels.at(0);
    EXPECT_EQ(k.block_threads, 128);
    ASSERT_EQ(k.warp_atoms.size(), 1u);
    EXPECT_EQ(k.warp_atoms[0].id, id);
    EXPECT_EQ(count_stmts(k.body, [](const Stmt& st) { return st.kind == StmtKind::For && st.tier == Tier::Atom; }), 0);
    EXPECT_TRUE(find_stmt(k.body, [](const Stmt& st) {
      return st.kind == StmtKind::Let && st.var == "lane" && st.value.str() == "threadIdx.x % 32";
    }));
    EXPECT_TRUE(find_stmt(k.body, [](const Stmt& st) {
      return st.kind == StmtKind::Let && st.var == "m_w" && st.value.str() == "threadIdx.x / 64";
    }));
    // One atom statement per (m_a, n_a) on whole fragments.
    const Stmt* mma = find_stmt(k.body, [&](const Stmt& st) { return st.kind == StmtKind::Atom; });
    ASSERT_TRUE(mma);
    EXPECT_EQ(mma->atom, id);
    EXPECT_EQ(print_block({*mma}), "acc3[m_a, n_a] <- " + id + "(in0[m_a], in1[n_a])\n");
    // Fragment loads, one per value, at lane-affine offsets.
    EXPECT_EQ(count_stmts(k.body, [](const Stmt& st) { return st.kind == StmtKind::Load && st.dst == "in0"; }), a_vals);
    EXPECT_EQ(count_stmts(k.body, [](const Stmt& st) { return st.kind == StmtKind::Load && st.dst == "in1"; }), b_vals);
    const Stmt* a0 = find_stmt(k.body, [](const Stmt& st) { return st.kind == StmtKind::Load && st.dst == "in0"; });
    EXPECT_NE(a0->index[0].str().find("lane / 4"), std::string::npos) << a0->index[0].str();
    auto alloc = [&](const std::string& name) {
      const Stmt* a = find_stmt(k.body, [&](const Stmt& st) { return st.kind == StmtKind::Alloc && st.dst == name; });
      std::vector<int64_t> ext;
      if (a)
        for (const auto& e : a->index) ext.push_back(e.const_value());
      return ext;
    };
    EXPECT_EQ(alloc("acc3"), (std::vector<int64_t>{2, 4, 4}));
    EXPECT_EQ(alloc("in0"), (std::vector<int64_t>{2, a_vals}));
    EXPECT_EQ(alloc("in1"), (std::vector<int64_t>{4, b_vals}));
  }
}

TEST(MmaTiling, EpilogueCopiesStaySingleAssignment) {
  CompileState s = passcheck::compile_sm90a("relu(matmul(A[32,16]:f16, B[16,16]:f16))",
                                            "ATOM=mma_f16,WM=1,WN=1,FM=2,FN=2,BK=16,STAGE=sync",
                                            "k:025_lower_mma");
  const KernelOp& k = s.kernel.kernels.at(0);
  for (int v = 0; v < 4; ++v)
    EXPECT_TRUE(find_stmt(k.body, [&](const Stmt& st) {
      return st.kind == StmtKind::Compute && st.dst.find("_v" + std::to_string(v)) != std::string::npos;
    })) << "value " << v;
}

// sm_90a's limits with another arch's instructions (sm_75 has no Target::for_arch).
Target arch(const std::string& name) {
  Target t = Target::for_arch("sm_90a");
  t.arch = name;
  return t;
}

TEST(MmaTiling, KnobErrorsNameTheProblemAndTheFix) {
  auto has = [](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg;
  };
  const std::string f16 = "matmul(A[64,64]:f16, B[64,64]:f16)";
  has(passcheck::error_of("matmul(A[64,64]:f32, B[64,64]:f32)", "ATOM=mma_f16"),
      "ATOM=mma_f16 multiplies f16 operands");
  has(passcheck::error_of("matmul(A[64,64]:bf16, B[64,64]:bf16)", "ATOM=mma_f16"),
      "input A is bf16");
  has(passcheck::error_of(f16, "ATOM=mma_tf32"), "input A is f16");
  has(passcheck::error_of(f16, "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=4,BM=128"),
      "BM=128 does not match WM=2,FM=2 with 16-wide atoms");
  has(passcheck::error_of(f16, "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=4,BN=32"), "(leave BN unset");
  has(passcheck::error_of(f16, "ATOM=mma_f16,STAGE=direct"),
      "STAGE=direct: mma fragments are read from shared slabs");
  has(passcheck::error_of(f16, "ATOM=mma_f16,STAGE=tma"), "STAGE=sync or STAGE=cp_async");
  has(passcheck::error_of(f16, "ATOM=mma_f16,BK=24"), "BK=24 is not a multiple of the depth 16");
  has(passcheck::error_of("matmul(A[64,64]:tf32, B[64,64]:tf32)", "ATOM=mma_tf32,BK=12"),
      "BK=12 is not a multiple of the depth 8 of mma_m16n8k8_f32_tf32 (ATOM=mma_tf32): a slab "
      "holds whole atoms; use BK=16");
  EXPECT_EQ(passcheck::error_of(f16, "ATOM=mma_f16,SPLITK=2"),
            "");  // tests/cpu/passes/test_split_k_mma.cpp
  has(passcheck::error_of(f16, "ATOM=mma_f16,WM=2"), "WM and WN go together");
  has(passcheck::error_of(f16, "ATOM=mma_f16,WM=8,WN=8"),
      "2048 threads per block; the limit is 1024");
  has(passcheck::error_of(f16, "ATOM=mma_f16", arch("sm_75")), "ATOM=mma_f16 needs sm_80 or newer");
  EXPECT_EQ(passcheck::error_of(f16, "ATOM=mma_f16", arch("sm_80")), "");
  EXPECT_THROW(Knobs::parse("ATOM=mma_f8"), Error);
}

TEST(MmaTiling, DefaultsOfAShapeClassDoNotLeakSimtTilesIntoMma) {
  // An mma atom replaces the class's SIMT tile, staging and split count with its own
  // defaults (2x2 warps of 4x8 atoms, BK=64, 2-deep cp.async ring, row-derived swizzle).
  Knobs large = Knobs::parse("BM=128,BN=128,FM=8,FN=8,BK=16,STAGE=sync,STAGES=2,MIN_BLOCKS=2");
  Knobs r = resolve_knobs(large, Knobs::parse("ATOM=mma_f16"));
  EXPECT_FALSE(r.has("BM"));
  EXPECT_FALSE(r.has("MIN_BLOCKS"));
  EXPECT_EQ(r.get_int("FM", 0), 4);
  EXPECT_EQ(r.get_int("FN", 0), 8);
  EXPECT_EQ(r.get_str("STAGE", ""), "cp_async");
  EXPECT_EQ(r.get_int("STAGES", 0), 2);
  EXPECT_EQ(r.get_int("BK", 0), 64);
  EXPECT_EQ(r.get_str("SWIZZLE", ""), "xor");
  EXPECT_FALSE(r.has("PAD_SMEM"));
  EXPECT_EQ(r.get_int("VECTORIZE", 0), 8);
  // An explicit knob of a group still drops that group's defaults.
  Knobs e = resolve_knobs(large, Knobs::parse("ATOM=mma_f16,STAGE=sync"));
  EXPECT_EQ(e.get_str("STAGE", ""), "sync");
  EXPECT_FALSE(e.has("STAGES"));
  EXPECT_EQ(e.get_int("FN", 0), 8);
  Knobs split = Knobs::parse("SPLITK=64,SPLITK_MODE=atomic,BK=16");
  EXPECT_FALSE(resolve_knobs(split, Knobs::parse("ATOM=mma_f16")).has("SPLITK"));
  // ATOM=fma keeps them: the SIMT defaults are unchanged.
  EXPECT_EQ(resolve_knobs(large, Knobs::parse("ATOM=fma")).get_int("BM", 0), 128);
  EXPECT_EQ(resolve_knobs(split, Knobs()).get_int("SPLITK", 0), 64);
}


TEST(MmaTiling, SixteenBitOperandsDefaultToTheTensorCores) {
  auto resolved = [](const std::string& e, const std::string& knobs, const char* arch = "sm_90a") {
    Graph g = parse_expression(e);
    DefaultChoice d = default_knobs(g, Target::for_arch(arch));
    return resolve_knobs(d.knobs, Knobs::parse(knobs), d.mma);
  };
  // On sm_90a a large aligned grid is wgmma's (SixteenBitLargeGridsTakeWgmmaOnSm90a); the
  // mma.sync schedule is checked on sm_80.
  const std::string bf16 = "matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)";
  Knobs k = resolved(bf16, "", "sm_80");
  EXPECT_EQ(k.get_str("ATOM", ""), "mma_bf16");
  EXPECT_EQ(k.get_int("FN", 0), 8);
  EXPECT_EQ(k.get_str("EPILOGUE", ""), "smem");
  EXPECT_EQ(resolved("matmul(A[100,200]:f16, B[200,300]:f16)", "").get_str("ATOM", ""), "mma_f16");
  // f32 keeps fp32 arithmetic (tf32 would change the numeric contract); split-K (before
  // sm_90a, which takes wgmma for it) and tiny shapes keep their SIMT schedules; sm_75 has
  // no m16n8k16.
  EXPECT_EQ(resolved("matmul(A[4096,4096]:f32, B[4096,4096]:f32)", "").get_str("ATOM", "fma"), "fma");
  EXPECT_EQ(resolved("matmul(A[128,16384]:bf16, B[16384,128]:bf16)", "", "sm_80").get_str("ATOM", "fma"), "fma");
  EXPECT_EQ(resolved("matmul(A[128,16384]:bf16, B[16384,128]:bf16)", "").get_str("ATOM", "fma"),
            "wgmma_bf16");
  EXPECT_EQ(resolved("matmul(A[8,8]:f16, B[8,8]:f16)", "").get_str("ATOM", "fma"), "fma");
  // Knobs written for the SIMT schedule keep it: an explicit tile, or ATOM=fma. A split
  // count keeps the tensor cores (split-K works on mma tiles), and its atomic combine the
  // direct epilogue (the staged one copies finished values).
  Knobs simt = resolved(bf16, "BM=64,BN=64", "sm_80");
  EXPECT_EQ(simt.get_str("ATOM", "fma"), "fma");
  EXPECT_EQ(simt.get_str("STAGE", ""), "sync");
  EXPECT_EQ(resolved(bf16, "SPLITK=2", "sm_80").get_str("ATOM", "fma"), "mma_bf16");
  EXPECT_EQ(resolved(bf16, "SPLITK=2", "sm_80").get_str("EPILOGUE", ""), "smem");
  EXPECT_EQ(resolved(bf16, "SPLITK=2,SPLITK_MODE=fixup", "sm_80").get_str("EPILOGUE", ""), "direct");
  Knobs fma = resolved(bf16, "ATOM=fma", "sm_80");
  EXPECT_EQ(fma.get_int("BM", 0), 128);
  EXPECT_EQ(fma.get_int("FN", 0), 8);
  // A staging knob alone keeps the default atom and its tile.
  Knobs staged = resolved(bf16, "STAGES=3", "sm_80");
  EXPECT_EQ(staged.get_str("ATOM", ""), "mma_bf16");
  EXPECT_EQ(staged.get_int("STAGES", 0), 3);
  EXPECT_EQ(staged.get_int("FN", 0), 8);
}
TEST(MmaTiling, SixteenBitLargeGridsTakeWgmmaOnSm90a) {
  auto resolved = [](const std::string& e, const std::string& knobs, const char* arch) {
    Graph g = parse_expression(e);
    DefaultChoice d = default_knobs(g, Target::for_arch(arch));
    const std::string atom = Knobs::parse(knobs).get_str("ATOM", d.knobs.get_str("ATOM", "fma"));
    return resolve_knobs(d.knobs, Knobs::parse(knobs),
                         atom.rfind("wgmma_", 0) == 0 ? d.wgmma : d.mma);
  };
  const std::string big = "matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)";
  Knobs k = resolved(big, "", "sm_90a");
  EXPECT_EQ(k.get_str("ATOM", ""), "wgmma_bf16");
  EXPECT_EQ(k.get_int("BN", 0), 256);
  EXPECT_EQ(k.get_int("WARP_SPECIALIZE", 0), 1);
  EXPECT_EQ(k.get_int("PERSISTENT", 0), 1);
  EXPECT_EQ(resolved("linear(X[8192,4096]:f16, W[1024,4096]:f16)", "", "sm_90a").get_str("ATOM", ""),
            "wgmma_f16");
  // The tile width follows the persistent grid's rounds (132 SMs): 192 columns where 256
  // leaves most of the last round idle and 192 saves 5% or more of rounds x width.
  auto width = [&](const std::string& e) { return resolved(e, "", "sm_90a").get_int("BN", 0); };
  EXPECT_EQ(width("matmul(A[3072,4096]:bf16, B[4096,3072]:bf16)"), 192);  // 3 x 256 -> 3 x 192
  EXPECT_EQ(width("matmul(A[2560,8192]:f16, B[8192,2304]:f16)"), 192);    // 2 x 256 -> 2 x 192
  EXPECT_EQ(width("matmul(A[3000,1024]:bf16, B[1024,3000]:bf16)"), 192);  // ragged N
  EXPECT_EQ(width("matmul(A[8192,8192]:bf16, B[8192,8192]:bf16)"), 256);  // 16 x 256 vs 21 x 192
  EXPECT_EQ(width("matmul(A[4096,4096]:bf16, B[4096,14336]:bf16)"), 256);
  EXPECT_EQ(width(big), 256);
  EXPECT_EQ(resolved("matmul(A[3072,4096]:bf16, B[4096,3072]:bf16)", "", "sm_90a")
                .get_int("CLUSTER_M", 1), 2);  // 384 tiles of 192: two waves and more
  EXPECT_EQ(resolved("matmul(A[3072,4096]:f32, B[3072,4096]:f32.T)", "ATOM=wgmma_tf32", "sm_90a")
                .get_int("BN", 0), 256);  // tf32 keeps 256 (192 unmeasured)
  // Half a wave of 128x256 tiles is enough (2048^3: 128 tiles); below it the medium
  // schedule takes up to 16 rows of 128 (1024^3: one wave of 128x64 tiles).
  EXPECT_EQ(resolved("matmul(A[2048,2048]:bf16, B[2048,2048]:bf16)", "", "sm_90a").get_str("ATOM", ""),
            "wgmma_bf16");
  Knobs k1024 = resolved("matmul(A[1024,1024]:bf16, B[1024,1024]:bf16)", "", "sm_90a");
  EXPECT_EQ(k1024.get_str("ATOM", ""), "wgmma_bf16");
  EXPECT_EQ(k1024.get_int("BN", 0), 64);
  EXPECT_EQ(k1024.get_int("PERSISTENT", 0), 1);
  // sm_80 has no wgmma; rows TMA cannot load (K = 4095) take wgmma on the threads' copies
  // (STAGE=cp_async; batches: BatchedSixteenBitGemmsTakeWgmmaOnSm90a); an explicit
  // ATOM=mma_bf16 gets the mma schedule.
  Knobs ragged = resolved("matmul(A[4096,4095]:bf16, B[4095,4096]:bf16)", "", "sm_90a");
  EXPECT_EQ(ragged.get_str("ATOM", ""), "wgmma_bf16");
  EXPECT_EQ(ragged.get_str("STAGE", ""), "cp_async");
  EXPECT_EQ(resolved(big, "", "sm_80").get_str("ATOM", ""),
            "mma_bf16");
  // An explicit wgmma tile starts from none of the default's organization knobs.
  Knobs tile = resolved(big, "ATOM=wgmma_bf16,WM=1,BN=256", "sm_90a");
  EXPECT_FALSE(tile.has("WARP_SPECIALIZE"));
  EXPECT_FALSE(tile.has("PERSISTENT"));
  EXPECT_EQ(resolved(big, "STAGES=3", "sm_90a").get_int("PERSISTENT", 0), 1);
  Knobs mma = resolved(big, "ATOM=mma_bf16", "sm_90a");
  EXPECT_EQ(mma.get_int("FN", 0), 8);
  EXPECT_FALSE(mma.has("WARP_SPECIALIZE"));
  // Few 128x128 tiles (fewer than half the SMs) and K >= 4096: wgmma in cuBLAS's tiling,
  // 64x32 tiles without clusters (measured faster on H100), K split S ways with the partial
  // tiles summed by the reduce kernel (measured faster than the one-launch sum), S tiles'
  // worth of CTAs filling about two thirds of the SMs (11 on the 132-SM target: 88 CTAs).
  // Four times the tiles: 3 splits (96 CTAs).
  Knobs skinny = resolved("matmul(A[128,16384]:bf16, B[16384,128]:bf16)", "", "sm_90a");
  EXPECT_EQ(skinny.get_str("ATOM", ""), "wgmma_bf16");
  EXPECT_FALSE(skinny.has("CLUSTER_M"));
  EXPECT_FALSE(skinny.has("CLUSTER_N"));
  EXPECT_EQ(skinny.get_int("SPLITK", 0), 11);
  EXPECT_EQ(skinny.get_str("SPLITK_MODE", ""), "reduce");
  EXPECT_EQ(skinny.get_int("WARP_SPECIALIZE", 0), 1);
  EXPECT_EQ(skinny.get_int("BN", 0), 32);
  EXPECT_EQ(skinny.get_int("WM", 0), 1);
  EXPECT_FALSE(skinny.has("PERSISTENT"));
  EXPECT_FALSE(skinny.has("CLUSTER_K"));
  Knobs four = resolved("relu(linear(X[256,4096]:f16, W[256,4096]:f16, bias[256]:f16))", "",
                        "sm_90a");
  EXPECT_EQ(four.get_str("ATOM", ""), "wgmma_f16");
  EXPECT_FALSE(four.has("CLUSTER_N"));
  EXPECT_EQ(four.get_int("SPLITK", 0), 3);
  EXPECT_EQ(resolved("matmul(A[256,2048]:bf16, B[2048,256]:bf16)", "", "sm_90a").get_int("SPLITK", 1), 1);
  EXPECT_EQ(resolved("matmul(A[128,16384]:bf16, B[16384,128]:bf16)", "", "sm_80").get_str("ATOM", ""), "");
}

TEST(MmaTiling, BatchedSixteenBitGemmsTakeWgmmaOnSm90a) {
  // A batch of 16-bit GEMMs whose rows TMA can load, each entry at least 128 x 128, with
  // half a wave of 128x256 (batch, tile) units on the 132-SM target: the large schedule,
  // persistent over the units (t:027). A bmm's [B, M, N] output leaves through the rank-3
  // TMA store (k:053), without clusters but for 640 <= K < 1024 (as measured), and then any K takes it; rank-4
  // outputs keep the direct epilogue, clusters from two waves, and K >= 640.
  auto resolved = [](const std::string& e, const char* arch = "sm_90a") {
    Graph g = parse_expression(e);
    DefaultChoice d = default_knobs(g, Target::for_arch(arch));
    const std::string atom = d.knobs.get_str("ATOM", "fma");
    return resolve_knobs(d.knobs, Knobs(), atom.rfind("wgmma_", 0) == 0 ? d.wgmma : d.mma);
  };
  const std::string batch = "bmm(A[64,512,640]:f16, B[64,640,512]:f16)";  // 512 units of 128x256
  Knobs k = resolved(batch);
  EXPECT_EQ(k.get_str("ATOM", ""), "wgmma_f16");
  EXPECT_EQ(k.get_int("PERSISTENT", 0), 1);
  EXPECT_EQ(k.get_int("WARP_SPECIALIZE", 0), 1);
  EXPECT_EQ(k.get_str("EPILOGUE", ""), "tma_store");
  EXPECT_EQ(k.get_int("EPI_BUFFERS", 0), 2);
  // 640 <= K < 1024 through the TMA store pairs CTAs along M (the ragged 8x1000x776x1000
  // bmm: 0.85x -> 0.97x cuBLAS with CLUSTER_M=2, bench/NOTES.md "2-CTA clusters on medium
  // and batched GEMMs").
  EXPECT_EQ(k.get_int("CLUSTER_M", 1), 2);
  Knobs rank4 = resolved("matmul(A[4,16,512,1024]:bf16, B[4,16,1024,512]:bf16)");
  EXPECT_EQ(rank4.get_str("ATOM", ""), "wgmma_bf16");
  EXPECT_EQ(rank4.get_str("EPILOGUE", ""), "direct");
  EXPECT_EQ(rank4.get_int("CLUSTER_M", 1), 2);  // 512 units: two waves and more
  EXPECT_EQ(resolved("bmm(A[32,1024,1024]:bf16, B[32,1024,1024]:bf16)").get_str("ATOM", ""),
            "wgmma_bf16");
  EXPECT_EQ(resolved("bmm(A[4,4096,4096]:bf16, B[4,4096,4096]:bf16)").get_str("ATOM", ""),
            "wgmma_bf16");
  // Ragged M and N with 16-byte rows (K = 776, N = 296): wgmma, 6 x 8 x 2 units.
  EXPECT_EQ(resolved("bmm(A[6,1000,776]:bf16, B[6,776,296]:bf16)").get_str("ATOM", ""),
            "wgmma_bf16");
  // The tile width counts the batch's units: one 1024^2 entry is one round of either
  // width (192, as 2-D shapes get), 32 of them 8 rounds of 256 against 12 of 192.
  EXPECT_EQ(resolved("bmm(A[32,1024,1024]:bf16, B[32,1024,1024]:bf16)").get_int("BN", 0), 256);
  EXPECT_EQ(resolved("bmm(A[32,1024,1024]:bf16, B[32,1024,1024]:bf16)").get_int("CLUSTER_M", 1), 1);
  // Q.K^T-shaped short K through the TMA store: 128x128 tiles (0.94-1.05x cuBLAS on H100,
  // mma.sync 0.68-0.85x).
  Knobs qk = resolved("bmm(A[64,512,64]:f16, B[64,64,512]:f16)");
  EXPECT_EQ(qk.get_str("ATOM", ""), "wgmma_f16");
  EXPECT_EQ(qk.get_int("BN", 0), 128);
  EXPECT_EQ(qk.get_str("EPILOGUE", ""), "tma_store");
  EXPECT_EQ(resolved("bmm(A[64,512,576]:f16, B[64,576,512]:f16)").get_str("ATOM", ""), "wgmma_f16");
  // What keeps mma.sync: sm_80; a row pitch TMA cannot address (K = 1000: 2000 B, but
  // N = 500: 1000 B); entries under 128 x 128; too few units (2 x 4 x 2 = 16 < 66); a K
  // under 640 with a rank-4 output (8 x 16 x 512x512x128: direct stores, where the
  // attention-shaped 64 x 512x512x64 ran 0.36x on wgmma, 0.81x on mma.sync); f32/tf32.
  EXPECT_EQ(resolved(batch, "sm_80").get_str("ATOM", ""), "mma_f16");
  EXPECT_EQ(resolved("bmm(A[64,512,1000]:f16, B[64,1000,500]:f16)").get_str("ATOM", ""), "mma_f16");
  EXPECT_EQ(resolved("bmm(A[64,64,1024]:f16, B[64,1024,64]:f16)").get_str("ATOM", ""), "mma_f16");
  EXPECT_EQ(resolved("bmm(A[2,512,1024]:bf16, B[2,1024,512]:bf16)").get_str("ATOM", ""), "mma_bf16");
  EXPECT_EQ(resolved("matmul(A[8,16,512,128]:bf16, B[8,16,128,512]:bf16)").get_str("ATOM", ""),
            "mma_bf16");
  EXPECT_EQ(resolved("bmm(A[64,512,1024]:f32, B[64,1024,512]:f32)").get_str("ATOM", "fma"), "fma");
  // A long K that the 2-D rules would split stays one batched schedule: the batch fills the SMs.
  Knobs long_k = resolved("bmm(A[64,256,4096]:bf16, B[64,4096,256]:bf16)");
  EXPECT_EQ(long_k.get_str("ATOM", ""), "wgmma_bf16");
  EXPECT_EQ(long_k.get_int("SPLITK", 1), 1);
  EXPECT_EQ(long_k.get_int("PERSISTENT", 0), 1);
  // The batched defaults build to Kernel IR: one grid of min(units, SMs) CTAs.
  CompileState s;
  s.graph = parse_expression(batch);
  s.knobs = k;
  s.target = Target::for_arch("sm_90a");
  ASSERT_NO_THROW(run_pipeline(s));
  EXPECT_EQ(s.kernel.kernels.at(0).grid[0].const_value(), 132);  // 66 clusters of 2 walk 256
  EXPECT_EQ(s.kernel.kernels.at(0).grid[2].const_value(), 1);
}

// The Hopper defaults build to Kernel IR (shared memory fits): the TMA-store epilogue
// through 2 strip buffers (32 KB) beside the 4-stage ring for every K and output type (the
// whole-tile form's 128 KB f32 tile did not fit: tf32 4096^3 failed so on H100).
TEST(MmaTiling, HopperDefaultsFitSharedMemory) {
  struct C {
    const char* expr;
    const char* knobs;
    const char* epilogue;
  };
  for (const C& c : {C{"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", "", "tma_store"},
                     C{"matmul(A[8192,8192]:bf16, B[8192,8192]:bf16)", "", "tma_store"},
                     C{"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16, out=f32)", "", "tma_store"},
                     C{"matmul(A[4096,4096]:f32, B[4096,4096]:f32.T)", "ATOM=wgmma_tf32", "tma_store"}}) {
    SCOPED_TRACE(c.expr);
    CompileState s;
    s.graph = parse_expression(c.expr);
    // As the driver resolves them: the schedule of the effective atom (compile.cpp).
    DefaultChoice d = default_knobs(s.graph, Target::for_arch("sm_90a"));
    const Knobs given = Knobs::parse(c.knobs);
    const std::string atom = given.get_str("ATOM", d.knobs.get_str("ATOM", "fma"));
    s.knobs = resolve_knobs(d.knobs, given, atom.rfind("wgmma_", 0) == 0 ? d.wgmma : d.mma);
    s.target = Target::for_arch("sm_90a");
    EXPECT_NO_THROW(run_pipeline(s));
    EXPECT_EQ(s.used_knobs["EPILOGUE"], c.epilogue);
    EXPECT_EQ(s.used_knobs["EPI_BUFFERS"], "2");
    EXPECT_EQ(s.used_knobs["STAGES"], "4");
  }
}

TEST(MmaTiling, ShapeClassRulesFromTheTuningSuite) {
  // The defaults `loom tune` measured better on H100 (bench/NOTES.md, 2026-11-22, the tuner).
  auto resolved = [](const std::string& e, const std::string& arch = "sm_90a") {
    Graph g = parse_expression(e);
    DefaultChoice d = default_knobs(g, Target::for_arch(arch));
    return std::make_pair(d.shape_class, resolve_knobs(d.knobs, Knobs(), d.mma));
  };
  // Decode: a few rows against a big weight get 64x32 blocks of 1x2 warps, 4x2 atoms
  // (on sm_80: sm_90a runs decode swapped on wgmma, test_swap_ab_compile.cpp).
  auto [decode_class, decode] = resolved("linear(X[16,4096]:bf16, W[4096,4096]:bf16)", "sm_80");
  EXPECT_EQ(decode_class, "decode");
  EXPECT_EQ(decode.get_str("ATOM", ""), "mma_bf16");
  EXPECT_EQ(decode.get_int("WM", 0) * decode.get_int("FM", 0) * 16, 64);
  EXPECT_EQ(decode.get_int("WN", 0) * decode.get_int("FN", 0) * 8, 32);
  EXPECT_EQ(decode.get_int("STAGES", 0), 3);
  EXPECT_FALSE(decode.has("SPLITK"));
  // A small square is not decode.
  auto [small_class, small] = resolved("matmul(A[64,64]:f16, B[64,64]:f16)");
  EXPECT_NE(small_class, "decode");
  // Ragged grids too small for 128x64 tiles to fill the SMs twice take 64x64 blocks of
  // 2x4 warps (3.4x at 1000x333x777 f16); big ragged grids keep 128x64.
  Knobs few = resolved("matmul(A[1000,777]:f16, B[777,333]:f16)").second;
  EXPECT_EQ(few.get_int("WM", 0) * few.get_int("FM", 0) * 16, 64);
  EXPECT_EQ(few.get_int("WN", 0) * few.get_int("FN", 0) * 8, 64);
  EXPECT_EQ(few.get_int("WM", 0) * few.get_int("WN", 0), 8);
  Knobs many = resolved("matmul(A[3000,3000]:f16, B[3000,3000]:f16)").second;
  EXPECT_EQ(many.get_int("WM", 0) * many.get_int("FM", 0) * 16, 128);
  EXPECT_EQ(many.get_int("WN", 0) * many.get_int("FN", 0) * 8, 64);
  // Aligned 16-bit grids with fewer 128x128 tiles than SMs take 64x128 blocks.
  Knobs small_grid = resolved("matmul(A[1024,1024]:bf16, B[1024,1024]:bf16)").second;
  EXPECT_EQ(small_grid.get_int("WM", 0) * small_grid.get_int("FM", 0) * 16, 64);
  EXPECT_EQ(small_grid.get_int("WN", 0) * small_grid.get_int("FN", 0) * 8, 128);
  Knobs full_grid = resolved("matmul(A[2048,2048]:bf16, B[2048,2048]:bf16)").second;
  EXPECT_EQ(full_grid.get_int("WM", 0) * full_grid.get_int("FM", 0) * 16, 128);
  // Aligned 16-bit tiles walk 8-row groups (1.01-1.19x on the suite's squares and projections).
  EXPECT_EQ(resolved("matmul(A[4096,4096]:f16, B[4096,4096]:f16)").second.get_int("GROUP_M", 0), 8);
  // f32 with a full wave of 256x128 tiles takes them; smaller grids keep 128x128.
  auto [big_class, big] = resolved("matmul(A[4096,4096]:f32, B[4096,4096]:f32)");
  EXPECT_EQ(big.get_int("BM", 0), 256);
  EXPECT_EQ(big.get_int("BN", 0), 128);
  EXPECT_FALSE(big.has("MIN_BLOCKS"));
  EXPECT_EQ(resolved("matmul(A[3000,5000]:f32, B[5000,1234]:f32)").second.get_int("BM", 0), 128);
}

TEST(MmaTiling, AffineLaneFormReproducesEveryMmaLayout) {
  for (const char* id : {"mma_m16n8k16_f32_f16", "mma_m16n8k16_f32_bf16", "mma_m16n8k8_f32_tf32"})
    for (const char* op : {"A", "B", "C"}) {
      const OperandLayout& l = operand_layout(atom(id), op);
      AffineLaneForm f = affine_lane_form(l);
      ASSERT_EQ(int(f.offset.size()), l.values_per_thread);
      for (int lane = 0; lane < 32; ++lane)
        for (int v = 0; v < l.values_per_thread; ++v) {
          auto [r, c] = l.map(lane, v);
          EXPECT_EQ(r, f.row_g * (lane / 4) + f.row_t * (lane % 4) + f.offset[size_t(v)].first);
          EXPECT_EQ(c, f.col_g * (lane / 4) + f.col_t * (lane % 4) + f.offset[size_t(v)].second);
        }
    }
  // The PTX ISA's formulas: m16n8k16 A row g + 8((v>>1)&1), column 2t + (v&1) + 8(v>>2).
  AffineLaneForm a = affine_lane_form(operand_layout(atom("mma_m16n8k16_f32_f16"), "A"));
  EXPECT_EQ(a.row_g, 1);
  EXPECT_EQ(a.col_t, 2);
  EXPECT_EQ(a.offset[6], (std::pair<int, int>{8, 8}));
  // A layout that is not affine in the lane is refused, naming the lane.
  OperandLayout swizzled{"X", 16, 8, 4, [](int lane, int v) {
                           return std::pair<int, int>{(lane / 4) ^ (v & 1), 2 * (lane % 4) + v / 2};
                         }};
  try {
    affine_lane_form(swizzled);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not affine in (lane / 4, lane % 4)"), std::string::npos)
        << e.what();
  }
}

TEST(MmaTiling, HopperModelShapeRules) {
  // The sm_90a rules set from the model-shape suite (bench/NOTES.md, 2026-11-27, the
  // model-shape suite), on H100's 132 SMs.
  auto resolved = [](const std::string& e) {
    Graph g = parse_expression(e);
    DefaultChoice d = default_knobs(g, Target::for_arch("sm_90a"));
    const std::string atom = d.knobs.get_str("ATOM", "fma");
    return resolve_knobs(d.knobs, Knobs(), atom.rfind("wgmma_", 0) == 0 ? d.wgmma : d.mma);
  };
  // One row of 128-row tiles: one wave of the widest tile, non-persistent, a deep ring.
  for (auto [e, bn] : {std::pair<const char*, int64_t>{"linear(X[128,4096]:bf16, W[4096,4096]:bf16)", 32},
                       {"linear(X[128,4096]:bf16, W[6144,4096]:bf16)", 48},
                       {"linear(X[128,8192]:bf16, W[10240,8192]:bf16)", 80},
                       {"linear(X[128,8192]:bf16, W[8192,8192]:bf16)", 64}}) {
    SCOPED_TRACE(e);
    Knobs k = resolved(e);
    EXPECT_EQ(k.get_str("ATOM", ""), "wgmma_bf16");
    EXPECT_EQ(k.get_int("WM", 0), 2);
    EXPECT_EQ(k.get_int("BN", 0), bn);
    EXPECT_EQ(k.get_int("STAGES", 0), 8);
    EXPECT_EQ(k.get_int("PERSISTENT", 0), 0);
    EXPECT_EQ(k.get_int("SPLITK", 1), 1);
  }
  // More rows (up to 16 of 128, where the large class begins): the persistent TMA-store
  // schedule at the medium width; 1024 tokens of a 2048-wide model get one wave of 128x128.
  for (const char* e : {"linear(X[1024,2048]:bf16, W[2048,2048]:bf16)",
                        "linear(X[1024,8192]:bf16, W[2048,8192]:bf16)",
                        "matmul(A[2048,4096]:bf16, B[4096,1024]:bf16)"}) {
    SCOPED_TRACE(e);
    Knobs k = resolved(e);
    EXPECT_EQ(k.get_str("ATOM", ""), "wgmma_bf16");
    EXPECT_EQ(k.get_int("BN", 0), 128);
    EXPECT_EQ(k.get_int("PERSISTENT", 0), 1);
    EXPECT_EQ(k.get_str("EPILOGUE", ""), "tma_store");
  }
  // Up to four rows: the persistent TMA-store schedule at the medium width.
  Knobs m512 = resolved("linear(X[512,4096]:bf16, W[4096,4096]:bf16)");
  EXPECT_EQ(m512.get_str("ATOM", ""), "wgmma_bf16");
  EXPECT_EQ(m512.get_int("BN", 0), 128);
  EXPECT_EQ(m512.get_int("PERSISTENT", 0), 1);
  EXPECT_EQ(m512.get_str("EPILOGUE", ""), "tma_store");
  // The large schedule's widths: 160 where it saves a round's worth (15%), not at
  // 512 x 14336 x 4096 (6% predicted, measured slower).
  EXPECT_EQ(resolved("linear(X[512,8192]:bf16, W[10240,8192]:bf16)").get_int("BN", 0), 160);
  EXPECT_EQ(resolved("linear(X[512,4096]:bf16, W[14336,4096]:bf16)").get_int("BN", 0), 256);
  // The split-K schedule keeps few-tile shapes (a one-row tile would leave SMs idle).
  EXPECT_GT(resolved("matmul(A[128,16384]:bf16, B[16384,128]:bf16)").get_int("SPLITK", 1), 1);
  // 77 rows: the swapped decode schedule, two CTAs of 40 columns per weight slab.
  Knobs m77 = resolved("linear(X[77,4096]:f16, W[4096,4096]:f16)");
  EXPECT_EQ(m77.get_str("ATOM", ""), "wgmma_f16");
  EXPECT_EQ(m77.get_int("SWAP_AB", 0), 1);
  EXPECT_EQ(m77.get_int("BN", 0), 40);
  // Batches of thin GEMMs: experts' few tokens (64x256 and 128x128 tiles), P.V's few columns
  // (128x64), non-persistent.
  for (auto [e, wm, bn] : {std::tuple<const char*, int64_t, int64_t>{
                               "bmm(X[8,16,4096]:bf16, W[8,4096,28672]:bf16)", 1, 256},
                           {"bmm(X[8,128,4096]:bf16, W[8,4096,28672]:bf16)", 2, 128},
                           {"bmm(P[512,512,512]:f16, V[512,512,64]:f16)", 2, 64}}) {
    SCOPED_TRACE(e);
    Knobs k = resolved(e);
    EXPECT_EQ(k.get_str("ATOM", "").rfind("wgmma_", 0), 0u);
    EXPECT_EQ(k.get_int("WM", 0), wm);
    EXPECT_EQ(k.get_int("BN", 0), bn);
    EXPECT_EQ(k.get_int("PERSISTENT", 0), 0);
  }
  // Q.K^T's short K: wgmma through the rank-3 TMA store (0.94-1.05x; with direct stores
  // 0.36-0.43x, mma.sync 0.68-0.85x).
  EXPECT_EQ(resolved("bmm(Q[512,512,64]:f16, K[512,64,512]:f16)").get_str("EPILOGUE", ""), "tma_store");
}

}  // namespace
}  // namespace loom
