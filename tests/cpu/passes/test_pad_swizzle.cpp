// t:045_pad_smem and t:046_swizzle_smem on the real pipeline, judged by the bank-conflict
// model: matmul(A[256,256]:f32, B[256,256]:f32) at BM=BN=64, FM=FN=4, BK=16, STAGE=sync.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "pass_check.h"
#include "passes/analysis.h"
#include "passes/bank_conflicts.h"
#include "passes/defaults.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

const char* kExpr = "matmul(A[256,256]:f32, B[256,256]:f32)";
const char* kTile = "BM=64,BN=64,FM=4,FN=4,BK=16";

std::vector<SharedAccessReport> table(const CompileState& s, const std::string& title) {
  auto r = bank_conflicts(s.kernel, s.kernel.kernels.at(0));
  std::cout << "--- " << title << "\n" << format_bank_conflicts(r);
  return r;
}

// The worst factor among the accesses of `op` ("load"/"store") to `tensor`.
double worst(const std::vector<SharedAccessReport>& r, const std::string& tensor,
             const std::string& op) {
  double f = 0;
  int n = 0;
  for (const auto& a : r)
    if (a.tensor == tensor && a.op == op) {
      EXPECT_TRUE(a.evaluated) << a.stmt;
      f = std::max(f, a.factor());
      ++n;
    }
  EXPECT_GT(n, 0) << "no " << op << " of " << tensor;
  return f;
}

const TensorDecl& shared(const CompileState& s, const std::string& name) {
  return s.kernel.tensor(name);
}

// STAGE=sync keeps A's slab transposed, A_s[k][m] (16 x 64 f32, 256-byte rows): a
// thread copies a float4 of A along k and stores its 4 elements down a column of A_s.
// Lanes hold m = e / 4 (8 values) and k0 = e % 4 * 4, so store i writes word
// (k0 + i) * 64 + m: bank m % 32, 8 banks with 4 distinct words -> 4-way (ideal 1).
// PAD_SMEM=2 makes the row stride 66 words: bank (2 k0 + 2 i + m) % 32 with 2 k0 in
// {0, 8, 16, 24} and m in 8 consecutive values: 32 distinct banks -> 1. PAD_SMEM=1 (row
// stride 65, bank k0 + i + m) still pairs (k0, m) with (k0 + 4, m - 4) -> 2-way.
TEST(PadSmem, RemovesTransposedAStoreConflicts) {
  auto base = table(passcheck::compile_sm90a(kExpr, kTile), "no padding");
  EXPECT_DOUBLE_EQ(worst(base, "A_s", "store"), 4.0);
  auto pad1 =
      table(passcheck::compile_sm90a(kExpr, std::string(kTile) + ",PAD_SMEM=1"), "PAD_SMEM=1");
  EXPECT_DOUBLE_EQ(worst(pad1, "A_s", "store"), 2.0);
  CompileState s2 = passcheck::compile_sm90a(kExpr, std::string(kTile) + ",PAD_SMEM=2");
  auto pad2 = table(s2, "PAD_SMEM=2");
  EXPECT_DOUBLE_EQ(worst(pad2, "A_s", "store"), 1.0);
  EXPECT_EQ(shared(s2, "A_s").pad, 2);
  EXPECT_EQ(shared(s2, "B_s").pad, 2);
  EXPECT_EQ(s2.used_knobs.at("PAD_SMEM"), "2");
  // The pad has a price the model shows: a 66-float row is no longer 16-byte aligned,
  // so k:040 reads B_s as float2 (not float4). Lane n_t reads 8 B at word 4 n_t + 2 v:
  // a half warp (16 lanes) spans 256 B, banks 4 n_t and 4 (n_t + 8) collide -> 2 per
  // phase, 4 against an ideal 2. Unpadded, the float4 reads were ideal; A_s stays a
  // broadcast (16 lanes share m_t) either way.
  EXPECT_DOUBLE_EQ(worst(base, "B_s", "load"), 1.0);
  EXPECT_DOUBLE_EQ(worst(pad2, "B_s", "load"), 2.0);
  EXPECT_DOUBLE_EQ(worst(pad2, "A_s", "load"), 1.0);
}

