// The three ways tf32 mma fragments (m16n8k8, one 32-bit element per register) reach
// registers from shared memory, each through every pass on the CPU interpreter against
// the naive Loop IR, on ragged shapes, both transposes, batch and an epilogue:
//  1. ldmatrix on 32-bit data (LDMATRIX=1): k:025 loads a K-contiguous slab with the b32
//     view of ldmatrix — x4 for A [BM][BK], x2 for B [BN][BK] (B given transposed).
//  2. B transposed into shared memory (SLAB_B=kinner, t:040) so that rule 1 applies to a
//     row-major B too: 4-byte cp.async copies, or register-staged with STAGE=sync.
//  3. B kept row-major, read element-wise; PAD_KOUTER (t:045) pads the N-contiguous
//     slab apart from the K-contiguous one, and SWIZZLE leaves it alone.
// Then the IR each strategy leaves (copies, slab shapes, pads), the fallbacks, and the
// errors. f32 inputs are rounded to tf32 for the reference (the atom rounds them).
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "pass_check.h"
#include "passes/defaults.h"
#include "passes/pipeline.h"
#include "passes/bank_conflicts.h"

namespace loom {
namespace {

struct Case {
  std::string expr, knobs;
  std::set<std::string> copies;  // warp copies k:025 must declare
};

void round_inputs_to_tf32(const ProgramBase& p, Bindings& b) {
  for (const auto& t : p.tensors)
    if (t.role == TensorRole::Input && t.dtype == DType::F32)
      for (double& v : b.tensors.at(t.name).data) v = round_to_tf32(float(v));
}

std::set<std::string> copy_ids(const KernelProgram& p) {
  std::set<std::string> ids;
  for (const auto& k : p.kernels)
    for (const auto& w : k.warp_copies) ids.insert(w.id);
  return ids;
}

// Element-wise fragment loads left, per operand array (in0 = A, in1 = B).
int fragment_loads(const KernelProgram& p, const std::string& array) {
  int n = 0;
  for (const auto& k : p.kernels)
    walk(k.body, [&](const Stmt& s) { n += s.kind == StmtKind::Load && s.dst == array; });
  return n;
}

CompileState check_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.expr + " knobs=" + c.knobs);
  CompileState s = passcheck::check_every_pass(c.expr, Knobs::parse(c.knobs), seed, {},
                                               round_inputs_to_tf32);
  EXPECT_EQ(copy_ids(s.kernel), c.copies);
  EXPECT_EQ(fragment_loads(s.kernel, "in0") == 0, c.copies.count("ldmatrix_x4_b32") == 1)
      << print(s.kernel);
  EXPECT_EQ(fragment_loads(s.kernel, "in1") == 0, c.copies.count("ldmatrix_x2_b32") == 1)
      << print(s.kernel);
  return s;
}

const std::set<std::string> kBoth = {"ldmatrix_x4_b32", "ldmatrix_x2_b32"};
const std::set<std::string> kAOnly = {"ldmatrix_x4_b32"};

// Strategy 1: whatever slab has K contiguous is read with ldmatrix; f32 and tf32 tensors.
TEST(Tf32Fragments, LdmatrixWhereKIsContiguous) {
  const std::vector<Case> cases = {
      // A [BM][BK]: x4; a row-major B is N-contiguous and stays element-wise.
      {"matmul(A[37,29]:tf32, B[29,45]:tf32)", "ATOM=mma_tf32,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=sync", kAOnly},
      // B given transposed is already [N][K]: x2 as well; a cp.async ring.
      {"matmul(A[37,29]:f32, B[45,29]:f32.T)", "ATOM=mma_tf32,WM=1,WN=2,FM=2,FN=1,BK=16,STAGE=cp_async,STAGES=2", kBoth},
      // A linear layer (W is B transposed) with a bias and gelu.
      {"gelu(linear(X[33,40]:f32, W[20,40]:f32, bias[20]:f32))", "ATOM=mma_tf32,WM=2,WN=1,FM=1,FN=2,BK=8,STAGE=sync", kBoth},
      // Batch.
      {"bmm(A[3,20,24]:tf32, B[3,17,24]:tf32.T)", "ATOM=mma_tf32,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=cp_async,STAGES=3", kBoth},
      // The kernel passes after k:025 move and duplicate the copies.
      {"matmul(A[30,40]:tf32, B[20,40]:tf32.T)", "ATOM=mma_tf32,WM=1,WN=1,FM=2,FN=2,BK=16,STAGE=sync,FRAG_BUFFERS=2", kBoth},
      {"matmul(A[30,40]:tf32, B[20,40]:tf32.T)", "ATOM=mma_tf32,WM=1,WN=1,FM=2,FN=2,BK=16,STAGE=sync,INTERLEAVE_LOADS=1", kBoth},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i], 1100 + i);
}

