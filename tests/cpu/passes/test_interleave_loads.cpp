// k:052_interleave_loads: with INTERLEAVE_LOADS=1 each fragment load sits right before
// its first FMA, nothing moves across a barrier, the answer is unchanged on the CPU
// interpreter (bit for bit: every accumulator sees the same FMAs in the same order), and
// the CUDA it leads to compiles with NVRTC for sm_90a and sm_80.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>

#include "frontend/parser.h"
#include "ir/interpreter.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {

using passcheck::expect_close;
using passcheck::run_level;

const char* kPass = "k:052_interleave_loads";

struct Compiled {
  CompileState state;
  std::string before, after;  // kernel IR around k:052
};

Compiled compile(const std::string& expr, const std::string& knobs,
                 const std::map<std::string, int64_t>& sizes = {}) {
  Compiled c;
  c.state.graph = parse_expression(expr);
  c.state.knobs = Knobs::parse(knobs);
  c.state.target = Target::for_arch("sm_90a");
  c.state.sizes = sizes;
  run_pipeline(c.state, "", [&](const Pass& p, const std::string& b, const std::string& a) {
    if (p.id != kPass) return;
    c.before = b;
    c.after = a;
  });
  return c;
}

// The block that declares register array `name` (the k_i body for `in0`).
const Block* block_declaring(const Block& b, const std::string& name) {
  for (const Stmt& s : b) {
    if (s.kind == StmtKind::Alloc && s.dst == name) return &b;
    if (s.kind == StmtKind::For || s.kind == StmtKind::If)
      if (const Block* inner = block_declaring(s.body, name)) return inner;
  }
  return nullptr;
}

bool is_const_index(const std::vector<Expr>& idx, std::vector<int64_t> want) {
  if (idx.size() != want.size()) return false;
  for (size_t d = 0; d < idx.size(); ++d)
    if (!idx[d].is_const() || idx[d].const_value() != want[d]) return false;
  return true;
}

bool reads(const Stmt& s, const std::string& array, std::vector<int64_t> index) {
  for (const Operand& a : s.args)
    if (a.name == array && is_const_index(a.index, index)) return true;
  return false;
}

bool is_load(const Stmt& s, const std::string& array, std::vector<int64_t> index, int width) {
  return s.kind == StmtKind::Load && s.dst == array && s.width == width &&
         is_const_index(s.dst_index, index);
}

// Index of the first statement of `b` that reads array[index], or b.size().
size_t first_reader(const Block& b, const std::string& array, std::vector<int64_t> index) {
  for (size_t i = 0; i < b.size(); ++i)
    if (reads(b[i], array, index)) return i;
  return b.size();
}

// 64x64 tile, 8x8 cells per thread: in0[8] filled by two v4 loads, in1[2, 4] by two.
const char* kGemm = "matmul(A[256,256]:f32, B[256,256]:f32)";
const char* kGemmKnobs = "BM=64,BN=64,FM=8,FN=8,BK=8,STAGE=sync,STAGES=2,PAD_SMEM=4";

TEST(InterleaveLoads, EachLoadSitsBeforeItsFirstFma) {
  Compiled c = compile(kGemm, std::string(kGemmKnobs) + ",INTERLEAVE_LOADS=1");
  EXPECT_NE(c.before, c.after);
  const Block* b = block_declaring(c.state.kernel.kernels[0].body, "in0");
  ASSERT_NE(b, nullptr) << c.after;
  for (const Stmt& s : *b)
    EXPECT_FALSE(s.kind == StmtKind::For && s.tier == Tier::Register)
        << "register loops touching fragments are written out:\n" << print_block(*b);
  // load in0[0..3]; load in1[0, 0..3]; fma(acc[0, 0, 0]) ...
  size_t first_fma = first_reader(*b, "in0", {0});
  ASSERT_GE(first_fma, 2u) << print_block(*b);
  EXPECT_TRUE(is_load((*b)[first_fma - 2], "in0", {0}, 4)) << print_block(*b);
  EXPECT_TRUE(is_load((*b)[first_fma - 1], "in1", {0, 0}, 4)) << print_block(*b);
  // in1[1, 0..3] waits for the first FMA of the second column group, in0[4..7] for row 4.
  for (auto [array, index, load_index] :
       std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>>>{
           {"in1", {1, 0}, {1, 0}}, {"in0", {4}, {4}}}) {
    size_t r = first_reader(*b, array, index);
    ASSERT_LT(r, b->size()) << print_block(*b);
    ASSERT_GT(r, first_fma);
    EXPECT_TRUE(is_load((*b)[r - 1], array, load_index, 4)) << print_block(*b);
    EXPECT_EQ((*b)[r].kind, StmtKind::Atom);
  }
  // Four loads, 64 FMAs, nothing else lost.
  int loads = 0, fmas = 0;
  for (const Stmt& s : *b) {
    loads += s.kind == StmtKind::Load;
    fmas += s.kind == StmtKind::Atom;
  }
  EXPECT_EQ(loads, 4);
  EXPECT_EQ(fmas, 64);
}

