// f16 accumulation (ACC=f16, ATOM=mma_f16): t:010 picks the atom table's m16n8k16
// .f16.f16.f16.f16 entry and k:025 lowers to it, so the accumulator fragments hold f16
// values. The CPU interpreter runs that warp atom through its layouts and rounds each
// mma's D to f16, so until k:025 every pass must give the naive Loop IR's answer and from
// k:025 on exactly the answer of a host emulation of the contract: the running sum of
// each output element rounded to f16 after every 16-deep slice of K (one mma), the
// epilogue on the rounded sum. Ragged and transposed operands, batch, bias + relu, every
// output type, both staging transports, ldmatrix or element fragments, double-buffered
// fragments. Then the rounding cadence itself, the IR k:025 leaves, and the knob errors.
#include <gtest/gtest.h>

#include <cmath>

#include "atoms/atoms.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "pass_check.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

using passcheck::run_level;

// How the test's expression reads its tensors: A [batch,] M x K (stored K x M with .T),
// B [batch,] K x N (stored N x K with .T), and optionally relu(add(matmul, bias[N])).
struct AccCase {
  std::string expr;
  std::string knobs;
  bool a_t = false, b_t = false;
  bool bias_relu = false;
};

// When the running sum is rounded to f16: after every `depth` products (depth 16: one
// mma m16n8k16, the contract; 1: after every FMA; 0: once at the end).
HostTensor emulate(const AccCase& c, const Bindings& in, DType out, int depth) {
  const HostTensor& A = in.tensors.at("A");
  const HostTensor& B = in.tensors.at("B");
  const bool batched = A.shape.size() == 3;
  const int64_t batch = batched ? A.shape[0] : 1;
  const size_t r = A.shape.size();
  const int64_t M = c.a_t ? A.shape[r - 1] : A.shape[r - 2];
  const int64_t K = c.a_t ? A.shape[r - 2] : A.shape[r - 1];
  const int64_t N = c.b_t ? B.shape[r - 2] : B.shape[r - 1];
  auto a = [&](int64_t b, int64_t i, int64_t k) {
    return A.data[size_t(b * M * K + (c.a_t ? k * M + i : i * K + k))];
  };
  auto bv = [&](int64_t b, int64_t k, int64_t j) {
    return B.data[size_t(b * K * N + (c.b_t ? j * K + k : k * N + j))];
  };
  HostTensor o;
  o.dtype = out;
  o.shape = batched ? std::vector<int64_t>{batch, M, N} : std::vector<int64_t>{M, N};
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        // The interpreter's mma: D = C, then D += a * b in k order, then D rounded.
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          acc += a(b, i, k) * bv(b, k, j);
          if (depth > 0 && ((k + 1) % depth == 0 || k + 1 == K)) acc = round_to_dtype(DType::F16, acc);
        }
        if (depth == 0) acc = round_to_dtype(DType::F16, acc);
        if (c.bias_relu)
          acc = eval_scalar_op(ScalarOp::Relu, acc + in.tensors.at("bias").data[size_t(j)]);
        o.data.push_back(round_to_dtype(out, acc));
      }
  return o;
}

DType out_dtype(const std::string& expr) {
  Graph g = parse_expression(expr);
  return g.node(g.result()).dtype;
}

CompileState check_case(const AccCase& c, uint64_t seed) {
  const DType out = out_dtype(c.expr);
  return passcheck::check_every_pass(
      c.expr, Knobs::parse("ATOM=mma_f16,ACC=f16," + c.knobs), seed, {}, {},
      passcheck::ContractChange{"k:025_lower_mma", [c, out](const Bindings& in) {
                                  return emulate(c, in, out, 16);
                                }});
}

