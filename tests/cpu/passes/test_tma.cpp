// STAGE=tma: k:015_lower_stages turns each slab into one TMA box completing on a ring
// slot's mbarrier, k:050_pipeline keeps STAGES boxes in flight. Random small shapes
// (ragged M and N, K a multiple of 4 so f32 rows are whole 16-byte units), STAGES 1..4,
// with and without PIPELINE, SWIZZLE=128B where the tile allows it: after every pass the
// program runs on the CPU interpreter (which models TMA loads landing at the mbarrier
// wait) and is compared with the naive Loop IR. Plus the IR's shape, the interpreter's
// synchronization errors (missing wait, deadlock, missing barrier) and the preconditions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::count;

// Every pass, verified and interpreted, against the naive Loop IR.
CompileState check_case(const std::string& expr, const std::map<std::string, int64_t>& sizes,
                        const std::string& knobs, uint64_t seed) {
  return passcheck::check_every_pass(expr, Knobs::parse(knobs), seed, sizes);
}

TEST(Tma, LowersToBoxesAndMbarriers) {
  CompileState s = check_case("matmul(A[M,K]:f32, B[K,N]:f32)", {{"M", 19}, {"N", 24}, {"K", 20}},
                              "BM=8,BN=8,FM=2,FN=2,BK=4,STAGE=tma,STAGES=1", 1);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.mbarriers, 1);
  ASSERT_EQ(k.tma.size(), 2u);
  EXPECT_EQ(k.tma[0].tensor, "A");
  EXPECT_EQ(k.tma[0].box, (std::vector<int64_t>{4, 8}));  // [BK] innermost, then [BM]
  EXPECT_EQ(k.tma[1].tensor, "B");
  EXPECT_EQ(k.tma[1].box, (std::vector<int64_t>{8, 4}));  // [BN] innermost, then [BK]
  EXPECT_EQ(count(k.body, StmtKind::TmaLoad), 2);
  EXPECT_EQ(count(k.body, StmtKind::MbarInit), 1);
  EXPECT_EQ(count(k.body, StmtKind::MbarWait), 1);
  EXPECT_EQ(count(k.body, StmtKind::AsyncCopy), 0);
  std::string ir = print(s.kernel);
  EXPECT_NE(ir.find("mbarriers=1"), std::string::npos) << ir;
  EXPECT_NE(ir.find("mbar.arrive.expect_tx [0] 256B"), std::string::npos) << ir;  // 2 x 8x4 f32
  EXPECT_NE(ir.find("tma.load A_s[0] <- A[m_b * 8, k_o * 4] via A_s_tmap mbar[0] 128B"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("mbar.wait [0] parity=k_o % 2"), std::string::npos) << ir;
}

TEST(Tma, PipelineKeepsStagesBoxesInFlight) {
  CompileState s = check_case("matmul(A[16,28]:f32, B[9,28]:f32.T)", {},
                              "BM=8,BN=8,FM=2,FN=2,BK=4,STAGE=tma,STAGES=3,PIPELINE=1", 2);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.mbarriers, 3);
  // Prologue: 3 boxes of each operand; main loop: one refill of each.
  EXPECT_EQ(count(k.body, StmtKind::TmaLoad), 2 * 4);
  EXPECT_EQ(count(k.body, StmtKind::MbarArriveExpectTx), 4);
  EXPECT_EQ(count(k.body, StmtKind::MbarWait), 1);
  std::string ir = print(s.kernel);
  EXPECT_EQ(ir.find("if 0 < "), std::string::npos) << ir;  // the prologue's guards fold
  EXPECT_NE(ir.find("if k_o + 3 < 7:"), std::string::npos) << ir;
  EXPECT_NE(ir.find("mbar.wait [k_o % 3] parity=k_o / 3 % 2"), std::string::npos) << ir;
}

