// Symbolic M, N and K on the Hopper path (ATOM=wgmma_*, TMA slabs): one program, compiled
// once, run on the interpreter at several bound sizes after every pass and compared with
// the naive Loop IR. The persistent walk of t:027 takes a run-time tile count: its grid
// is min(T, SMs), an expression of the sizes that the launch evaluates, and its trip
// count reads T in the kernel. Sizes on both sides of the SM count (fewer tiles than
// SMs, several tiles per CTA), ragged edges the tensor maps clip, 2-CTA clusters, the
// TMA-store epilogue and a fused bias; and the errors of knobs that cannot take them.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::sm90a_with_sms;

// Small tiles keep the interpreter fast: 64 x 64 per consumer warpgroup, BK = one span.
const std::string kPersistent =
    "ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,GROUP_M=2,"
    "WARP_SPECIALIZE=1,PERSISTENT=1";

CompileState compile_only(const std::string& expr, const std::string& knobs, const Target& t) {
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse(knobs);
  s.target = t;
  for (const auto& p : pipeline()) p.run(s);
  return s;
}

TEST(WgmmaSymbolic, PersistentGridIsSizedAtLaunchFromM) {
  // 128 x 64 tiles over N = 128: T = 2 * ceil(M / 128) tiles on a 4-SM target. M = 1: one
  // ragged tile row (2 tiles, 2 CTAs); M = 300: 6 tiles on 4 CTAs (two walk twice), a
  // ragged last row of 44.
  const std::string expr = "matmul(A[M,64]:bf16, B[64,128]:bf16)";
  for (int64_t m : {1, 300}) {
    SCOPED_TRACE("M = " + std::to_string(m));
    passcheck::check_every_pass(expr, Knobs::parse(kPersistent), 11 + m, {{"M", m}}, {},
                                std::nullopt, sm90a_with_sms(4));
  }
  CompileState s = compile_only(expr, kPersistent, sm90a_with_sms(4));
  const KernelOp& k = s.kernel.kernels.at(0);
  ASSERT_FALSE(k.grid[0].is_const()) << k.grid[0].str();
  for (auto [m, ctas] : {std::pair<int64_t, int64_t>{1, 2}, {300, 4}, {4097, 4}}) {
    Expr::Env env{{"M", m}};
    EXPECT_EQ(k.grid[0].eval(env), ctas) << "M = " << m << ": grid " << k.grid[0].str();
  }
  EXPECT_EQ(k.grid[1].const_value(), 1);
}

TEST(WgmmaSymbolic, LargeScheduleWithClustersAndTmaStore) {
  // The large class's organization (persistent, warp-specialized, 2-CTA clusters along M
  // sharing B by multicast, the strip-buffered TMA store) over a run-time M = 300: two
  // cluster tiles per cluster (2 x 2 on 2 clusters), the last pair's first CTA ragged (44
  // rows) and its second wholly past M (the tensor maps clip the loads and the stores).
  const std::string knobs = kPersistent + ",CLUSTER_M=2,EPILOGUE=tma_store,EPI_BUFFERS=2";
  passcheck::check_every_pass("matmul(A[M,64]:bf16, B[64,128]:bf16)", Knobs::parse(knobs), 23,
                              {{"M", 300}}, {}, std::nullopt, sm90a_with_sms(4));
}

TEST(WgmmaSymbolic, LinearWithBiasAndSymbolicMNK) {
  // linear's [N, K] weight (K-major B), a fused bias and gelu; every size symbolic.
  const std::string expr = "gelu(linear(X[M,K]:bf16, W[N,K]:bf16, bias[N]:bf16))";
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{7, 64, 64}, {70, 72, 128}}) {
    SCOPED_TRACE("M, N, K = " + std::to_string(m) + ", " + std::to_string(n) + ", " +
                 std::to_string(k));
    passcheck::check_every_pass(expr, Knobs::parse(kPersistent), 31 + m,
                                {{"M", m}, {"N", n}, {"K", k}}, {}, std::nullopt,
                                sm90a_with_sms(4));
  }
}

TEST(WgmmaSymbolic, NonPersistentF16SymbolicK) {
  // One CTA per tile, K at run time: the k loop's trip count and the last slab's zero fill
  // come from K (K = 40: less than one slab; 200: a ragged fourth slab).
  for (int64_t k : {40, 200}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    passcheck::check_every_pass("matmul(A[M,K]:f16, B[K,64]:f16)",
                                Knobs::parse("ATOM=wgmma_f16,WM=1,WN=1,BN=64,STAGE=tma,"
                                             "SWIZZLE=128B,BK=64,STAGES=2"),
                                41 + k, {{"M", 50}, {"K", k}});
  }
}