TEST(InterleaveLoads, OffLeavesTheIrAlone) {
  for (const char* k : {"", ",INTERLEAVE_LOADS=0"}) {
    Compiled c = compile(kGemm, std::string(kGemmKnobs) + k);
    EXPECT_EQ(c.before, c.after) << k;
    const Block* b = block_declaring(c.state.kernel.kernels[0].body, "in0");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->back().kind, StmtKind::For) << "the FMA nest stays one loop";
  }
}

// Input IR and expected IR: a load moves past register-only statements to its FMA; a
// barrier between a load and its FMA keeps the load where it was.
TEST(InterleaveLoads, NeverCrossesABarrier) {
  CompileState s;
  s.level = Level::Kernel;
  s.knobs = Knobs::parse("INTERLEAVE_LOADS=1");
  TensorDecl slab;
  slab.name = "S";
  slab.shape = {Expr(8)};
  slab.role = TensorRole::Shared;
  s.kernel.tensors = {slab};
  KernelOp k;
  k.name = "k";
  auto x = [](int64_t i) { return Operand::value("x", {Expr(i)}); };
  Stmt ld0 = Stmt::Load("x", "S", {Expr(0)});
  ld0.dst_index = {Expr(0)};
  Stmt ld1 = Stmt::Load("x", "S", {Expr(4)});
  ld1.dst_index = {Expr(1)};
  Stmt init = Stmt::Init("acc", 0);
  init.dst_index = {Expr(0)};
  Stmt fma0 = Stmt::Atom("fma_f32", "acc", {x(0), x(0)});
  fma0.dst_index = {Expr(0)};
  Stmt fma1 = Stmt::Atom("fma_f32", "acc", {x(1), x(1)});
  fma1.dst_index = {Expr(0)};
  k.body = {Stmt::Alloc("x", {Expr(2)}), Stmt::Alloc("acc", {Expr(1)}), ld0, ld1, init, fma0,
            Stmt::Barrier(), fma1};
  s.kernel.kernels = {k};
  find_pass(kPass)->run(s);
  EXPECT_EQ(print_block(s.kernel.kernels[0].body),
            print_block({Stmt::Alloc("x", {Expr(2)}), Stmt::Alloc("acc", {Expr(1)}), ld1, init,
                         ld0, fma0, Stmt::Barrier(), fma1}));
}

struct Case {
  Case(std::string e, std::string k, std::map<std::string, int64_t> sz = {})
      : expr(std::move(e)), knobs(std::move(k)), sizes(std::move(sz)) {}
  std::string expr, knobs;
  std::map<std::string, int64_t> sizes;
};

