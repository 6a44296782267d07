// The bank-conflict model (src/passes/bank_conflicts.h) on hand-built kernels whose
// wavefront counts are worked out by hand in each test. Banks are 4-byte words mod 32.
#include <gtest/gtest.h>

#include "atoms/atoms.h"
#include "ir/error.h"
#include "passes/bank_conflicts.h"

namespace loom {
namespace {

const Expr tid = Expr::var("threadIdx.x");

// A kernel of `threads` threads whose body is `body`, with one shared tensor S.
struct Fixture {
  KernelProgram p;
  KernelOp k;
  Fixture(std::vector<int64_t> shape, DType dt = DType::F32, int threads = 32) {
    TensorDecl s;
    s.name = "S";
    s.dtype = dt;
    s.role = TensorRole::Shared;
    for (int64_t d : shape) s.shape.push_back(d);
    p.tensors.push_back(s);
    k.name = "k_test";
    k.block_threads = threads;
  }
  TensorDecl& S() { return p.tensor("S"); }
  SharedAccessReport one(Block body) {
    k.body = std::move(body);
    auto r = bank_conflicts(p, k);
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? SharedAccessReport{} : r[0];
  }
};

Stmt load(Expr offset, int width = 1) {
  Stmt s = Stmt::Load("x", "S", {std::move(offset)});
  s.width = width;
  return s;
}

// (a) f32 [16][64]: row stride 64 words = 2 full bank rows, so element (r, c) is in bank
// c. Lanes 0..15 read rows 0..15 of column 0 and lanes 16..31 rows 0..15 of column 16:
// bank 0 holds 16 distinct words, bank 16 another 16 -> 16 wavefronts; the warp asks for
// 32 x 4 B = 128 B, ideal 1 -> factor 16.
TEST(BankConflicts, ColumnOfRowMajorTileIsSixteenWay) {
  Fixture f({16, 64});
  Expr row = tid % 16, col = tid / 16 * 16;
  auto r = f.one({Stmt::Let("lane", tid), load(row * 64 + col)});
  EXPECT_TRUE(r.evaluated);
  EXPECT_EQ(r.wavefronts, 16);
  EXPECT_EQ(r.ideal, 1);
  EXPECT_DOUBLE_EQ(r.factor(), 16.0);
  EXPECT_EQ(r.tensor, "S");
  EXPECT_EQ(r.op, "load");
}

// (b) The same with pad = 1: row stride 65 = 2*32 + 1, so (r, c) is in bank (r + c) % 32.
// Column 0 takes banks 0..15, column 16 banks 16..31: every bank one word -> 1.
// The index is given as (row, col) so the model flattens it with the padded strides.
TEST(BankConflicts, PadOneMakesTheColumnConflictFree) {
  Fixture f({16, 64});
  f.S().pad = 1;
  auto r = f.one({Stmt::Load("x", "S", {tid % 16, tid / 16 * 16})});
  EXPECT_EQ(r.wavefronts, 1);
  EXPECT_DOUBLE_EQ(r.factor(), 1.0);
}

// Padding is not magic: with pad = 1 and adjacent columns 0 and 1 (lanes 16..31 in
// column 1), column 0 takes banks 0..15 and column 1 banks 1..16; banks 1..15 hold two
// distinct words each -> 2 wavefronts.
TEST(BankConflicts, PadOneWithAdjacentColumnsIsTwoWay) {
  Fixture f({16, 64});
  f.S().pad = 1;
  auto r = f.one({Stmt::Load("x", "S", {tid % 16, tid / 16})});
  EXPECT_EQ(r.wavefronts, 2);
}

// (c) Every lane reads element 5: one word, broadcast -> 1. A 16-byte broadcast still
// takes its 4 quarter-warp phases, which is also its ideal (32 x 16 B / 128 B).
TEST(BankConflicts, BroadcastIsOneWavefront) {
  Fixture f({16, 64});
  auto r = f.one({load(Expr(5))});
  EXPECT_EQ(r.wavefronts, 1);
  EXPECT_EQ(r.ideal, 1);
  auto v = f.one({load(Expr(8), 4)});
  EXPECT_EQ(v.wavefronts, 4);
  EXPECT_EQ(v.ideal, 4);
}

// (d) float4 per lane, lane i at bytes 16i..16i+15: each quarter warp (8 lanes) covers
// 128 contiguous bytes = all 32 banks once -> 1 per phase, 4 in all = ideal (512 B).
// Spreading the lanes 32 B apart puts two words in each bank per phase -> 8, factor 2.
TEST(BankConflicts, Float4ConsecutiveIsIdeal) {
  Fixture f({16, 64});
  auto r = f.one({load(tid * 4, 4)});
  EXPECT_EQ(r.bytes_per_lane, 16);
  EXPECT_EQ(r.wavefronts, 4);
  EXPECT_EQ(r.ideal, 4);
  auto spread = f.one({load(tid * 8, 4)});
  EXPECT_EQ(spread.wavefronts, 8);
  EXPECT_DOUBLE_EQ(spread.factor(), 2.0);
}

// (e) f32 [32][32] (128-byte rows), lane r reads the float4 at (r, 0..3) — a transposed
// operand read a chunk at a time. Unswizzled every row's chunk 0 is banks 0..3: a
// quarter warp has 8 distinct words per bank -> 8 per phase, 32 in all, factor 8. With
// Swizzle<3,2,3> (SWIZZLE=128B for f32) row r's chunk 0 moves to chunk r % 8: the 8
// rows of a phase cover all 32 banks once -> 1 per phase, 4 = ideal.
TEST(BankConflicts, SwizzleRemovesTransposedConflict) {
  Fixture f({32, 32});
  auto plain = f.one({load(tid * 32, 4)});
  EXPECT_EQ(plain.wavefronts, 32);
  EXPECT_DOUBLE_EQ(plain.factor(), 8.0);
  f.S().swizzle = Swizzle{3, 2, 3};
  auto swz = f.one({load(tid * 32, 4)});
  EXPECT_EQ(swz.wavefronts, 4);
  EXPECT_DOUBLE_EQ(swz.factor(), 1.0);
}

// 8-byte requests: half-warp phases. float2 per lane at stride 2 -> each half warp
// covers 128 B once -> 2 = ideal. At stride 64 elements every lane hits banks 0 and 1
// with its own words: 16 per phase -> 32.
TEST(BankConflicts, EightByteRequestsUseHalfWarps) {
  Fixture f({32, 64});
  auto r = f.one({load(tid * 2, 2)});
  EXPECT_EQ(r.wavefronts, 2);
  EXPECT_EQ(r.ideal, 2);
  auto col = f.one({load(tid * 64, 2)});
  EXPECT_EQ(col.wavefronts, 32);
}

// 2-byte elements: lanes 2i and 2i+1 read the halves of word i -> 16 words in 16 banks,
// 1 wavefront. A column of f16 [32][64] (128-byte rows) is 32 words of bank 0 -> 32.
TEST(BankConflicts, HalfWordsShareAWord) {
  Fixture f({32, 64}, DType::F16);
  EXPECT_EQ(f.one({load(tid)}).wavefronts, 1);
  EXPECT_EQ(f.one({load(tid * 64)}).wavefronts, 32);
}

// Lanes whose If is false do not access: only lanes 0..7 read the column -> 8. A
// condition on an unbound symbol cannot be evaluated and counts every lane: 32.
TEST(BankConflicts, InactiveLanesDoNotCount) {
  Fixture f({32, 64});
  auto r = f.one({Stmt::If(tid < 8, {load(tid * 64)})});
  EXPECT_EQ(r.wavefronts, 8);
  auto unknown = f.one({Stmt::If(tid < Expr::var("M"), {load(tid * 64)})});
  EXPECT_EQ(unknown.wavefronts, 32);
  auto bound = bank_conflicts(f.p, f.k, {{"M", 4}});
  EXPECT_EQ(bound.at(0).wavefronts, 4);
  Stmt pred = load(tid * 64);
  pred.pred = tid < 2;
  EXPECT_EQ(f.one({pred}).wavefronts, 2);
}

// Lets are substituted and the worst warp wins: warp 0 reads consecutive words (1),
// warp 1 a column (32).
TEST(BankConflicts, WorstWarpOfTheBlock) {
  Fixture f({64, 32}, DType::F32, 64);
  Expr w = Expr::var("w"), lane = Expr::var("lane");
  auto r = f.one({Stmt::Let("w", tid / 32), Stmt::Let("lane", tid % 32),
                  load(w * lane * 32 + (Expr(1) - w) * lane)});
  EXPECT_EQ(r.wavefronts, 32);
}

// Loop variables: every value when the combinations are few (the worst is j = 1, a
// column stride of 32), first/middle/last of each when more than kExhaustiveLimit.
TEST(BankConflicts, LoopVariablesAreEnumeratedOrSampled) {
  Fixture f({64, 64});
  Expr j = Expr::var("j");
  auto r = f.one({Stmt::For("j", Expr(3), LoopKind::Parallel, "x", {load(tid * (j * 31 + 1))})});
  EXPECT_EQ(r.wavefronts, 32);  // j = 1: stride 32 words, all in bank 0
  EXPECT_TRUE(r.exhaustive);
  EXPECT_EQ(r.bindings, 3);
  EXPECT_EQ(r.vars, "j");
  Expr a = Expr::var("a"), b = Expr::var("b");
  auto big = f.one({Stmt::For(
      "a", Expr(100), LoopKind::Parallel, "x",
      {Stmt::For("b", Expr(100), LoopKind::Parallel, "y", {load(tid + (a + b) % 2)})})});
  EXPECT_FALSE(big.exhaustive);
  EXPECT_EQ(big.bindings, 9);  // {0, 49, 99} x {0, 49, 99}
  EXPECT_EQ(big.bindings_total, 10000);
  EXPECT_EQ(big.wavefronts, 1);
}

// A cp.async destination counts even where its predicate is false (it zero-fills), and
// an offset that needs an unbound symbol is reported as not evaluated.
TEST(BankConflicts, AsyncCopyAndUnboundOffset) {
  Fixture f({32, 64});
  TensorDecl g;
  g.name = "G";
  g.shape = {Expr(1024)};
  f.p.tensors.push_back(g);
  auto r = f.one({Stmt::AsyncCopy("S", tid * 64, "G", tid, 1, Expr(0))});
  EXPECT_EQ(r.op, "cp.async");
  EXPECT_EQ(r.wavefronts, 32);
  auto u = f.one({load(tid * Expr::var("K"))});
  EXPECT_FALSE(u.evaluated);
  EXPECT_NE(format_bank_conflicts({u}).find("unbound"), std::string::npos);
}

// ldmatrix (a declared warp copy): each lane that supplies a row reads 16 bytes there, a
// phase of 8 lanes per 8x8 matrix. The tf32 A arrangement on f32 [16][16] (64-byte rows):
// lane l reads row l%16 from word 4(l/16). Rows r and r+2 start 32 words apart, so a
// phase's 8 rows share 2 groups of 4 banks: 4 words per bank -> 4 per phase, 16 in all
// against an ideal of 4. A pad of 4 (20-word rows) starts the 8 rows in 8 different
// groups -> 4 = ideal. The x2 of B reads only lanes 0..15 (2 phases, ideal 2): the
// other lanes' addresses would double the count if they were counted.
TEST(BankConflicts, LdmatrixPhasesAreMatrices) {
  Fixture f({16, 16});
  f.k.warp_copies = {warp_copy(atom("ldmatrix_x4_b32")), warp_copy(atom("ldmatrix_x2_b32"))};
  const Expr lane = tid % 32;
  auto x4 = f.one({Stmt::CopyAtom("ldmatrix_x4_b32", "frag", {}, "S", lane % 16 * 16 + lane / 16 * 4)});
  EXPECT_EQ(x4.op, "ldmatrix");
  EXPECT_EQ(x4.bytes_per_lane, 16);
  EXPECT_EQ(x4.wavefronts, 16);
  EXPECT_EQ(x4.ideal, 4);
  auto x2 = f.one({Stmt::CopyAtom("ldmatrix_x2_b32", "frag", {}, "S", lane % 8 * 16 + lane / 8 % 2 * 4)});
  EXPECT_EQ(x2.wavefronts, 8);
  EXPECT_EQ(x2.ideal, 2);
  f.S().pad = 4;
  auto padded = f.one({Stmt::CopyAtom("ldmatrix_x4_b32", "frag", {}, "S", lane % 16 * 20 + lane / 16 * 4)});
  EXPECT_EQ(padded.wavefronts, 4);
  EXPECT_DOUBLE_EQ(padded.factor(), 1.0);
}

// The core on explicit addresses: two lanes on different words of one bank -> 2.
TEST(BankConflicts, WarpWavefrontsCore) {
  std::vector<std::vector<int64_t>> lanes(32);
  lanes[0] = {0};
  lanes[1] = {128};
  EXPECT_EQ(warp_wavefronts(lanes, 4, 4), 2);
  lanes[1] = {0};
  EXPECT_EQ(warp_wavefronts(lanes, 4, 4), 1);
  EXPECT_EQ(warp_wavefronts(std::vector<std::vector<int64_t>>(32), 4, 4), 0);
}

TEST(BankConflicts, TableNamesEveryColumn) {
  Fixture f({16, 64});
  f.k.body = {load(tid % 16 * 64 + tid / 16 * 16)};
  std::string t = format_bank_conflicts(bank_conflicts(f.p, f.k));
  for (const char* col : {"access", "tensor", "width", "wavefronts", "ideal", "factor"})
    EXPECT_NE(t.find(col), std::string::npos) << col;
  EXPECT_NE(t.find("16.00x"), std::string::npos) << t;
  EXPECT_NE(t.find("x = load S["), std::string::npos) << t;
}

}  // namespace
}  // namespace loom