// The pad is on the Tile IR declaration, where the -vv diff shows it.
TEST(PadSmem, AppearsOnTheTileDeclarations) {
  CompileState s =
      passcheck::compile_sm90a(kExpr, std::string(kTile) + ",PAD_SMEM=3", "t:045_pad_smem");
  std::string ir = print(s.tile);
  EXPECT_NE(ir.find("A_s: f32[16, 64] shared pad=3"), std::string::npos) << ir;
  CompileState off = passcheck::compile_sm90a(kExpr, kTile, "t:045_pad_smem");
  for (const auto& t : off.tile.tensors) EXPECT_EQ(t.pad, 0) << t.name;
}

TEST(PadSmem, RefusesTma) {
  {
    const std::string e = passcheck::error_of(kExpr, std::string(kTile) + ",PAD_SMEM=1,STAGE=tma");
    ASSERT_NE(e, "") << "PAD_SMEM with STAGE=tma was accepted";
    EXPECT_NE(e.find("PAD_SMEM=1"), std::string::npos) << e;
    EXPECT_NE(e.find("tma"), std::string::npos) << e;
  }
}

TEST(PadSmem, KnobRange) {
  EXPECT_THROW(Knobs::parse("PAD_SMEM=33"), Error);
  EXPECT_THROW(Knobs::parse("PAD_SMEM=-1"), Error);
  EXPECT_NO_THROW(Knobs::parse("PAD_SMEM=0,SWIZZLE=128B"));
  EXPECT_THROW(Knobs::parse("SWIZZLE=256B"), Error);
}

// The TMA patterns in elements: 16-byte chunks are 4 f32 (base 2) or 8 f16 (base 3);
// 128B XORs 3 chunk bits, 64B 2, 32B 1, always with the 128-byte line index (shift 3).
TEST(SwizzleSmem, ChoosesTheTmaPattern) {
  CompileState s =
      passcheck::compile_sm90a(kExpr, std::string(kTile) + ",SWIZZLE=128B", "t:046_swizzle_smem");
  EXPECT_EQ(s.tile.tensor("A_s").swizzle, (Swizzle{3, 2, 3}));
  EXPECT_EQ(s.tile.tensor("B_s").swizzle, (Swizzle{3, 2, 3}));
  EXPECT_EQ(s.used_knobs.at("SWIZZLE"), "128B");
  CompileState h =
      passcheck::compile_sm90a("matmul(A[256,256]:f16, B[256,256]:f16)",
                               std::string(kTile) + ",SWIZZLE=64B", "t:046_swizzle_smem");
  EXPECT_EQ(h.tile.tensor("A_s").swizzle, (Swizzle{2, 3, 3}));
  CompileState t =
      passcheck::compile_sm90a(kExpr, std::string(kTile) + ",SWIZZLE=32B", "t:046_swizzle_smem");
  EXPECT_EQ(t.tile.tensor("A_s").swizzle, (Swizzle{1, 2, 3}));
  // 128B on f32: element offset 32 (line 1, chunk 0) moves to chunk 1 (offset 36);
  // offset 8*32 + 4 (line 8 = 0 mod 8, chunk 1) stays.
  EXPECT_EQ(s.tile.tensor("A_s").physical(32), 36);
  EXPECT_EQ(s.tile.tensor("A_s").physical(8 * 32 + 4), 8 * 32 + 4);
}

TEST(SwizzleSmem, RefusesPadTogether) {
  {
    const std::string e =
        passcheck::error_of(kExpr, std::string(kTile) + ",PAD_SMEM=1,SWIZZLE=128B");
    ASSERT_NE(e, "") << "PAD_SMEM with SWIZZLE was accepted";
    EXPECT_NE(e.find("choose one"), std::string::npos) << e;
    EXPECT_NE(e.find("SWIZZLE=128B"), std::string::npos) << e;
  }
}