// Two tests so that ctest runs them side by side: until k:025 every lane of the
// interpreter computes its warp's whole tile, which takes a while.
TEST(AccF16, EveryPassMatchesTheNaiveLoopIrThenTheF16Contract) {
  const std::vector<AccCase> cases = {
      // Ragged M, N and K (a K tail inside a slab), f32 output: f16 accumulation is
      // ~1e-3 away from the naive answer, 100x the f32 tolerance.
      {"matmul(A[37,29]:f16, B[29,45]:f16, out=f32)", "WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=sync"},
      // Both operands transposed, through cp.async, K over several slabs.
      {"matmul(A[70,37]:f16.T, B[45,70]:f16.T, out=f32)",
       "WM=1,WN=1,FM=2,FN=2,BK=32,STAGE=cp_async,STAGES=2", true, true},
      // Bias + relu fused on the unpacked accumulator, f16 and f32 outputs.
      {"relu(add(matmul(A[37,50]:f16, B[45,50]:f16.T, out=f32), bias[45]:f32))",
       "WM=2,WN=1,FM=1,FN=2,BK=16,STAGE=sync", false, true, true},
      {"relu(add(matmul(A[40,50]:f16, B[50,30]:f16), bias[30]:f32))",
       "WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=sync", false, false, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i], 600 + i);
}

TEST(AccF16, EveryPassOnBatchOutputTypesAndFragmentSchedules) {
  const std::vector<AccCase> cases = {
      {"bmm(A[3,20,40]:f16, B[3,40,17]:f16, out=f32)", "WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=sync"},
      // f16 output from an aligned tile: stored as accumulated, one .b32 per pair.
      {"matmul(A[32,48]:f16, B[48,32]:f16)", "WM=1,WN=2,FM=2,FN=2,BK=16,STAGE=sync"},
      {"matmul(A[40,33]:f16.T, B[40,24]:f16, out=bf16)",
       "WM=1,WN=1,FM=2,FN=2,BK=16,STAGE=cp_async,STAGES=3", true},
      // Element-wise fragments, and double-buffered ones over four atom steps per slab.
      {"matmul(A[30,70]:f16, B[70,20]:f16, out=f32)", "WM=1,WN=1,FM=2,FN=2,BK=32,STAGE=sync,LDMATRIX=0"},
      {"matmul(A[30,90]:f16, B[90,20]:f16, out=f32)",
       "WM=1,WN=1,FM=2,FN=2,BK=64,STAGE=cp_async,STAGES=2,FRAG_BUFFERS=2"},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i], 700 + i);
}

struct Compiled {
  CompileState s;
  Bindings inputs;
};

Compiled compile_and_inputs(const std::string& expr, const std::string& knobs, uint64_t seed) {
  Compiled r;
  r.s.graph = parse_expression(expr);
  r.s.knobs = Knobs::parse(knobs);
  run_pipeline(r.s);
  make_random_inputs(r.s.loop, r.inputs, seed);
  return r;
}

double max_diff(const HostTensor& x, const HostTensor& y) {
  double worst = 0;
  for (size_t i = 0; i < x.data.size(); ++i) worst = std::max(worst, std::fabs(x.data[i] - y.data[i]));
  return worst;
}

// The kernel rounds after every mma — not after every product, not once at the end, and
// not at all (ACC=f32): each of those gives measurably different f32 outputs.
TEST(AccF16, InterpreterRoundsTheSumAfterEveryMma) {
  const AccCase c{"matmul(A[32,200]:f16, B[200,16]:f16, out=f32)", ""};
  Compiled r = compile_and_inputs(c.expr, "ATOM=mma_f16,ACC=f16,WM=1,WN=1,FM=2,FN=2,BK=32,STAGE=sync", 5);
  const HostTensor got = run_level(r.s, Level::Kernel, r.inputs);
  EXPECT_EQ(max_diff(got, emulate(c, r.inputs, DType::F32, 16)), 0.0);
  EXPECT_GT(max_diff(got, emulate(c, r.inputs, DType::F32, 1)), 1e-3);
  EXPECT_GT(max_diff(got, emulate(c, r.inputs, DType::F32, 0)), 1e-3);
  EXPECT_GT(max_diff(got, run_level(r.s, Level::Loop, r.inputs)), 1e-3);
  Compiled f32 = compile_and_inputs(c.expr, "ATOM=mma_f16,WM=1,WN=1,FM=2,FN=2,BK=32,STAGE=sync", 5);
  EXPECT_LT(max_diff(run_level(f32.s, Level::Kernel, f32.inputs), run_level(f32.s, Level::Loop, f32.inputs)), 1e-5);
}

const Stmt* find_stmt(const Block& b, const std::function<bool(const Stmt&)>& pred) {
  const Stmt* found = nullptr;
  walk(b, [&](const Stmt& s) {
    if (!found && pred(s)) found = &s;
  });
  return found;
}

