// The persistent wgmma kernel's tile transition (what runs between two tiles while the
// tensor pipes idle), both defaults:
// WGMMA_ZERO=scale_d (k:026 step 6): a wgmma kernel zeroes a tile's accumulators through
// wgmma's scale-d predicate (the first k-step computes D = A·B) instead of a zeroing loop.
// Checked: the Kernel IR's shape with and without it, every pass on the interpreter over
// persistent tiles (a second tile whose first wgmma accumulated would add the previous
// tile's sums), split-K and register A, the interpreter's scale-d semantics (ignoring the
// accumulators, one predicate per warpgroup) and the verifier's refusal of scale-d on
// anything but wgmma.
// EPI_SYNC=1 (k:053): one named barrier per output strip instead of two, the storing
// thread's wait moved in front of the store's barrier. Checked: barrier and wait counts,
// every pass over several tiles per CTA with 2 and 4 buffers, and that the interpreter
// catches a wait one store too short (the race the moved wait prevents).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "frontend/parser.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::sm90a_with_sms;

// The final Kernel IR on the interpreter against the Loop IR (check_every_pass runs every
// pass: kept for the tests of the passes this file is about, too slow for the rest).
CompileState check_final(const std::string& expr, const std::string& knobs, uint64_t seed,
                         const Target& t) {
  SCOPED_TRACE(expr + " knobs=" + knobs);
  CompileState s = passcheck::compile_for(t, expr, knobs);
  Bindings in;
  make_random_inputs(s.loop, in, seed);
  passcheck::expect_close(passcheck::run_level(s, Level::Kernel, in),
                          passcheck::run_level(s, Level::Loop, in),
                          s.graph.node(s.graph.result()).dtype, "final kernel");
  return s;
}

bool is_wgmma(const Stmt& s) { return s.kind == StmtKind::Atom && s.atom.rfind("wgmma_", 0) == 0; }

// Inits of the accumulator array `acc*` (the zeroing), and the wgmma statements' scale-d.
int zeroing_inits(const Block& b) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += s.kind == StmtKind::Init && s.dst.rfind("acc", 0) == 0; });
  return n;
}
std::vector<std::string> scale_ds(const Block& b) {
  std::vector<std::string> out;
  walk(b, [&](const Stmt& s) {
    if (is_wgmma(s)) out.push_back(s.scale_d.str());
  });
  return out;
}

const std::string kPersistent =
    "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=3,GROUP_M=2,"
    "PERSISTENT=1,WARP_SPECIALIZE=1";

TEST(WgmmaZero, ScaleDReplacesTheZeroingLoop) {
  const std::string expr = "matmul(A[192,256]:bf16, B[256,128]:bf16)";
  const CompileState on = passcheck::compile_for(sm90a_with_sms(2), expr, kPersistent);
  const KernelOp& k = on.kernel.kernels.at(0);
  EXPECT_EQ(zeroing_inits(k.body), 0);
  // The slab loop k_o around the atom-step loop k_i (BK=64: 4 steps of k16, unrolled by
  // codegen, which folds the predicate to `0 < k_o` for k_i = 0 and 1 for the others).
  EXPECT_EQ(scale_ds(k.body), (std::vector<std::string>{"0 < k_o || 0 < k_i"}));
  EXPECT_EQ(on.used_knobs.at("WGMMA_ZERO"), "scale_d");
  const CompileState off =
      passcheck::compile_for(sm90a_with_sms(2), expr, kPersistent + ",WGMMA_ZERO=explicit");
  EXPECT_EQ(zeroing_inits(off.kernel.kernels.at(0).body), 32);  // m64n64: 32 values a thread
  for (const std::string& s : scale_ds(off.kernel.kernels.at(0).body)) EXPECT_EQ(s, "1");
}