// STAGE=cp_async keeps storage order, A_s[m][k] = 64 x 16 f32: rows of 64 B, shorter
// than the 128-byte span.
TEST(SwizzleSmem, RefusesRowsShorterThanTheSpan) {
  {
    const std::string e =
        passcheck::error_of(kExpr, std::string(kTile) + ",STAGE=cp_async,SWIZZLE=128B");
    ASSERT_NE(e, "") << "a 64-byte row was swizzled with a 128-byte span";
    EXPECT_NE(e.find("SWIZZLE=128B"), std::string::npos) << e;
    EXPECT_NE(e.find("multiple of 128 bytes"), std::string::npos) << e;
    EXPECT_NE(e.find("64 B"), std::string::npos) << e;
  }
  EXPECT_NO_THROW(passcheck::compile_sm90a(
      kExpr, std::string(kTile) + ",STAGE=cp_async,SWIZZLE=64B", "t:046_swizzle_smem"));
}

// Swizzled, every access is still modelled (offsets go through physical()); its 256-byte
// rows give the A_s stores' column the XOR values of 128-byte lines 2(k0+i) + m/32, all
// equal mod 8 for the lanes of one instruction: the TMA pattern cannot help this access
// (PAD_SMEM does), and the model must say so rather than flatter it.
TEST(SwizzleSmem, ModelSeesTheSwizzledLayout) {
  auto r =
      table(passcheck::compile_sm90a(kExpr, std::string(kTile) + ",SWIZZLE=128B"), "SWIZZLE=128B");
  EXPECT_DOUBLE_EQ(worst(r, "A_s", "store"), 4.0);
  EXPECT_DOUBLE_EQ(worst(r, "B_s", "load"), 1.0);
}

// SWIZZLE=xor derives Swizzle<B, M, S> from each tile's row: 16-byte chunks (M = 3 for
// 16-bit elements, 2 for f32), XORed with the row index for rows of 128 B or more.
const char* kMma = "ATOM=mma_f16,WM=2,WN=2,FM=4,FN=8,STAGE=cp_async,STAGES=3,PAD_SMEM=0,VECTORIZE=8";

TEST(SwizzleSmem, XorDerivesThePatternFromTheRow) {
  // A_s[128][64] f16 (128-byte rows): the TMA 128B pattern; B_s[64][128] (256-byte rows):
  // the row index is 7 element bits up, so S = 4 where the TMA pattern keeps 3.
  CompileState s =
      passcheck::compile_sm90a("matmul(A[256,256]:f16, B[256,256]:f16)",
                               std::string(kMma) + ",BK=64,SWIZZLE=xor", "t:046_swizzle_smem");
  EXPECT_EQ(s.tile.tensor("A_s").swizzle, (Swizzle{3, 3, 3}));
  EXPECT_EQ(s.tile.tensor("B_s").swizzle, (Swizzle{3, 3, 4}));
  // A_s[128][32] f16 (64-byte rows): 4 chunks per row, XORed with the 128-byte line.
  CompileState h =
      passcheck::compile_sm90a("matmul(A[256,256]:f16, B[256,256]:f16)",
                               std::string(kMma) + ",BK=32,SWIZZLE=xor", "t:046_swizzle_smem");
  EXPECT_EQ(h.tile.tensor("A_s").swizzle, (Swizzle{2, 3, 3}));
  // f32 B_s[16][64] (256-byte rows): chunks of 4 elements, row index 6 element bits up.
  CompileState f = passcheck::compile_sm90a(
      kExpr, std::string(kTile) + ",STAGE=cp_async,SWIZZLE=xor", "t:046_swizzle_smem");
  EXPECT_EQ(f.tile.tensor("B_s").swizzle, (Swizzle{3, 2, 4}));
  EXPECT_EQ(f.tile.tensor("A_s").swizzle, (Swizzle{2, 2, 3}));  // [64][16] f32: 64 B rows
}