TEST(InterleaveLoads, InterpreterAgreesOnEveryStaging) {
  const std::vector<Case> cases = {
      {"matmul(A[70,45]:f32, B[45,66]:f32)", "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=sync,STAGES=2"},
      {"matmul(A[70,45]:f32, B[45,66]:f32)", "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=sync,STAGES=1,VECTORIZE=1"},
      {"matmul(A[70,45]:f32, B[45,66]:f32)",
       "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=cp_async,STAGES=3,PAD_SMEM=4,SLAB_KOUTER=1"},
      {"relu(matmul(A[70,44]:f32, B[44,66]:f32))", "BM=32,BN=64,FM=4,FN=8,BK=4,STAGE=cp_async,STAGES=2"},
      {"matmul(A[37,29]:f32, B[29,41]:f32)", "BM=16,BN=16,FM=4,FN=4,STAGE=direct"},
      {"matmul(A[K,M]:f32.T, B[N,K]:f32.T)", "BM=24,BN=16,FM=3,FN=2,BK=4,STAGE=sync,STAGES=2",
       {{"M", 50}, {"N", 35}, {"K", 21}}},
      {"matmul(A[33,77]:f16, B[77,40]:f16)", "BM=16,BN=16,FM=2,FN=2,BK=16,STAGE=cp_async,STAGES=3"},
      {"gelu(linear(X[33,40]:bf16, W[20,40]:bf16, bias[20]:bf16))",
       "BM=16,BN=16,FM=2,FN=4,BK=8,STAGE=sync,STAGES=2,VECTORIZE=4,UNROLL_K=0"},
      {"matmul(A[64,40]:f32, B[40,64]:f32)", "BM=64,BN=64,FM=4,FN=4,BK=8,STAGE=sync,STAGES=2,WM=4,WN=2,PIPELINE=0"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.expr + " knobs=" + c.knobs);
    Compiled on = compile(c.expr, c.knobs + ",INTERLEAVE_LOADS=1", c.sizes);
    Compiled off = compile(c.expr, c.knobs + ",INTERLEAVE_LOADS=0", c.sizes);
    EXPECT_NE(on.before, on.after) << "the pass found nothing to interleave:\n" << on.before;
    // The naive Loop IR is the reference.
    CompileState naive;
    naive.graph = parse_expression(c.expr);
    run_pipeline(naive, "l:000_lower_graph");
    Bindings inputs;
    inputs.symbols = c.sizes;
    make_random_inputs(naive.loop, inputs, 500 + i);
    HostTensor want = run_level(naive, Level::Loop, inputs);
    HostTensor got = run_level(on.state, Level::Kernel, inputs);
    expect_close(got, want, naive.graph.node(naive.graph.result()).dtype, "interleaved kernel");
    EXPECT_EQ(got.data, run_level(off.state, Level::Kernel, inputs).data)
        << "interleaving reordered some accumulator's FMAs";
  }
}

struct Cmd {
  int rc;
  std::string out;
};

Cmd loom_cmd(const std::string& args) {
  std::string cmd = std::string(LOOM_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

// NVRTC lives in loom_runtime, which pass tests do not link: the `loom` command compiles
// (as test_compile_kernels does in-process) and writes the cubin.
TEST(InterleaveLoads, NvrtcCompilesForSm90aAndSm80) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"matmul(A[4096,4096]:f32, B[4096,4096]:f32)", ""},
      {"matmul(A[M,K]:f16, B[N,K]:f16.T)", "BM=64,BN=64,FM=4,FN=8,BK=16,STAGE=cp_async,STAGES=3"},
      {"relu(matmul(A[256,128]:f32, B[128,192]:f32))", "BM=64,BN=64,FM=8,FN=8,STAGE=direct"},
  };
  std::string cubin = ::testing::TempDir() + "interleave_loads.cubin";
  for (const std::string arch : {"sm_90a", "sm_80"})
    for (const auto& [expr, knobs] : cases) {
      SCOPED_TRACE(arch + " " + expr + " " + knobs);
      std::remove(cubin.c_str());
      std::string k = knobs.empty() ? "INTERLEAVE_LOADS=1" : knobs + ",INTERLEAVE_LOADS=1";
      Cmd r = loom_cmd("compile -c '" + expr + "' --knobs " + k + " --target " + arch +
                       " --cubin " + cubin + " -o /dev/null");
      ASSERT_EQ(r.rc, 0) << r.out;
      std::ifstream f(cubin, std::ios::binary | std::ios::ate);
      EXPECT_GT(f ? int64_t(f.tellg()) : 0, 0) << "no cubin written:\n" << r.out;
    }
}

}  // namespace
}  // namespace loom