TEST(WgmmaZero, PersistentTilesEveryPassMatches) {
  // 2 x 2 tiles on 2 SMs: each CTA runs two tiles, so a tile whose first wgmma read
  // its accumulators would add the previous tile's sums (and the first tile the alloc's
  // NaN poison).
  passcheck::check_every_pass("matmul(A[128,128]:bf16, B[128,128]:bf16)", Knobs::parse(kPersistent),
                              41, {}, {}, std::nullopt, sm90a_with_sms(2));
}

TEST(WgmmaZero, TwoConsumersTmaStoreStripsInAClusterMatch) {
  // The large-shape default's organization, small: 2 consumer warpgroups, persistent,
  // strip-buffered TMA-store epilogue, 2-CTA clusters; 3 cluster tiles on 2 clusters.
  check_final("matmul(A[384,64]:bf16, B[64,256]:bf16)",
              "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,"
              "STAGES=2,GROUP_M=2,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,"
              "EPI_BUFFERS=2,CLUSTER_M=2",
              43, sm90a_with_sms(4));
}

TEST(WgmmaZero, RegisterAAndSplitKMatch) {
  const CompileState rs = check_final("matmul(A[192,128]:bf16, B[128,64]:bf16)",
                                      kPersistent + ",WGMMA_A=regs", 47, sm90a_with_sms(2));
  EXPECT_EQ(zeroing_inits(rs.kernel.kernels.at(0).body), 0);
  // Split-K: each split's slab loop starts at 0 (the split's K offset is in the index).
  const CompileState sk = check_final(
      "matmul(A[64,512]:bf16, B[512,64]:bf16)",
      "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,SPLITK=2,"
      "SPLITK_MODE=reduce",
      53, Target::for_arch("sm_90a"));
  EXPECT_EQ(scale_ds(sk.kernel.kernels.at(0).body),
            (std::vector<std::string>{"0 < k_o || 0 < k_i"}));
}

TEST(WgmmaZero, InterpreterIgnoresTheAccumulatorsOnlyWhereScaleDIsZero) {
  // The same kernel with the first step's predicate forced to 1 reads the fresh alloc's
  // NaN poison: the interpreter must not pass it (so the tests above can fail).
  CompileState s = passcheck::compile_sm90a(
      "matmul(A[64,128]:bf16, B[128,64]:bf16)",
      "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2");
  Bindings in;
  make_random_inputs(s.loop, in, 59);
  const HostTensor want = passcheck::run_level(s, Level::Loop, in);
  passcheck::expect_close(passcheck::run_level(s, Level::Kernel, in), want, DType::BF16, "scale_d");
  walk(s.kernel.kernels.at(0).body, [](Stmt& x) {
    if (is_wgmma(x)) x.scale_d = Expr(1);
  });
  const HostTensor bad = passcheck::run_level(s, Level::Kernel, in);
  bool nan = false;
  for (double v : bad.data) nan |= std::isnan(v);
  EXPECT_TRUE(nan);
}

TEST(WgmmaZero, ScaleDMustAgreeAcrossTheWarpgroup) {
  CompileState s = passcheck::compile_sm90a(
      "matmul(A[64,128]:bf16, B[128,64]:bf16)",
      "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2");
  walk(s.kernel.kernels.at(0).body, [](Stmt& x) {
    if (is_wgmma(x)) x.scale_d = Expr(0) < Expr::var("wg_thread");
  });
  Bindings in;
  make_random_inputs(s.loop, in, 61);
  try {
    passcheck::run_level(s, Level::Kernel, in);
    ADD_FAILURE() << "a per-thread scale_d ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one scale-d predicate per warpgroup"), std::string::npos)
        << e.what();
  }
}