// Strategy 2: SLAB_B=kinner transposes a row-major B into [BN][BK]; SLAB_A=kinner does
// the same for an A given transposed. Both transports, a swizzle that keeps 16 B rows.
TEST(Tf32Fragments, TransposedSlabsTakeLdmatrix) {
  const std::vector<Case> cases = {
      {"matmul(A[37,29]:tf32, B[29,45]:tf32)", "ATOM=mma_tf32,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=cp_async,STAGES=3,SLAB_B=kinner", kBoth},
      {"relu(matmul(A[37,29]:f32, B[29,45]:f32))", "ATOM=mma_tf32,WM=1,WN=2,FM=2,FN=1,BK=16,STAGE=sync,STAGES=2,SLAB_B=kinner", kBoth},
      {"matmul(A[29,37]:tf32.T, B[29,45]:tf32)", "ATOM=mma_tf32,WM=1,WN=1,FM=2,FN=1,BK=8,STAGE=sync,SLAB_A=kinner,SLAB_B=kinner", kBoth},
      {"bmm(A[3,20,24]:tf32, B[3,24,17]:tf32)", "ATOM=mma_tf32,WM=1,WN=1,FM=1,FN=2,BK=8,STAGE=cp_async,STAGES=2,SLAB_B=kinner", kBoth},
      {"matmul(A[40,64]:tf32, B[64,40]:tf32)", "ATOM=mma_tf32,WM=1,WN=1,FM=2,FN=2,BK=32,STAGE=cp_async,STAGES=2,SLAB_B=kinner,SWIZZLE=128B", kBoth},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i], 1200 + i);
}

// Strategy 3: B row-major, element-wise, its slab padded by PAD_KOUTER; the A slab takes
// PAD_SMEM or SWIZZLE. An A given transposed has M contiguous: it takes PAD_KOUTER too.
TEST(Tf32Fragments, RowMajorBWithItsOwnPad) {
  const std::vector<Case> cases = {
      {"matmul(A[37,29]:tf32, B[29,45]:tf32)", "ATOM=mma_tf32,WM=1,WN=2,FM=2,FN=1,BK=16,STAGE=cp_async,STAGES=3,PAD_SMEM=4,PAD_KOUTER=8", kAOnly},
      {"matmul(A[37,29]:f32, B[29,45]:f32)", "ATOM=mma_tf32,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=cp_async,STAGES=1,SWIZZLE=64B,PAD_KOUTER=8", kAOnly},
      {"bmm(A[2,29,20]:tf32.T, B[2,29,17]:tf32)", "ATOM=mma_tf32,WM=1,WN=1,FM=1,FN=2,BK=8,STAGE=sync,PAD_SMEM=4,PAD_KOUTER=8", {}},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i], 1300 + i);
}

// Where the b32 view is not legal the loads stay element-wise with the same answer: rows
// padded off 16-byte boundaries (PAD_SMEM=2: 72-byte rows), and LDMATRIX=0.
TEST(Tf32Fragments, FallsBackToElementLoads) {
  check_case({"matmul(A[37,29]:tf32, B[45,29]:tf32.T)", "ATOM=mma_tf32,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=sync,PAD_SMEM=2", {}}, 1400);
  check_case({"matmul(A[37,29]:tf32, B[45,29]:tf32.T)", "ATOM=mma_tf32,LDMATRIX=0,WM=1,WN=1,FM=1,FN=2,BK=16,STAGE=sync", {}}, 1401);
}

