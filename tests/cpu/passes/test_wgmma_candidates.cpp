// The wgmma family's declared default candidates (src/passes/families/wgmma_candidates.h).
// The one-row pairs: 128-row linears as 2-CTA clusters along M of 64-row CTAs that share
// the weight slab by multicast, one consumer warpgroup each, a ring as deep as 200 KB
// holds. Checked here: the knob sets it declares for the model suite's 128-row shapes
// (cuBLAS's tiles where the profile named them), the IR of its hand-off (one multicast of
// W's half per CTA, empty barriers that count one consumer warpgroup of each CTA), and the
// form on the interpreter after every pass at a small ragged size where the ring wraps.
// NVRTC compiles of the full-size sets: tests/cpu/driver/test_wgmma_candidates_compile.cpp;
// GPU cases: tests/gpu/test_hopper_gemm.cpp (OneRowPairs).
#include <gtest/gtest.h>

#include "passes/families/gemm_shape.h"
#include "passes/families/wgmma_candidates.h"
#include "pass_check.h"

namespace loom {
namespace {

Knobs pairs_for(const std::string& expr) {
  return wgmma_one_row_pairs(gemm_shape_of(parse_expression(expr)), Target::for_arch("sm_90a"));
}

TEST(OneRowPairs, WidthsFillOneWaveOfPairsAndRingsFill200KB) {
  struct Want {
    std::string expr;
    int64_t bn, stages;
  };
  // 128 CTAs (64 clusters) on 132 SMs each; cuBLAS: 96 x 64 x 10 slabs at 6144,
  // 128 x 64 x 8 at 8192 (nvjet names, our N first).
  for (const Want& w : {Want{"linear(X[128,4096]:bf16, W[4096,4096]:bf16)", 64, 12},
                        Want{"linear(X[128,4096]:bf16, W[6144,4096]:bf16)", 96, 10},
                        Want{"linear(X[128,8192]:bf16, W[8192,8192]:bf16)", 128, 8},
                        Want{"linear(X[128,8192]:bf16, W[10240,8192]:bf16)", 160, 7}}) {
    SCOPED_TRACE(w.expr);
    const Knobs k = pairs_for(w.expr);
    EXPECT_EQ(k.get_int("BN", 0), w.bn);
    EXPECT_EQ(k.get_int("STAGES", 0), w.stages);
    EXPECT_EQ(k.get_int("BM", 0), 64);
    EXPECT_EQ(k.get_int("WM", 0), 1);
    EXPECT_EQ(k.get_int("CLUSTER_M", 0), 2);
    EXPECT_LE((64 + w.bn) * 64 * 2 * w.stages, 200 * 1024);
  }
}

TEST(OneRowPairs, AppliesToTwoHalvesOfOneRowOfTilesOnly) {
  const Target t = Target::for_arch("sm_90a");
  auto applies = [&](const std::string& e) {
    return wgmma_one_row_pairs_apply(gemm_shape_of(parse_expression(e)), t);
  };
  EXPECT_TRUE(applies("linear(X[128,4096]:bf16, W[6144,4096]:bf16)"));
  EXPECT_TRUE(applies("linear(X[96,4096]:bf16, W[6144,4096]:bf16)"));
  EXPECT_FALSE(applies("linear(X[64,4096]:bf16, W[6144,4096]:bf16)")) << "one 64-row half";
  EXPECT_FALSE(applies("linear(X[256,4096]:bf16, W[6144,4096]:bf16)")) << "two rows of tiles";
  EXPECT_FALSE(applies("linear(X[128,4096]:f32, W[6144,4096]:f32)")) << "tf32";
  EXPECT_FALSE(applies("bmm(A[2,128,512]:bf16, B[2,512,512]:bf16)")) << "a batch";
}

// Statements of `kind` in the kernel, at any depth.
std::vector<const Stmt*> all_of(const KernelOp& k, StmtKind kind) {
  std::vector<const Stmt*> v;
  walk(k.body, [&](const Stmt& x) {
    if (x.kind == kind) v.push_back(&x);
  });
  return v;
}

// One cluster of two 64-row CTAs: W's slab multicast in halves (one multicast load per
// CTA), X's 64 rows loaded by each CTA for itself, every release an arrival on both CTAs'
// empty barriers, which count the one consumer warpgroup of each.
void expect_pair_ring(const KernelOp& k, int stages) {
  EXPECT_EQ(k.cluster[0], 2);
  EXPECT_EQ(k.mbarriers, 2 * stages);
  int multicast = 0, own = 0;
  for (const Stmt* s : all_of(k, StmtKind::TmaLoad)) {
    if (s->multicast.is_const() && s->multicast.const_value() == 0) {
      EXPECT_EQ(s->tensor, "X_s");
      ++own;
    } else {
      EXPECT_EQ(s->tensor, "W_s");
      ++multicast;
    }
  }
  EXPECT_EQ(multicast, 1);
  EXPECT_EQ(own, 1);
  for (const Stmt* s : all_of(k, StmtKind::MbarArrive)) {
    ASSERT_TRUE(s->multicast.is_const());
    EXPECT_EQ(s->multicast.const_value(), 3);
  }
  int empty_inits = 0;
  for (const Stmt* s : all_of(k, StmtKind::MbarInit))
    if (s->imm == 2) ++empty_inits;
  EXPECT_EQ(empty_inits, stages);
}

TEST(OneRowPairs, TheFullSizeSetsHaveThePairRing) {
  for (const char* e : {"linear(X[128,4096]:bf16, W[6144,4096]:bf16)",
                        "linear(X[128,8192]:bf16, W[8192,8192]:bf16)"}) {
    SCOPED_TRACE(e);
    Knobs k = pairs_for(e);
    k.set("ATOM", "wgmma_bf16");
    const CompileState s = passcheck::compile_sm90a(e, k.str());
    ASSERT_EQ(s.kernel.kernels.size(), 1u);
    expect_pair_ring(s.kernel.kernels[0], int(k.get_int("STAGES", 0)));
  }
}

TEST(OneRowPairs, MatchesEveryPassAtARaggedSizeWhereTheRingWraps) {
  // 100 rows: the upper CTA holds 36 (its X box clips at M; its W half still reaches the
  // lower CTA). N = 56 in tiles of 48: two pairs, the second 8 columns wide. K = 192 is
  // three slabs through two slots, so the ring and its phases wrap.
  const std::string e = "linear(X[100,192]:bf16, W[56,192]:bf16)";
  Knobs k = pairs_for("linear(X[128,4096]:bf16, W[6144,4096]:bf16)");
  k.set("ATOM", "wgmma_bf16");
  k.set("BN", "48");
  k.set("STAGES", "2");
  CompileState s = passcheck::check_every_pass(e, k, 91);
  ASSERT_EQ(s.kernel.kernels.size(), 1u);
  expect_pair_ring(s.kernel.kernels[0], 2);
}

}  // namespace
}  // namespace loom