// mma.sync takes scale_d too (one field for "this atom's C is zero", stmt.h), but only as
// the constant 0 or 1: its zero C is a form of the instruction, not an operand. The
// verifier names the fix for anything else, and refuses scale_d off the mma atoms.
TEST(WgmmaZero, MmaSyncTakesAConstantScaleDOnly) {
  const std::string expr = "matmul(A[64,64]:bf16, B[64,64]:bf16)";
  const std::string knobs = "ATOM=mma_bf16,BM=64,BN=64,FM=2,FN=4,WM=2,WN=2,STAGE=cp_async,BK=32,STAGES=2";
  auto with = [&](const std::function<bool(Stmt&)>& set_one) {
    CompileState s = passcheck::compile_sm90a(expr, knobs);
    bool set = false;
    walk(s.kernel.kernels.at(0).body, [&](Stmt& x) { set = set || set_one(x); });
    EXPECT_TRUE(set);
    return s;
  };
  auto mma = [](const Expr& e) {
    return [e](Stmt& x) {
      if (x.kind != StmtKind::Atom || x.atom.rfind("mma_", 0) != 0) return false;
      x.scale_d = e;
      return true;
    };
  };
  EXPECT_NO_THROW(verify(with(mma(Expr(0))).kernel));
  EXPECT_NO_THROW(verify(with(mma(Expr(1))).kernel));
  auto refusal = [&](const CompileState& s) -> std::string {
    try {
      verify(s.kernel);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string pred = refusal(with(mma(Expr(0) < Expr::var("k_o"))));
  EXPECT_NE(pred.find("takes scale_d 0 or 1 only"), std::string::npos) << pred;
  EXPECT_NE(pred.find("peel the k-step with scale_d 0 into its own statement"), std::string::npos)
      << pred;
  EXPECT_NE(refusal(with(mma(Expr(2)))).find("takes scale_d 0 or 1 only"), std::string::npos);
  const std::string init = refusal(with([](Stmt& x) {
    if (x.kind != StmtKind::Init) return false;
    x.scale_d = Expr(0);
    return true;
  }));
  EXPECT_NE(init.find("only an mma.sync or wgmma atom takes scale_d"), std::string::npos) << init;
}

// The interpreter honours an mma.sync's scale_d 0: D = A·B of that k-step alone. Every
// mma of a GEMM with it keeps only the last k-step's product, so the result must differ
// from the naive one (and match it with scale_d 1).
TEST(WgmmaZero, InterpreterDropsTheMmaSyncAccumulatorAtScaleDZero) {
  CompileState s = passcheck::compile_sm90a(
      "matmul(A[32,64]:bf16, B[64,32]:bf16)",
      "ATOM=mma_bf16,BM=32,BN=32,FM=1,FN=2,WM=2,WN=2,STAGE=sync,BK=16");
  Bindings in;
  make_random_inputs(s.loop, in, 67);
  const HostTensor want = passcheck::run_level(s, Level::Loop, in);
  passcheck::expect_close(passcheck::run_level(s, Level::Kernel, in), want, DType::BF16, "scale_d 1");
  int set = 0;
  walk(s.kernel.kernels.at(0).body, [&](Stmt& x) {
    if (x.kind == StmtKind::Atom && x.atom.rfind("mma_", 0) == 0) x.scale_d = Expr(0), ++set;
  });
  ASSERT_GT(set, 0);
  const HostTensor last = passcheck::run_level(s, Level::Kernel, in);
  double diff = 0;
  for (size_t i = 0; i < last.data.size(); ++i) diff = std::max(diff, std::abs(last.data[i] - want.data[i]));
  EXPECT_GT(diff, 0.1) << "scale_d 0 on every k-step left the full sum";
}

TEST(WgmmaZero, UnknownValueIsAnError) {
  {
    const std::string e = passcheck::error_of(
        "matmul(A[64,64]:bf16, B[64,64]:bf16)",
        "ATOM=wgmma_bf16,WM=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,WGMMA_ZERO=yes");
    ASSERT_NE(e, "") << "WGMMA_ZERO=yes compiled";
    EXPECT_NE(e.find("WGMMA_ZERO=yes"), std::string::npos) << e;
  }
}

// ---- EPI_SYNC ----

const std::string kStrips =
    "ATOM=wgmma_bf16,WM=2,WN=1,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,GROUP_M=2,"
    "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store";

int named_barriers(const Block& b) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += s.named_barrier(); });
  return n;
}
std::vector<int> bulk_waits(const Block& b) {
  std::vector<int> out;
  walk(b, [&](const Stmt& s) {
    if (s.kind == StmtKind::BulkWait) out.push_back(int(s.imm));
  });
  return out;
}