TEST(AccF16, LowerMmaDeclaresTheF16AccumulatingAtom) {
  const std::string e = "matmul(A[64,64]:f16, B[64,64]:f16)";
  const std::string tile = "WM=2,WN=2,FM=2,FN=4,BK=16,STAGE=sync";
  CompileState s = passcheck::compile_sm90a(e, "ATOM=mma_f16,ACC=f16," + tile, "k:025_lower_mma");
  const KernelOp& k = s.kernel.kernels.at(0);
  ASSERT_EQ(k.warp_atoms.size(), 1u);
  EXPECT_EQ(k.warp_atoms[0].id, "mma_m16n8k16_f16_f16");
  EXPECT_EQ(k.warp_atoms[0].acc_type, DType::F16);
  // The C/D fragment keeps the layout's four values per lane (codegen packs them into two
  // f16x2 registers): acc[FM, FN, 4], zeroed value by value.
  const Stmt* acc = find_stmt(k.body, [](const Stmt& st) { return st.kind == StmtKind::Alloc && st.dst == "acc3"; });
  ASSERT_TRUE(acc);
  EXPECT_EQ(print_block({*acc}), "alloc acc3[2, 4, 4]\n");
  EXPECT_TRUE(find_stmt(k.body, [](const Stmt& st) {
    return st.kind == StmtKind::Atom && st.atom == "mma_m16n8k16_f16_f16" && st.dst == "acc3";
  }));
  EXPECT_EQ(s.used_knobs.at("ACC"), "f16");
  // ACC=f32 (the default) keeps the f32-accumulating entry; SIMT kernels record no ACC.
  CompileState d = passcheck::compile_sm90a(e, "ATOM=mma_f16," + tile, "k:025_lower_mma");
  EXPECT_EQ(d.kernel.kernels.at(0).warp_atoms.at(0).id, "mma_m16n8k16_f32_f16");
  EXPECT_EQ(d.used_knobs.at("ACC"), "f32");
  EXPECT_FALSE(passcheck::compile_sm90a("matmul(A[64,64]:f32, B[64,64]:f32)", "", "k:025_lower_mma")
                   .used_knobs.count("ACC"));
}

TEST(AccF16, KnobErrorsNameTheLimitAndTheFix) {
  auto has = [](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg;
  };
  has(passcheck::error_of("matmul(A[64,64]:bf16, B[64,64]:bf16)", "ATOM=mma_bf16,ACC=f16"),
      "ACC=f16 with ATOM=mma_bf16: PTX's bf16 mma.sync "
      "(mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32) accumulates in f32 only");
  has(passcheck::error_of("matmul(A[64,64]:tf32, B[64,64]:tf32)", "ATOM=mma_tf32,ACC=f16"),
      "ACC=f16 with ATOM=mma_tf32: PTX's tf32 mma.sync");
  has(passcheck::error_of("matmul(A[64,64]:tf32, B[64,64]:tf32)", "ATOM=mma_tf32,ACC=f16"),
      "use ACC=f32, or ATOM=mma_f16 on f16 inputs");
  has(passcheck::error_of("matmul(A[64,64]:f16, B[64,64]:f16)", "ACC=f16"),
      "ACC=f16 with ATOM=fma: the SIMT path accumulates in f32");
  has(passcheck::error_of("matmul(A[64,64]:f16, B[64,64]:f16)", "ATOM=fma,ACC=f16"), "set ATOM=mma_f16");
  // f16 accumulation does not change what the atom multiplies.
  has(passcheck::error_of("matmul(A[64,64]:f32, B[64,64]:f32)", "ATOM=mma_f16,ACC=f16"),
      "ATOM=mma_f16 multiplies f16 operands");
  EXPECT_EQ(passcheck::error_of("matmul(A[64,64]:f16, B[64,64]:f16)", "ATOM=mma_f16,ACC=f16"), "");
  EXPECT_EQ(passcheck::error_of("matmul(A[64,64]:bf16, B[64,64]:bf16)", "ATOM=mma_bf16,ACC=f32"), "");
  EXPECT_THROW(Knobs::parse("ACC=bf16"), Error);
}

}  // namespace
}  // namespace loom