TEST(Tma, RandomShapesStagesAndPipelines) {
  std::mt19937_64 rng(90);
  for (int trial = 0; trial < 24; ++trial) {
    int64_t M = 1 + int64_t(rng() % 30), N = 1 + int64_t(rng() % 30);
    int64_t K = 4 * (1 + int64_t(rng() % 10));
    int64_t S = 1 + int64_t(rng() % 4);
    bool pipe = rng() % 2;
    // B transposed keeps its rows K long; untransposed B needs N a multiple of 4.
    bool tb = rng() % 2;
    if (!tb) N = 4 * ((N + 3) / 4);
    std::string dt = rng() % 3 ? "f32" : "tf32";  // tf32 is stored, and boxed, as f32
    std::string mm = "matmul(A[M,K]:" + dt + ", " + (tb ? "B[N,K]:" + dt + ".T" : "B[K,N]:" + dt) + ")";
    std::string expr = rng() % 2 ? mm : "relu(" + mm + ")";
    int FM = rng() % 2 ? 2 : 4, FN = rng() % 2 ? 2 : 4;
    std::string knobs = "BM=8,BN=8,FM=" + std::to_string(FM) + ",FN=" + std::to_string(FN) +
                        ",BK=" + (rng() % 2 ? "4" : "8") + ",STAGE=tma,STAGES=" +
                        std::to_string(S) + ",PIPELINE=" + (pipe ? "1" : "0");
    check_case(expr, {{"M", M}, {"N", N}, {"K", K}}, knobs, 500 + uint64_t(trial));
    if (HasFatalFailure()) return;
  }
}

TEST(Tma, Swizzle128BWhereTheTileAllowsIt) {
  // 128 B rows: BK = 32 f32 for A[M,K] and B[N,K]; 8 rows fill one 1024 B swizzle repeat.
  for (int S : {1, 2}) {
    CompileState s = check_case("matmul(A[M,K]:f32, B[N,K]:f32.T)",
                                {{"M", 13}, {"N", 10}, {"K", 72}},
                                "BM=8,BN=8,FM=4,FN=4,BK=32,STAGE=tma,SWIZZLE=128B,PIPELINE=1,STAGES=" +
                                    std::to_string(S),
                                30 + uint64_t(S));
    for (const TmaDescriptor& d : s.kernel.kernels.at(0).tma) EXPECT_EQ(d.swizzle_bytes, 128);
  }
}

TEST(Tma, BatchedBoxesHaveTheTensorsRank) {
  CompileState s = check_case("bmm(A[3,10,12]:f32, B[3,12,8]:f32)", {},
                              "BM=8,BN=8,FM=2,FN=2,BK=4,STAGE=tma,STAGES=2", 40);
  const KernelOp& k = s.kernel.kernels.at(0);
  ASSERT_EQ(k.tma.size(), 2u);
  EXPECT_EQ(k.tma[0].box, (std::vector<int64_t>{4, 8, 1}));
}

// ---- the interpreter catches what would hang or race on the GPU ----------------------

void drop(Block& b, StmtKind kind) {
  for (size_t i = b.size(); i-- > 0;) {
    if (b[i].kind == kind) b.erase(b.begin() + long(i));
    else drop(b[i].body, kind);
  }
}

CompileState small(const std::string& knobs) {
  return passcheck::compile_sm90a("matmul(A[16,16]:f32, B[16,16]:f32)",
                                  "BM=8,BN=8,FM=2,FN=2,BK=4,STAGE=tma," + knobs);
}

