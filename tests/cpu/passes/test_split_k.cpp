// l:020_split_k: splitting K changes no answer. Random shapes, SPLITK 1..8, both combine
// modes, batch, symbolic sizes and GROUP_M; after every pass the program runs on the CPU
// interpreter and is compared with the unsplit Loop IR that lowering produced. Plus the
// shape of the rewrite (the `s` grid tier, partial/reduce or zero_fill/atomic ops, the
// clamp) and the errors of the atomic mode's restrictions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "frontend/parser.h"
#include "ir/diff.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {

CompileState check_case(const std::string& expr, const std::map<std::string, int64_t>& sizes,
                        const Knobs& knobs, uint64_t seed) {
  return passcheck::check_every_pass(expr, knobs, seed, sizes);
}

std::string op_names(const LoopProgram& p) {
  std::string n;
  for (const auto& op : p.ops) n += (n.empty() ? "" : ",") + op.name;
  return n;
}

TEST(SplitK, RandomShapesBothModes) {
  std::mt19937_64 rng(4242);
  const char* dtypes[] = {"f32", "tf32", "f16", "bf16"};
  const char* epilogues[] = {"%s", "relu(%s)", "mul(%s, 0.25)", "add(%s, bias[%s]:f32)"};
  int split_programs = 0;
  for (int trial = 0; trial < 40; ++trial) {
    int64_t M = 1 + int64_t(rng() % 19), N = 1 + int64_t(rng() % 19), K = 1 + int64_t(rng() % 70);
    int64_t S = 1 + int64_t(rng() % 8);
    bool atomic = rng() % 2;
    // Atomic mode needs an f32 output and a linear epilogue (none or a scaling).
    std::string dt = atomic ? "f32" : dtypes[rng() % 4];
    const char* epi = epilogues[atomic ? rng() % 3 == 0 ? 2 : 0 : rng() % 4];
    bool ta = rng() % 2, tb = rng() % 2;
    // Symbolic sizes keep SPLITK chunks (some may be empty); constant ones clamp.
    bool symbolic = rng() % 2;
    std::string sm = symbolic ? "M" : std::to_string(M), sn = symbolic ? "N" : std::to_string(N),
                sk = symbolic ? "K" : std::to_string(K);
    std::string a = ta ? "A[" + sk + "," + sm + "]:" + dt + ".T" : "A[" + sm + "," + sk + "]:" + dt;
    std::string b = tb ? "B[" + sn + "," + sk + "]:" + dt + ".T" : "B[" + sk + "," + sn + "]:" + dt;
    std::string mm = "matmul(" + a + ", " + b + ")";
    char buf[256];
    std::snprintf(buf, sizeof buf, epi, mm.c_str(), sn.c_str());
    // Staged or not: a staged split is rounded to whole BK slabs.
    int64_t BK = 1 + int64_t(rng() % 8);
    std::string stage = rng() % 3 == 0 ? "STAGE=direct" : "BK=" + std::to_string(BK);
    std::string knobs = "BM=4,BN=8,FM=2,FN=2,SPLITK=" + std::to_string(S) +
                        ",SPLITK_MODE=" + (atomic ? "atomic" : "reduce") + "," + stage;
    if (rng() % 2) knobs += ",GROUP_M=" + std::to_string(1 + rng() % 4);
    CompileState s = check_case(buf, {{"M", M}, {"N", N}, {"K", K}}, Knobs::parse(knobs),
                                3000 + uint64_t(trial));
    if (HasFatalFailure()) return;
    split_programs += s.tile.ops.size() > 1;
  }
  EXPECT_GE(split_programs, 20);  // most trials really split
}

