// Realigned 16-byte copies (REALIGN=1, k:015_lower_stages, ir/realign.h): rows of an odd
// number of 16-bit elements start 2-byte aligned, so each thread loads the two aligned
// 16-byte chunks covering its 8 elements and stores the shifted window as one 16-byte
// unit. Every row offset (row r of an odd-length row starts at element r*N, r*N % 8 taking
// all 8 values), both 16-bit dtypes, both operand majornesses, ragged K, the edges past N
// and K: after every pass the program runs on the interpreter, which fills the registers
// of unread chunks with NaN (a window that selected them would show), rejects a chunk load
// of elements outside the tensor and a store that does not start a 16-byte unit, and is
// compared with the naive Loop IR. Then the statements' own errors.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/realign.h"
#include "pass_check.h"
#include "passes/defaults.h"

namespace loom {
namespace {

int count_if(const Block& b, bool (*pred)(const Stmt&)) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += pred(s); });
  return n;
}

const std::string kRing =
    ",WN=1,FM=1,FN=1,STAGE=cp_async,SWIZZLE=128B,VECTORIZE=8,REALIGN=1";

struct Case {
  std::string expr, knobs;
  bool a_realigned, b_realigned;
};

class RealignEveryPass : public ::testing::TestWithParam<Case> {};

TEST_P(RealignEveryPass, MatchesTheNaiveProgram) {
  const Case& c = GetParam();
  CompileState s = passcheck::check_every_pass(c.expr, Knobs::parse(c.knobs), 71);
  const KernelOp& k = s.kernel.kernels.at(0);
  // Each realigned operand: one chunk load and one realigned store per slab copy.
  const int loads = count_if(k.body, is_chunk_load), stores = count_if(k.body, is_realigned_store);
  EXPECT_GT(loads, 0);
  EXPECT_EQ(loads, stores);
  bool a = false, b = false;
  walk(k.body, [&](const Stmt& st) {
    if (!is_chunk_load(st)) return;
    a |= st.tensor == "A";
    b |= st.tensor == "B";
  });
  EXPECT_EQ(a, c.a_realigned);
  EXPECT_EQ(b, c.b_realigned);
  // No 2-byte element loads left for the realigned operands.
  walk(k.body, [&](const Stmt& st) {
    if (st.kind == StmtKind::Load && !is_chunk_load(st) && st.width == 1 &&
        ((st.tensor == "A" && c.a_realigned) || (st.tensor == "B" && c.b_realigned)))
      ADD_FAILURE() << "element load of " << st.tensor << " left";
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RealignEveryPass,
    ::testing::Values(
        // B [K, N] with N odd (N % 8 = 7, 5, 1, 1): rows shifted by every offset, the last
        // tile's window straddling the row's end; A by 16-byte cp.async (the mixed ring).
        Case{"matmul(A[64,24]:bf16, B[24,4095]:bf16)", "ATOM=wgmma_bf16,WM=1,BN=256,BK=32,STAGES=3" + kRing, false, true},
        Case{"matmul(A[64,16]:f16, B[16,4093]:f16)", "ATOM=wgmma_f16,WM=1,BN=256,BK=32,STAGES=2" + kRing, false, true},
        Case{"matmul(A[100,64]:bf16, B[64,777]:bf16)", "ATOM=wgmma_bf16,WM=1,BN=128,BK=32,STAGES=4" + kRing, false, true},
        Case{"matmul(A[70,48]:f16, B[48,1001]:f16)", "ATOM=wgmma_f16,WM=2,BN=128,BK=32,STAGES=4" + kRing, false, true},
        // K odd: A's rows too (both operands realigned), the edge past K zero-filled.
        Case{"matmul(A[70,333]:f16, B[333,72]:f16)", "ATOM=wgmma_f16,WM=1,BN=64,BK=64,STAGES=3" + kRing, true, false},
        Case{"matmul(A[64,77]:bf16, B[77,777]:bf16)", "ATOM=wgmma_bf16,WM=1,BN=128,BK=32,STAGES=4" + kRing, true, true},
        // K-major B (given transposed, [N, K], K odd) and M-major A (given transposed,
        // [K, M], M odd): the realigned rows run along K and M.
        Case{"matmul(A[96,77]:bf16, B[72,77]:bf16.T)", "ATOM=wgmma_bf16,WM=1,BN=64,BK=32,STAGES=3" + kRing, true, true},
        Case{"matmul(A[72,71]:f16.T, B[72,77]:f16)", "ATOM=wgmma_f16,WM=1,BN=64,BK=64,STAGES=2" + kRing, true, true},
        // STAGE=sync fills the same layout through the register ring; a fused epilogue.
        Case{"matmul(A[64,64]:bf16, B[64,333]:bf16)", "ATOM=wgmma_bf16,WM=1,WN=1,FM=1,FN=1,BN=64,BK=64,"
             "STAGE=sync,SWIZZLE=128B,STAGES=2,VECTORIZE=8,REALIGN=1", false, true},
        Case{"relu(add(matmul(A[64,40]:bf16, B[40,99]:bf16), bias[99]:bf16))",
             "ATOM=wgmma_bf16,WM=1,BN=64,BK=32,STAGES=3" + kRing, false, true},
        // The cp.async producer warpgroup (WARP_SPECIALIZE=1) realigns for the consumers;
        // mma.sync's ring (16-byte rows with PAD_SMEM=8) realigns too.
        Case{"matmul(A[100,96]:bf16, B[96,77]:bf16)",
             "ATOM=wgmma_bf16,WM=1,BN=64,BK=32,STAGES=4,WARP_SPECIALIZE=1" + kRing, false, true},
        // K odd with aligned output rows: the TMA-store epilogue and persistent tiles on
        // the threads' ring (each CTA's ring drained and refilled per tile).
        Case{"matmul(A[200,77]:bf16, B[77,128]:bf16)",
             "ATOM=wgmma_bf16,WM=2,BN=64,BK=32,STAGES=4,EPILOGUE=tma_store,EPI_BUFFERS=2,"
             "PERSISTENT=1,PERSISTENT_CTAS=2,GROUP_M=8" + kRing, true, false},
        Case{"matmul(A[70,77]:f16, B[77,45]:f16)",
             "ATOM=mma_f16,WM=2,WN=2,FM=1,FN=2,BK=32,STAGE=cp_async,STAGES=3,PAD_SMEM=8,VECTORIZE=8,REALIGN=1", true, true}));

// A batch: every entry's rows of its own B (entry b starts at element b*K*N, not a
// multiple of 8 either).
TEST(RealignCopy, BatchedOperands) {
  CompileState s = passcheck::check_every_pass(
      "matmul(A[3,64,40]:bf16, B[3,40,77]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,BN=64,BK=32,STAGES=3" + kRing), 73);
  EXPECT_GT(count_if(s.kernel.kernels.at(0).body, is_chunk_load), 0);
}

// REALIGN=0 keeps the 2-byte register copies; aligned rows never take the realigned
// copy (they have 16-byte cp.async), whatever the knob; nor does VECTORIZE below 8.
TEST(RealignCopy, OnlyOddRowsAndOnlyWhenAsked) {
  CompileState off = passcheck::check_every_pass(
      "matmul(A[64,40]:bf16, B[40,77]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,BN=64,BK=32,STAGES=3,WN=1,FM=1,FN=1,STAGE=cp_async,"
                   "SWIZZLE=128B,VECTORIZE=8,REALIGN=0"), 75);
  EXPECT_EQ(count_if(off.kernel.kernels.at(0).body, is_chunk_load), 0);
  CompileState aligned = passcheck::check_every_pass(
      "matmul(A[64,40]:bf16, B[40,80]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,BN=64,BK=32,STAGES=3" + kRing), 77);
  EXPECT_EQ(count_if(aligned.kernel.kernels.at(0).body, is_chunk_load), 0);
  // VECTORIZE=4 caps accesses at 8 bytes: no 16-byte chunks.
  CompileState narrow = passcheck::check_every_pass(
      "matmul(A[64,40]:bf16, B[40,77]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,BN=64,BK=32,STAGES=3,WN=1,FM=1,FN=1,STAGE=cp_async,"
                   "SWIZZLE=128B,VECTORIZE=4,REALIGN=1"), 78);
  EXPECT_EQ(count_if(narrow.kernel.kernels.at(0).body, is_chunk_load), 0);
}