TEST(SwizzleSmem, XorRefusesRowsItCannotPermute) {
  {  // BN=96 f16: 192-byte rows, not a power of two
    const std::string e = passcheck::error_of(
        "matmul(A[192,192]:f16, B[192,192]:f16)",
        "ATOM=mma_f16,WM=2,WN=3,FM=4,FN=4,BK=32,STAGE=cp_async,PAD_SMEM=0,SWIZZLE=xor");
    ASSERT_NE(e, "") << "a 192-byte row was swizzled";
    EXPECT_NE(e.find("192 B"), std::string::npos) << e;
    EXPECT_NE(e.find("power of two"), std::string::npos) << e;
  }
  {  // TMA boxes swizzle within rows of at most 128 B; B_s has rows of 64 f32
    const std::string e = passcheck::error_of(kExpr, std::string(kTile) + ",STAGE=tma,SWIZZLE=xor");
    ASSERT_NE(e, "") << "SWIZZLE=xor accepted a 256-byte TMA row";
    EXPECT_NE(e.find("STAGE=tma"), std::string::npos) << e;
    EXPECT_NE(e.find("256 B"), std::string::npos) << e;
  }
}

// The bank-conflict model reads ldmatrix as hardware serves it (one 8-row matrix per
// wavefront): the TMA 128B pattern on B's 256-byte rows repeats every 4 rows, so each
// ldmatrix.trans of B costs 2 wavefronts per matrix; the row-derived pattern costs 1, and
// so does every other shared access of the mma kernel.
TEST(SwizzleSmem, XorMakesTheMmaKernelConflictFree) {
  const std::string expr = "matmul(A[256,256]:f16, B[256,256]:f16)";
  auto tma = table(passcheck::compile_sm90a(expr, std::string(kMma) + ",BK=64,SWIZZLE=128B"),
                   "SWIZZLE=128B");
  EXPECT_DOUBLE_EQ(worst(tma, "B_s", "ldmatrix"), 2.0);
  EXPECT_DOUBLE_EQ(worst(tma, "A_s", "ldmatrix"), 1.0);
  auto x = table(passcheck::compile_sm90a(expr, std::string(kMma) + ",BK=64,SWIZZLE=xor"),
                 "SWIZZLE=xor");
  EXPECT_DOUBLE_EQ(worst(x, "B_s", "ldmatrix"), 1.0);
  EXPECT_DOUBLE_EQ(worst(x, "A_s", "ldmatrix"), 1.0);
  EXPECT_DOUBLE_EQ(worst(x, "A_s", "cp.async"), 1.0);
  EXPECT_DOUBLE_EQ(worst(x, "B_s", "cp.async"), 1.0);
  // The pad (80-byte A rows) leaves the ldmatrix reads conflict-free but not the 16-byte
  // cp.async writes: lanes 4..7 of a quarter warp wrap onto lane 0's banks.
  auto pad = table(passcheck::compile_sm90a(expr,
                                            "ATOM=mma_f16,WM=2,WN=2,FM=4,FN=8,BK=32,STAGE=cp_async,"
                                            "STAGES=3,PAD_SMEM=8,VECTORIZE=8"),
                   "PAD_SMEM=8");
  EXPECT_DOUBLE_EQ(worst(pad, "A_s", "ldmatrix"), 1.0);
  EXPECT_DOUBLE_EQ(worst(pad, "A_s", "cp.async"), 2.0);
}

// The shipped mma defaults for an aligned 16-bit GEMM: every shared access of the kernel
// (cp.async writes, ldmatrix reads of both operands) is conflict-free in the model.
TEST(SwizzleSmem, MmaDefaultsAreConflictFree) {
  for (const std::string dt : {"f16", "bf16"}) {
    const std::string expr = "matmul(A[512,512]:" + dt + ", B[512,512]:" + dt + ")";
    CompileState s;
    s.graph = parse_expression(expr);
    s.knobs = resolve_knobs(Knobs(), Knobs::parse("ATOM=mma_" + dt), mma_defaults_aligned());
    s.target = Target::for_arch("sm_90a");
    run_pipeline(s, "");
    auto r = table(s, "mma defaults " + dt);
    ASSERT_GE(r.size(), 4u);
    for (const auto& a : r) {
      EXPECT_TRUE(a.evaluated) << a.stmt;
      EXPECT_DOUBLE_EQ(a.factor(), 1.0) << a.stmt;
    }
  }
}