TEST(EpiSync, OneBarrierPerStripWithTheWaitBeforeIt) {
  // 128 x 256 bf16 tiles: 4 strips of 64 columns per warpgroup through 2 buffers; two
  // tiles on one SM, so the second tile writes strip 0 into the buffer the first tile's
  // strip 2 was stored from.
  const std::string expr = "matmul(A[128,64]:bf16, B[64,296]:bf16)";
  const CompileState one = passcheck::check_every_pass(
      expr, Knobs::parse(kStrips + ",BN=256,EPI_BUFFERS=2"), 67, {}, {}, std::nullopt, sm90a_with_sms(1));
  const Block& b1 = one.kernel.kernels.at(0).body;
  EXPECT_EQ(named_barriers(b1), 4);
  EXPECT_EQ(bulk_waits(b1), (std::vector<int>{0, 0, 0, 0, 0}));  // per strip, and the drain
  const CompileState two = check_final(expr, kStrips + ",BN=256,EPI_BUFFERS=2,EPI_SYNC=2", 67, sm90a_with_sms(1));
  const Block& b2 = two.kernel.kernels.at(0).body;
  EXPECT_EQ(named_barriers(b2), 8);
  EXPECT_EQ(bulk_waits(b2), (std::vector<int>{1, 1, 1, 1, 0}));
}

TEST(EpiSync, FourBuffersWaitForAllButTwo) {
  // f32 output: 32-column strips, so BN=128 is 4 strips through 4 buffers.
  const CompileState s = check_final("matmul(A[160,64]:bf16, B[64,264]:bf16, out=f32)",
                                     kStrips + ",BN=128,EPI_BUFFERS=4", 71, sm90a_with_sms(2));
  const Block& b = s.kernel.kernels.at(0).body;
  EXPECT_EQ(named_barriers(b), 4);
  EXPECT_EQ(bulk_waits(b), (std::vector<int>{2, 2, 2, 2, 0}));
}

TEST(EpiSync, OddStripsAndOneBufferKeepTwoBarriers) {
  // Three strips through two buffers: the next tile's strip 0 reuses the newest store's
  // buffer, so its wait must follow that store: EPI_SYNC=1 falls back to two barriers
  // (run on the interpreter, every pass, in test_tma_store_epilogue's BN=192 test).
  const CompileState odd = passcheck::compile_for(sm90a_with_sms(2), "matmul(A[256,64]:bf16, B[64,200]:bf16)",
                                                  kStrips + ",BN=192,EPI_BUFFERS=2");
  EXPECT_EQ(named_barriers(odd.kernel.kernels.at(0).body), 6);
  const CompileState one = passcheck::compile_for(sm90a_with_sms(2), "matmul(A[256,64]:bf16, B[64,200]:bf16)",
                                                  kStrips + ",BN=128,EPI_BUFFERS=1");
  EXPECT_EQ(named_barriers(one.kernel.kernels.at(0).body), 4);  // 2 strips x 2
}

TEST(EpiSync, AWaitOneStoreShortIsARaceTheInterpreterReports) {
  // EPI_SYNC=1 waits for every store before strip j's barrier: keeping strip j-1's store
  // in flight (strip 1's wait) lets strip 2's writes hit the buffer it still reads.
  CompileState s = passcheck::compile_for(sm90a_with_sms(1), "matmul(A[128,64]:bf16, B[64,256]:bf16)",
                                          kStrips + ",BN=256,EPI_BUFFERS=2");
  int seen = 0;
  walk(s.kernel.kernels.at(0).body, [&](Stmt& x) {
    if (x.kind == StmtKind::BulkWait && seen++ == 1) x.imm = 1;
  });
  Bindings in;
  make_random_inputs(s.loop, in, 79);
  try {
    passcheck::run_level(s, Level::Kernel, in);
    ADD_FAILURE() << "the short wait ran without a race";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out_s"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