// The defaults: every 16-bit GEMM with an odd operand row takes REALIGN=1 on sm_90a, on
// every path; aligned rows, f32 and sm_80 do not.
TEST(RealignCopy, DefaultsForOddSixteenBitRows) {
  auto realign = [](const std::string& expr, const char* arch) {
    const DefaultChoice c = default_knobs(parse_expression(expr), Target::for_arch(arch));
    const int64_t k = c.knobs.get_int("REALIGN", 0);
    EXPECT_EQ(c.mma.get_int("REALIGN", 0), k) << expr;
    EXPECT_EQ(c.wgmma.get_int("REALIGN", 0), k) << expr;
    return k;
  };
  EXPECT_EQ(realign("matmul(A[4096,4096]:bf16, B[4096,4095]:bf16)", "sm_90a"), 1);
  EXPECT_EQ(realign("matmul(A[4096,4095]:bf16, B[4095,4096]:bf16)", "sm_90a"), 1);
  EXPECT_EQ(realign("matmul(A[1000,333]:f16, B[333,777]:f16)", "sm_90a"), 1);
  EXPECT_EQ(realign("matmul(A[333,1001]:f16.T, B[333,778]:f16)", "sm_90a"), 1);
  EXPECT_EQ(realign("matmul(A[4096,4096]:bf16, B[4096,4094]:bf16)", "sm_90a"), 0);
  EXPECT_EQ(realign("matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", "sm_90a"), 0);
  EXPECT_EQ(realign("matmul(A[1000,333]:f32, B[333,777]:f32)", "sm_90a"), 0);
  EXPECT_EQ(realign("matmul(A[1000,333]:f16, B[333,777]:f16)", "sm_80"), 0);
}