void expect_error(CompileState& s, const std::string& what) {
  Bindings b;
  make_random_inputs(s.kernel, b, 3);
  try {
    interpret(s.kernel, b);
    FAIL() << "expected an error containing: " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Tma, ReadingABoxBeforeItsWaitIsAnError) {
  for (const char* knobs : {"STAGES=1", "STAGES=2,PIPELINE=1"}) {
    CompileState s = small(knobs);
    drop(s.kernel.kernels[0].body, StmtKind::MbarWait);
    Bindings b;
    make_random_inputs(s.kernel, b, 3);
    EXPECT_THROW(interpret(s.kernel, b), RaceError) << knobs;
    expect_error(s, "before its TMA load completed");
  }
}

TEST(Tma, WaitingOnAPhaseNobodyCompletesIsADeadlock) {
  CompileState s = small("STAGES=2,PIPELINE=1");
  walk(s.kernel.kernels[0].body, [](Stmt& st) {
    if (st.kind == StmtKind::MbarWait) st.cond = Expr(0);  // phase 0 forever
  });
  expect_error(s, "deadlock");
  CompileState t = small("STAGES=1");
  drop(t.kernel.kernels[0].body, StmtKind::MbarArriveExpectTx);
  expect_error(t, "deadlock");
}

TEST(Tma, RefillingASlotStillBeingReadIsARace) {
  // Without the barrier after the math, thread 0 refills the slot the others still read.
  CompileState s = small("STAGES=1");
  Block& body = s.kernel.kernels[0].body;
  for (Stmt& st : body)
    if (st.kind == StmtKind::For && st.loop_kind == LoopKind::Reduce) drop(st.body, StmtKind::Barrier);
  Bindings b;
  make_random_inputs(s.kernel, b, 3);
  EXPECT_THROW(interpret(s.kernel, b), RaceError);
}

TEST(Tma, ByteCountsMustMatch) {
  CompileState s = small("STAGES=1");
  walk(s.kernel.kernels[0].body, [](Stmt& st) {
    if (st.kind == StmtKind::MbarArriveExpectTx) st.imm -= 16;
  });
  expect_error(s, "more from TMA loads than its arrive.expect_tx announced");
}

// ---- preconditions, each naming the limit --------------------------------------------

void expect_compile_error(const std::string& expr, const std::string& knobs,
                          const std::string& what, const std::string& arch = "sm_90a") {
  {
    const std::string e = passcheck::error_of(expr, knobs, Target::for_arch(arch));
    ASSERT_NE(e, "") << "expected an error containing: " << what;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  }
}

TEST(Tma, PreconditionsNameTheLimit) {
  expect_compile_error("matmul(A[64,777]:f32, B[777,64]:f32)", "STAGE=tma",
                       "STAGE=tma needs rows of A to be a multiple of 16 bytes; A's rows are "
                       "3108 B: use STAGE=cp_async");
  expect_compile_error("matmul(A[64,64]:f32, B[64,64]:f32)", "BM=8,BN=8,FM=2,FN=2,BK=2,STAGE=tma",
                       "STAGE=tma needs the inner box dimension of A (slab A_s) to be a multiple "
                       "of 16 bytes; it is 2 x f32 = 8 B");
  expect_compile_error("matmul(A[512,64]:f32, B[64,64]:f32)",
                       "BM=512,BN=4,FM=64,FN=4,BK=8,STAGE=tma",
                       "STAGE=tma boxes have at most 256 elements per dimension; A (slab A_s) "
                       "needs 512");
  expect_compile_error("matmul(A[64,64]:f32, B[64,64]:f32)", "STAGE=tma", "target is sm_80",
                       "sm_80");
  expect_compile_error("matmul(A[64,64]:f32, B[64,64]:f32)", "STAGE=tma,PAD_SMEM=1",
                       "TMA writes dense boxes");
  expect_compile_error("matmul(A[64,64]:f32, B[64,64]:f32)",
                       "BM=8,BN=8,FM=2,FN=2,BK=32,STAGE=tma,SWIZZLE=64B",
                       "a TMA box's inner dimension may not exceed its 64-byte swizzle span");
  // 8 x 4 f32 = 128 B per A buffer is fine; 4 x 4 = 64 B would start the next one off
  // the copy engine's 128-byte alignment.
  expect_compile_error("matmul(A[64,64]:f32, B[64,64]:f32)",
                       "BM=4,BN=8,FM=2,FN=2,BK=4,STAGE=tma,STAGES=2",
                       "not a multiple of 128 B");
}

}  // namespace
}  // namespace loom