// split_for_swizzle: swz(offset) == swz(inner) + outer for every value, and only terms
// that are multiples of the period leave the XOR.
TEST(SwizzleSplit, KeepsTheSwizzledOffset) {
  const Swizzle sw{3, 3, 4};  // period 2^10
  Expr lane = Expr::var("lane"), ka = Expr::var("k_a"), st = Expr::var("st");
  Expr off = (st % 3) * 8192 + (ka * 16 + lane % 16) * 128 + lane / 16 * 8 + ka * 8 + 1024;
  SwizzleSplit sp = split_for_swizzle(off, sw);
  EXPECT_FALSE(sp.outer.uses("lane"));
  EXPECT_TRUE(sp.outer.uses("st"));
  EXPECT_TRUE(sp.inner.uses("lane"));
  for (int64_t s = 0; s < 5; ++s)
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t l = 0; l < 32; ++l) {
        Expr::Env env = {{"lane", l}, {"k_a", k}, {"st", s}};
        EXPECT_EQ(sw.apply(off.eval(env)), sw.apply(sp.inner.eval(env)) + sp.outer.eval(env));
      }
  // Without a swizzle nothing moves out.
  SwizzleSplit none = split_for_swizzle(off, Swizzle{});
  EXPECT_TRUE(none.outer.is_const() && none.outer.const_value() == 0);
}

// A constant's whole periods leave the XOR too (an epilogue row + 8 of a 64-column strip
// is 512 + the column): swz(lane part + 520) would cost an XOR per store.
TEST(SwizzleSplit, MovesWholePeriodsOfConstantsOut) {
  const Swizzle sw{3, 3, 3};  // period 2^9
  const Expr lane = Expr::var("lane");
  const Expr off = lane % 32 / 4 * 64 + lane % 4 * 2 + 520;
  SwizzleSplit sp = split_for_swizzle(off, sw);
  ASSERT_TRUE(sp.outer.is_const());
  EXPECT_EQ(sp.outer.const_value(), 512);
  for (int64_t l = 0; l < 32; ++l) {
    Expr::Env env = {{"lane", l}};
    EXPECT_EQ(sw.apply(off.eval(env)), sw.apply(sp.inner.eval(env)) + sp.outer.eval(env));
  }
}

// Results are unchanged: the Kernel IR interpreter (which applies pad and swizzle through
// TensorDecl::strides() / physical()) against the Loop IR on the same inputs.
void expect_same_result(const std::string& knobs) {
  SCOPED_TRACE(knobs);
  CompileState s = passcheck::compile_sm90a("matmul(A[64,48]:f32, B[48,64]:f32)",
                                            "BM=32,BN=32,FM=2,FN=2,BK=16," + knobs);
  Bindings in;
  make_random_inputs(s.loop, in, 7);
  Bindings ref = in, got = in;
  interpret(s.loop, ref);
  interpret(s.kernel, got);
  const auto& a = ref.tensors.at("out").data;
  const auto& b = got.tensors.at("out").data;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_FALSE(std::isnan(b[i])) << "element " << i << " never written";
    ASSERT_NEAR(a[i], b[i], 1e-9 * std::max(1.0, std::fabs(a[i]))) << "element " << i;
  }
}

TEST(PadSwizzle, ResultsUnchangedOnTheInterpreter) {
  expect_same_result("PAD_SMEM=0");
  expect_same_result("PAD_SMEM=1");
  expect_same_result("PAD_SMEM=2");
  expect_same_result("SWIZZLE=128B");
  expect_same_result("STAGE=cp_async,SWIZZLE=64B");
  expect_same_result("STAGE=cp_async,SWIZZLE=xor");
}

}  // namespace
}  // namespace loom