// The statements' semantics, by hand: a kernel of one thread that chunk-loads row `r`
// of a [5, 13] bf16 tensor (row r starts at element 13r: shifts 0, 5, 2, 7, 4) and stores
// the window of its first 8 elements, zero past the row's 13.
struct Hand {
  KernelProgram p;
  Bindings b;
};
Hand hand_kernel(Expr g, Expr valid, Expr d = Expr(0), int width = 8) {
  Hand h;
  h.p.tensors.push_back({"A", DType::BF16, {Expr(5), Expr(13)}, TensorRole::Input});
  TensorDecl s{"S", DType::BF16, {Expr(16)}, TensorRole::Shared};
  h.p.tensors.push_back(s);
  h.p.tensors.push_back({"out", DType::BF16, {Expr(16)}, TensorRole::Output});
  KernelOp k;
  k.name = "k";
  k.block_threads = 1;
  k.body = {Stmt::Alloc("v", {Expr(1), Expr(16)}),
            ChunkLoad("v", {Expr(0)}, "A", g, width, valid),
            RealignedStore("S", d, "v", {Expr(0)}, g, width, valid),
            Stmt::Barrier()};
  for (int i = 0; i < 8; ++i) {
    Stmt ld = Stmt::Load("x" + std::to_string(i), "S", {Expr(i)});
    k.body.push_back(ld);
    k.body.push_back(Stmt::Write("out", {Expr(i)}, Operand::value("x" + std::to_string(i))));
  }
  k.params = {"A", "out"};
  h.p.kernels.push_back(k);
  HostTensor a;
  a.dtype = DType::BF16;
  a.shape = {5, 13};
  for (int i = 0; i < 65; ++i) a.data.push_back(double(i + 1));
  h.b.tensors["A"] = a;
  HostTensor o;
  o.dtype = DType::BF16;
  o.shape = {16};
  o.data.assign(16, -1.0);
  h.b.tensors["out"] = o;
  return h;
}

TEST(RealignCopy, WindowOfEveryRowShiftZeroPastTheRow) {
  for (int r = 0; r < 5; ++r) {
    for (int valid : {8, 5, 1, 0}) {
      SCOPED_TRACE("row " + std::to_string(r) + " valid " + std::to_string(valid));
      // Columns 8.. of row r hold 5 elements: valid 5 is the row's end.
      const int64_t g = 13 * r + (valid == 5 ? 8 : 0);
      Hand h = hand_kernel(Expr(g), Expr(valid));
      ASSERT_NO_THROW(verify(h.p));
      ASSERT_NO_THROW(interpret(h.p, h.b));
      const HostTensor& o = h.b.tensors.at("out");
      for (int i = 0; i < 8; ++i)
        EXPECT_EQ(o.data[size_t(i)], i < valid ? double(g + i + 1) : 0.0) << i;
    }
  }
}

TEST(RealignCopy, ErrorsNameTheProblem) {
  auto fails = [](Hand h, const std::string& what) {
    try {
      verify(h.p);
      interpret(h.p, h.b);
      ADD_FAILURE() << "no error; expected one mentioning " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  // Wanted elements past the tensor's 65: a chunk load may not read them.
  fails(hand_kernel(Expr(60), Expr(8)), "outside tensor A");
  // A valid count beyond one chunk's 8 elements.
  fails(hand_kernel(Expr(0), Expr(9)), "is outside 0..8");
  // The window must land on a 16-byte unit of the shared tensor.
  fails(hand_kernel(Expr(0), Expr(8), Expr(4)), "does not start a 16-byte unit");
  // 4-byte elements: not a realigned copy's.
  Hand f32 = hand_kernel(Expr(0), Expr(8));
  f32.p.tensors[0].dtype = DType::F32;
  fails(f32, "moves 16-bit elements");
  // A width other than 8 (two chunks of 16 registers).
  fails(hand_kernel(Expr(0), Expr(4), Expr(0), 4), "writes two 16-byte chunks");
}

TEST(RealignCopy, KnobValuesAreChecked) {
  try {
    passcheck::check_every_pass("matmul(A[64,40]:bf16, B[40,77]:bf16)",
                                Knobs::parse("ATOM=wgmma_bf16,WM=1,BN=64,BK=32,STAGES=3" +
                                             std::string(",WN=1,FM=1,FN=1,STAGE=cp_async,"
                                                         "SWIZZLE=128B,VECTORIZE=8,REALIGN=2")),
                                79);
    ADD_FAILURE() << "REALIGN=2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("REALIGN"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