const char* kGemm = "matmul(A[64,64]:tf32, B[64,64]:tf32)";
const char* kKnobs = "ATOM=mma_tf32,WM=2,WN=2,FM=2,FN=2,BK=16,STAGE=sync";

// The row starts come from the table (ldmatrix_row_starts + lane_bits_expr): A's lane l
// addresses row l%16 at word 4(l/16) — the article's As addressing — and B's (stored
// [N][K]) row l%8 at word 4((l/8)%2).
TEST(Tf32Fragments, LowerMmaAddressesRowsFromTheTable) {
  CompileState s = passcheck::compile_sm90a(kGemm, std::string(kKnobs) + ",SLAB_B=kinner", "k:025_lower_mma");
  const std::string ir = print(s.kernel);
  EXPECT_NE(ir.find("in0[m_a] <- ldmatrix_x4_b32(A_s[(m_w * 32 + m_a * 16 + lane % 16) * 16 + "
                    "k_i * 8 + lane / 16 * 4])  warp"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("in1[n_a] <- ldmatrix_x2_b32(B_s[(n_w * 16 + n_a * 8 + lane % 8) * 16 + "
                    "k_i * 8 + lane / 8 % 2 * 4])  warp"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("warp copy ldmatrix_x4_b32: b32[32, 4] from shared, one row per lane, 4/lane"),
            std::string::npos) << ir;
}

// SLAB_B=kinner: B_s is [BN][BK]; cp.async moves one element per copy (the transpose),
// STAGE=sync loads 16-byte vectors and stores scalars. SLAB_A=kouter / SLAB_B=kouter
// name the other layout; the knobs are recorded only when given.
TEST(Tf32Fragments, SlabKnobsChooseTheLayout) {
  {
    CompileState s = passcheck::compile_sm90a(kGemm, passcheck::knobs_over(kKnobs, "STAGE=cp_async,SLAB_B=kinner"));
    const TensorDecl& b = s.kernel.tensor("B_s");
    EXPECT_EQ(b.shape.at(0).const_value(), 32);  // [BN][BK]
    EXPECT_EQ(b.shape.at(1).const_value(), 16);
    int widest = 0;
    walk(s.kernel.kernels.at(0).body, [&](const Stmt& st) {
      if (st.kind == StmtKind::AsyncCopy && st.tensor == "B_s") widest = std::max(widest, st.width);
    });
    EXPECT_EQ(widest, 1);
    EXPECT_EQ(s.used_knobs.at("SLAB_B"), "kinner");
    EXPECT_EQ(s.used_knobs.count("SLAB_A"), 0u);
  }
  {
    CompileState s = passcheck::compile_sm90a(kGemm, std::string(kKnobs) + ",SLAB_A=kouter");
    EXPECT_EQ(s.kernel.tensor("A_s").shape.at(0).const_value(), 16);  // [BK][BM]
    EXPECT_EQ(s.kernel.tensor("B_s").shape.at(0).const_value(), 16);  // storage [BK][BN]
    EXPECT_EQ(copy_ids(s.kernel), std::set<std::string>{});  // neither is K-contiguous
  }
  {
    // SLAB_B overrides SLAB_KOUTER for B; A follows SLAB_KOUTER.
    CompileState s = passcheck::compile_sm90a(kGemm, std::string(kKnobs) + ",SLAB_KOUTER=1,SLAB_B=kinner");
    EXPECT_EQ(s.kernel.tensor("A_s").shape.at(0).const_value(), 16);
    EXPECT_EQ(s.kernel.tensor("B_s").shape.at(0).const_value(), 32);
    EXPECT_EQ(copy_ids(s.kernel), std::set<std::string>{"ldmatrix_x2_b32"});
  }
}

// PAD_KOUTER pads the slabs with the reduction dimension outer; PAD_SMEM the others.
// With SWIZZLE the former stay unswizzled (their pad is their layout).
TEST(Tf32Fragments, PadKouterPadsTheNContiguousSlab) {
  {
    CompileState s = passcheck::compile_sm90a(kGemm, std::string(kKnobs) + ",PAD_SMEM=4,PAD_KOUTER=8", "t:046_swizzle_smem");
    EXPECT_EQ(s.tile.tensor("A_s").pad, 4);
    EXPECT_EQ(s.tile.tensor("B_s").pad, 8);
    EXPECT_EQ(s.used_knobs.at("PAD_KOUTER"), "8");
  }
  {
    CompileState s = passcheck::compile_sm90a(kGemm, std::string(kKnobs) + ",SWIZZLE=64B,PAD_KOUTER=8", "t:046_swizzle_smem");
    EXPECT_EQ(s.tile.tensor("A_s").pad, 0);
    EXPECT_GT(s.tile.tensor("A_s").swizzle.bits, 0);
    EXPECT_EQ(s.tile.tensor("B_s").pad, 8);
    EXPECT_EQ(s.tile.tensor("B_s").swizzle.bits, 0);
  }
  {
    // The transposed B slab is K-contiguous: PAD_SMEM's.
    CompileState s = passcheck::compile_sm90a(kGemm, std::string(kKnobs) + ",SLAB_B=kinner,PAD_SMEM=4,PAD_KOUTER=8", "t:046_swizzle_smem");
    EXPECT_EQ(s.tile.tensor("B_s").pad, 4);
  }
  {
    // Without PAD_KOUTER every slab takes PAD_SMEM, and the knob is not recorded.
    CompileState s = passcheck::compile_sm90a(kGemm, std::string(kKnobs) + ",PAD_SMEM=8", "t:046_swizzle_smem");
    EXPECT_EQ(s.tile.tensor("A_s").pad, 8);
    EXPECT_EQ(s.tile.tensor("B_s").pad, 8);
    EXPECT_EQ(s.used_knobs.count("PAD_KOUTER"), 0u);
  }
}

// The tf32 mma defaults pad by layout (PAD_SMEM=4, PAD_KOUTER=8); f16 keeps one pad of 8.
// PAD_KOUTER is a staging knob: an explicit one of the group drops it with the rest.
TEST(Tf32Fragments, MmaDefaultsPadByLayout) {
  const Target t = Target::for_arch("sm_90a");
  auto resolved = [&](const std::string& expr, const std::string& knobs) {
    const DefaultChoice d = default_knobs(parse_expression(expr), t);
    return resolve_knobs(d.knobs, Knobs::parse(knobs), d.mma);
  };
  // Aligned: A swizzled (SWIZZLE=xor), B padded by its own pad.
  const Knobs aligned = resolved("matmul(A[4096,4096]:f32, B[4096,4096]:f32)", "ATOM=mma_tf32");
  EXPECT_EQ(aligned.get_str("SWIZZLE", ""), "xor");
  EXPECT_FALSE(aligned.has("PAD_SMEM"));
  EXPECT_EQ(aligned.get_str("PAD_KOUTER", ""), "8");
  for (const char* e : {"matmul(A[1000,333]:tf32, B[333,777]:tf32)",
                        "matmul(A[M,K]:f32, B[K,N]:f32)"}) {
    SCOPED_TRACE(e);
    const Knobs k = resolved(e, "ATOM=mma_tf32");
    EXPECT_EQ(k.get_str("PAD_SMEM", ""), "4");
    EXPECT_EQ(k.get_str("PAD_KOUTER", ""), "8");
  }
  const Knobs f16 = resolved("matmul(A[4096,4096]:f16, B[4096,4096]:f16)", "ATOM=mma_f16");
  EXPECT_EQ(f16.get_str("SWIZZLE", ""), "xor");  // aligned 16-bit: swizzled, no pads
  EXPECT_FALSE(f16.has("PAD_SMEM"));
  EXPECT_FALSE(f16.has("PAD_KOUTER"));
  const Knobs ragged = resolved("matmul(A[1000,333]:f16, B[333,777]:f16)", "ATOM=mma_f16");
  EXPECT_EQ(ragged.get_str("PAD_SMEM", ""), "8");
  EXPECT_FALSE(ragged.has("PAD_KOUTER"));
  const Knobs swz = resolved("matmul(A[4096,4096]:f32, B[4096,4096]:f32)", "ATOM=mma_tf32,SWIZZLE=128B");
  EXPECT_FALSE(swz.has("PAD_KOUTER"));
  EXPECT_FALSE(swz.has("PAD_SMEM"));
}

// ---- what the bank-conflict model says -------------------------------------------------

// Worst factor (wavefronts / ideal) per "tensor op" of the main kernel, e.g. "A_s ldmatrix".
std::map<std::string, double> conflicts(const CompileState& s) {
  std::map<std::string, double> worst;
  const KernelOp& k = s.kernel.kernels.at(0);
  for (const SharedAccessReport& r : bank_conflicts(s.kernel, k)) {
    EXPECT_TRUE(r.evaluated) << r.stmt;
    double& w = worst[r.tensor + " " + r.op];
    w = std::max(w, r.factor());
  }
  return worst;
}

CompileState compile_defaults(const std::string& expr, const std::string& knobs) {
  CompileState s;
  s.graph = parse_expression(expr);
  s.target = Target::for_arch("sm_90a");
  const DefaultChoice d = default_knobs(s.graph, s.target);
  s.knobs = resolve_knobs(d.knobs, Knobs::parse(knobs), d.mma);
  run_pipeline(s);
  return s;
}

// The defaults: A by ldmatrix (ragged: rows of 36 words, the 8 rows of a phase start 4
// banks apart; aligned: 32-word rows under the row-derived swizzle) and B element-wise
// (rows of 136 or 72 words: lane (g, t) in bank 8t + g) are conflict-free, and so are the
// 16-byte cp.async copies into both and, on the aligned shape, the staged epilogue's tile.
TEST(Tf32Fragments, BankModelDefaultsAreConflictFree) {
  for (const char* e : {"matmul(A[4096,4096]:f32, B[4096,4096]:f32)",
                        "matmul(A[1000,333]:f32, B[333,777]:f32)"}) {
    SCOPED_TRACE(e);
    const CompileState s = compile_defaults(e, "ATOM=mma_tf32");
    std::map<std::string, double> want = {{"A_s cp.async", 1.0}, {"B_s cp.async", 1.0},
                                          {"A_s ldmatrix", 1.0}, {"B_s load", 1.0}};
    if (std::string(e).find("4096") != std::string::npos) {
      want["out_s store"] = 1.0;
      want["out_s load"] = 1.0;
    }
    EXPECT_EQ(conflicts(s), want);
  }
  // One pad of 8 (the f16 default) leaves A's ldmatrix rows 2-way (40-word rows: rows r
  // and r+4 of a phase on the same 4 banks); one of 4 leaves B's reads 2-way (132-word
  // rows: lanes (g, t) and (g+4, t-1) share bank 4t + g).
  const char* e = "matmul(A[4096,4096]:f32, B[4096,4096]:f32)";
  const std::string tile = "ATOM=mma_tf32,BK=32,STAGE=cp_async,STAGES=3,";
  auto eight = conflicts(compile_defaults(e, tile + "PAD_SMEM=8"));
  EXPECT_EQ(eight.at("A_s ldmatrix"), 2.0);
  EXPECT_EQ(eight.at("B_s load"), 1.0);
  auto four = conflicts(compile_defaults(e, tile + "PAD_SMEM=4"));
  EXPECT_EQ(four.at("A_s ldmatrix"), 1.0);
  EXPECT_EQ(four.at("B_s load"), 2.0);
  // A 128-byte swizzle does not help B's 4-byte reads either: t and t+2 XOR the same.
  auto swz = conflicts(compile_defaults(e, tile + "SWIZZLE=128B"));
  EXPECT_EQ(swz.at("A_s ldmatrix"), 1.0);
  EXPECT_EQ(swz.at("B_s load"), 2.0);
}

// The article's kernels as knob sets (128x128x16 blocks, 2x4 warps of 4x4 atoms):
//  1. B transposed into shared memory, both operands by ldmatrix: 4-way reads on both
//     (16-word rows: rows r and r+2 of a phase on the same banks), transposing stores
//     16-way;
//  2. + SWIZZLE=64B (the article's row pairs XOR: chunk ^= (row/2)%4): reads 1.00x;
//  4. B row-major by 16-byte cp.async, read element-wise from rows padded to 136 words,
//     A swizzled: every access conflict-free.
TEST(Tf32Fragments, BankModelOfTheArticlesRungs) {
  const char* e = "matmul(A[4096,4096]:f32, B[4096,4096]:f32)";
  const std::string tile = "ATOM=mma_tf32,WM=2,WN=4,FM=4,FN=4,BK=16,STAGE=cp_async,STAGES=1,";
  auto bt = conflicts(compile_defaults(e, tile + "SLAB_B=kinner"));
  EXPECT_EQ(bt.at("A_s ldmatrix"), 4.0);
  EXPECT_EQ(bt.at("B_s ldmatrix"), 4.0);
  EXPECT_EQ(bt.at("B_s cp.async"), 16.0);
  auto swizzled = conflicts(compile_defaults(e, tile + "SLAB_B=kinner,SWIZZLE=64B"));
  EXPECT_EQ(swizzled.at("A_s ldmatrix"), 1.0);
  EXPECT_EQ(swizzled.at("B_s ldmatrix"), 1.0);
  EXPECT_EQ(swizzled.at("A_s cp.async"), 1.0);
  // (An explicit tile drops the default EPILOGUE=smem with the rest of the tiling group:
  // the article's rungs store directly; the staged default's tile is checked elsewhere.)
  const std::map<std::string, double> all_free = {
      {"A_s cp.async", 1.0}, {"B_s cp.async", 1.0}, {"A_s ldmatrix", 1.0}, {"B_s load", 1.0}};
  EXPECT_EQ(conflicts(compile_defaults(e, tile + "SWIZZLE=64B,PAD_KOUTER=8,GROUP_M=8")), all_free);
  EXPECT_EQ(conflicts(compile_defaults(e, passcheck::knobs_over(tile, "SWIZZLE=64B,PAD_KOUTER=8,GROUP_M=8,STAGES=2"))),
            all_free);
}

// The verifier and the interpreter take the b32 view as data: 16-byte rows of 4 words
// (another width is refused), each row address 4-word aligned.
TEST(Tf32Fragments, VerifierAndInterpreterCheckTheB32View) {
  const CompileState s = passcheck::compile_sm90a(kGemm, std::string(kKnobs) + ",SLAB_B=kinner");
  {
    KernelProgram p = s.kernel;
    p.kernels[0].warp_copies[0].cols = 8;
    try {
      verify(p);
      FAIL() << "8 words is not a 16-byte row";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("16-byte rows of 2- or 4-byte elements"),
                std::string::npos) << e.what();
    }
  }
  KernelProgram p = s.kernel;
  walk(p.kernels[0].body, [](Stmt& st) {
    if (st.kind == StmtKind::Atom && st.atom == "ldmatrix_x4_b32") st.index[0] = st.index[0] + Expr(2);
  });
  Bindings b;
  make_random_inputs(p, b, 3);
  try {
    interpret(p, b);
    FAIL() << "rows two words off their 16-byte boundary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pad rows to a multiple of 4 elements"), std::string::npos)
        << e.what();
  }
}

TEST(Tf32Fragments, ErrorsNameTheKnob) {
  const std::string tma = passcheck::error_of("matmul(A[64,64]:f32, B[64,64]:f32)",
                                   "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=tma,SLAB_B=kinner");
  EXPECT_NE(tma.find("SLAB_B=kinner with STAGE=tma"), std::string::npos) << tma;
  EXPECT_NE(tma.find("STAGE=cp_async"), std::string::npos) << tma;
  const std::string pad = passcheck::error_of("matmul(A[64,64]:f32, B[64,64]:f32)",
                                   "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=tma,PAD_KOUTER=8");
  EXPECT_NE(pad.find("PAD_KOUTER=8 with STAGE=tma"), std::string::npos) << pad;
  EXPECT_NE(passcheck::error_of(kGemm, std::string(kKnobs) + ",SLAB_B=nk").find("SLAB_B=nk is not one of: kinner, kouter"),
            std::string::npos);
}

}  // namespace
}  // namespace loom