// The small-M kernels of a run-time M (defaults.cpp, runtime_size_ranges): the swapped
// decode tile, M on wgmma's N (BN = 16: M = 1, 7, 16 in one column tile; BN = 32 in two
// halves: M = 40, two column tiles, the second ragged), and one row of 128-row tiles
// (M = 1, 100: the tensor maps clip the rows past M).
TEST(WgmmaSymbolic, SwappedDecodeTileOverRunTimeM) {
  const std::string expr = "matmul(A[M,128]:bf16, B[128,192]:bf16)";
  const std::string swapped =
      "SWAP_AB=1,ATOM=wgmma_bf16,WM=1,WN=1,FM=1,FN=1,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
      "EPILOGUE=direct,WARP_SPECIALIZE=1,BN=";
  for (auto [m, bn] : {std::pair<int64_t, int>{1, 16}, {7, 16}, {16, 16}, {40, 32}}) {
    SCOPED_TRACE("M = " + std::to_string(m) + ", BN = " + std::to_string(bn));
    passcheck::check_every_pass(expr, Knobs::parse(swapped + std::to_string(bn)), 51 + m,
                                {{"M", m}});
  }
}

TEST(WgmmaSymbolic, SwappedDecodeWithResidualOverRunTimeM) {
  // The swapped tile writes out[n, m] through its transpose: a residual R[M, N] (and an
  // f32 output) read at the same transposed cell, bounded by the run-time M.
  passcheck::check_every_pass(
      "add(matmul(A[M,128]:bf16, B[128,128]:bf16, out=f32), R[M,128]:f32)",
      Knobs::parse("ATOM=wgmma_bf16,SWAP_AB=1,WM=1,WN=1,FM=1,FN=1,BN=16,STAGE=tma,"
                   "SWIZZLE=128B,BK=64,STAGES=4,EPILOGUE=direct,WARP_SPECIALIZE=1"),
      58, {{"M", 7}});
}

TEST(WgmmaSymbolic, SwappedDecodeWithClusterKOverRunTimeM) {
  // H200's decode default splits K between the 2 CTAs of a cluster (CLUSTER_K=2, their
  // partial tiles added through distributed shared memory): the same over a run-time M.
  passcheck::check_every_pass(
      "matmul(A[M,512]:bf16, B[512,128]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,SWAP_AB=1,WM=1,WN=1,BN=16,STAGE=tma,SWIZZLE=128B,BK=64,"
                   "STAGES=2,WARP_SPECIALIZE=1,CLUSTER_K=2"),
      57, {{"M", 7}});
}

TEST(WgmmaSymbolic, OneRowTileOverRunTimeM) {
  const std::string knobs =
      "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
      "WARP_SPECIALIZE=1,EPILOGUE=direct,CONSUMER_REGS=0";
  for (int64_t m : {1, 100}) {
    SCOPED_TRACE("M = " + std::to_string(m));
    passcheck::check_every_pass("matmul(A[M,128]:bf16, B[128,96]:bf16)", Knobs::parse(knobs),
                                61 + m, {{"M", m}});
  }
}

TEST(WgmmaSymbolic, SplitKOverRunTimeK) {
  // Split-K with a run-time K: S chunks of ceil(K / S) rounded up to whole slabs, trailing
  // chunks empty when K is short (K = 72: one slab and a ragged one, the second split
  // empty; 200: four slabs over two splits), the reduce kernel summing the partials.
  const std::string knobs =
      "ATOM=wgmma_bf16,WM=1,WN=1,FM=1,FN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
      "SPLITK=2,SPLITK_MODE=reduce";
  for (int64_t k : {72, 200}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    passcheck::check_every_pass("matmul(A[64,K]:bf16, B[K,64]:bf16)", Knobs::parse(knobs), 71 + k,
                                {{"K", k}});
  }
}

TEST(WgmmaSymbolic, PersistentOverSymbolicBatchIsRefusedWithTheFix) {
  // The walk folds the batch into its work units with constant divisors.
  try {
    compile_only("bmm(A[Z,M,64]:bf16, B[Z,64,64]:bf16)", kPersistent, sm90a_with_sms(4));
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("constant batch count"), std::string::npos) << msg;
    EXPECT_NE(msg.find("PERSISTENT=0"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace loom