TEST(SplitK, BatchAndSymbolicSizes) {
  struct C { std::string expr; std::map<std::string, int64_t> sizes; std::string knobs; };
  std::vector<C> cases = {
      {"bmm(A[3,6,40]:f32, B[3,40,7]:f32)", {}, "BM=4,BN=4,FM=2,FN=1,SPLITK=4,BK=4"},
      {"bmm(A[3,6,40]:f32, B[3,40,7]:f32)", {}, "BM=4,BN=4,SPLITK=3,SPLITK_MODE=atomic,"
                                                  "STAGE=direct,GROUP_M=2"},
      {"bmm(A[2,9,33]:bf16, B[2,33,5]:bf16)", {}, "BM=4,BN=4,SPLITK=5,GROUP_M=3,BK=2"},
      // Symbolic K: the split count stays SPLITK and trailing chunks may be empty
      // (K=5 in chunks of 4 leaves s = 2, 3 with nothing to add).
      {"matmul(A[M,K]:f32, B[K,N]:f32)", {{"M", 7}, {"N", 9}, {"K", 5}}, "SPLITK=4,BK=4"},
      {"matmul(A[M,K]:f32, B[K,N]:f32)", {{"M", 7}, {"N", 9}, {"K", 61}},
       "SPLITK=4,SPLITK_MODE=atomic,GROUP_M=4,BM=2,BN=4,FM=1,FN=2"},
      {"linear(X[M,K]:f16, W[N,K]:f16, bias[N]:f16)", {{"M", 10}, {"N", 6}, {"K", 45}},
       "SPLITK=3,STAGE=direct,GROUP_M=2,BM=4,BN=4,FM=2,FN=2"},
      {"bmm(X[P,M,K]:f32, Y[P,K,N]:f32)", {{"P", 2}, {"M", 5}, {"N", 6}, {"K", 30}},
       "SPLITK=8,STAGE=direct,GROUP_M=2,BM=2,BN=2,FM=1,FN=1"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CompileState s = check_case(cases[i].expr, cases[i].sizes, Knobs::parse(cases[i].knobs),
                                500 + i);
    if (HasFatalFailure()) return;
    EXPECT_EQ(s.kernel.kernels.size(), 2u) << cases[i].expr << " " << cases[i].knobs;
  }
}

TEST(SplitK, ReduceModeWritesPartialsThenReduces) {
  CompileState s = passcheck::compile_sm90a("relu(matmul(A[16,64]:f32, B[64,16]:f32))",
                                            "SPLITK=4,BK=16", "l:020_split_k");
  EXPECT_EQ(op_names(s.loop), "matmul_relu,splitk_reduce");
  ASSERT_TRUE(s.loop.has_tensor("partial"));
  const TensorDecl& p = s.loop.tensor("partial");
  EXPECT_EQ(p.role, TensorRole::Temp);
  EXPECT_EQ(p.dtype, DType::F32);
  ASSERT_EQ(p.shape.size(), 3u);
  EXPECT_EQ(p.shape[0].str(), "4");
  std::string ir = print(s.loop);
  // The split op reduces its own 16-deep chunk; relu moved to the reduce op.
  EXPECT_NE(ir.find("for k in 0..16 reduce"), std::string::npos) << ir;
  EXPECT_NE(ir.find("A[m, s * 16 + k]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("partial[s, m, n] = acc"), std::string::npos) << ir;
  EXPECT_NE(ir.find("for s in 0..4 reduce"), std::string::npos) << ir;
  size_t reduce = ir.find("splitk_reduce = LoopOp");
  ASSERT_NE(reduce, std::string::npos);
  EXPECT_GT(ir.find("relu("), reduce) << "the epilogue runs after the partials are summed";
}

TEST(SplitK, TileIrHasTheSplitGridTier) {
  std::string diff;
  CompileState s;
  s.graph = parse_expression("matmul(A[16,64]:f32, B[64,16]:f32)");
  s.knobs = Knobs::parse("SPLITK=2,BM=8,BN=8,FM=2,FN=2,BK=8");
  run_pipeline(s, "t:010_partition_loops",
               [&](const Pass& p, const std::string& before, const std::string& after) {
                 if (p.id == "t:010_partition_loops") diff = unified_diff(before, after);
               });
  EXPECT_NE(diff.find("+  for s in 0..2 grid\n"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+    for m_b in 0..2 grid"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+splitk_reduce = TileOp(partial) -> out"), std::string::npos) << diff;
}

TEST(SplitK, AtomicModeZeroFillsThenAdds) {
  CompileState s =
      passcheck::compile_sm90a("mul(matmul(A[8,40]:f32, B[40,8]:f32), 0.5)",
                               "SPLITK=2,SPLITK_MODE=atomic,STAGE=direct", "l:020_split_k");
  EXPECT_EQ(op_names(s.loop), "zero_fill,matmul_multiply");
  std::string ir = print(s.loop);
  EXPECT_NE(ir.find("out[m, n] = 0\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("out[m, n] += "), std::string::npos) << ir;
  EXPECT_NE(ir.find("atomic"), std::string::npos) << ir;
  EXPECT_FALSE(s.loop.has_tensor("partial"));
}

// The atomic combine's epilogue becomes vector reductions where the target has them
// (red.global.add.v4.f32 from sm_90 on) and stays per-element atomics on sm_80.
TEST(SplitK, AtomicEpilogueIsVectorOnSm90Only) {
  for (const std::string arch : {"sm_90a", "sm_80"}) {
    CompileState s;
    s.graph = parse_expression("matmul(A[64,1024]:f32, B[1024,64]:f32)");
    s.knobs = Knobs::parse("BM=32,BN=32,FM=4,FN=4,SPLITK=4,SPLITK_MODE=atomic");
    s.target = Target::for_arch(arch);
    run_pipeline(s, "");
    int widest = 0, atomics = 0;
    for (const auto& k : s.kernel.kernels)
      walk(k.body, [&](const Stmt& st) {
        if (st.kind == StmtKind::Write && st.atomic_add) {
          ++atomics;
          widest = std::max(widest, st.width);
        }
      });
    EXPECT_GT(atomics, 0) << arch;
    EXPECT_EQ(widest, arch == "sm_90a" ? 4 : 1) << arch;
  }
}

TEST(SplitK, SplitCountIsClampedToNonEmptyChunks) {
  // K = 20 in SPLITK = 8 chunks of ceil(20/8) = 3: only 7 chunks hold any k.
  CompileState s = passcheck::compile_sm90a("matmul(A[4,20]:f32, B[20,4]:f32)",
                                            "SPLITK=8,STAGE=direct", "l:020_split_k");
  std::string ir = print(s.loop);
  EXPECT_NE(ir.find("for s in 0..7\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("for k in 0..min(3, 20 - s * 3) reduce"), std::string::npos) << ir;
  // Staged, a chunk is whole BK = 16 slabs: 20 fits in 2 chunks.
  s = passcheck::compile_sm90a("matmul(A[4,20]:f32, B[20,4]:f32)", "SPLITK=8", "l:020_split_k");
  EXPECT_EQ(s.loop.tensor("partial").shape[0].str(), "2");
  // A K that fits one chunk is not split at all.
  s = passcheck::compile_sm90a("matmul(A[4,12]:f32, B[12,4]:f32)", "SPLITK=4", "l:020_split_k");
  EXPECT_EQ(op_names(s.loop), "matmul");
}

TEST(SplitK, SplitK1ChangesNothing) {
  CompileState a =
      passcheck::compile_sm90a("relu(matmul(A[8,64]:f32, B[64,8]:f32))", "", "l:020_split_k");
  CompileState b = passcheck::compile_sm90a("relu(matmul(A[8,64]:f32, B[64,8]:f32))", "SPLITK=1",
                                            "l:020_split_k");
  EXPECT_EQ(print(a.loop), print(b.loop));
}

void expect_error(const std::string& expr, const std::string& knobs,
                  const std::vector<std::string>& parts) {
  {
    const std::string e = passcheck::error_of(expr, knobs);
    ASSERT_NE(e, "") << "expected an error for " << expr << " " << knobs;
    for (const auto& part : parts) EXPECT_NE(e.find(part), std::string::npos) << e;
  }
}

TEST(SplitK, AtomicModeRefusesWhatItCannotSplit) {
  expect_error("relu(matmul(A[8,64]:f32, B[64,8]:f32))", "SPLITK=4,SPLITK_MODE=atomic",
               {"SPLITK_MODE=atomic adds partial sums into `out`",
                "relu after the sum cannot be split", "use SPLITK_MODE=reduce"});
  expect_error("add(matmul(A[8,64]:f32, B[64,8]:f32), bias[8]:f32)",
               "SPLITK=4,SPLITK_MODE=atomic", {"add after the sum cannot be split"});
  expect_error("matmul(A[8,64]:f16, B[64,8]:f16)", "SPLITK=4,SPLITK_MODE=atomic",
               {"atomic accumulation needs an f32 output", "`out` is f16",
                "use SPLITK_MODE=reduce"});
  expect_error("matmul(A[8,64]:bf16, B[64,8]:bf16)", "SPLITK=2,SPLITK_MODE=atomic",
               {"`out` is bf16"});
  EXPECT_THROW(Knobs::parse("SPLITK=257"), Error);
  EXPECT_THROW(Knobs::parse("SPLITK_MODE=sum"), Error);
}

TEST(SplitK, KernelsLaunchInOrder) {
  CompileState s = passcheck::compile_sm90a("bmm(A[3,16,256]:f32, B[3,256,16]:f32)",
                                            "SPLITK=4,BM=16,BN=16,FM=2,FN=2");
  ASSERT_EQ(s.kernel.kernels.size(), 2u);
  const KernelOp& part = s.kernel.kernels[0];
  EXPECT_EQ(part.grid[2].str(), "12");  // 4 splits x 3 batches share blockIdx.z
  std::string ir = print(s.kernel);
  EXPECT_NE(ir.find("let s = blockIdx.z / 3\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let b = blockIdx.z % 3\n"), std::string::npos) << ir;
  EXPECT_EQ(s.kernel.kernels[1].name, "k_splitk_reduce_1");
  EXPECT_EQ(s.kernel.kernels[1].grid[2].str(), "3");
}

}  // namespace
}  // namespace loom
