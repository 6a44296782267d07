// The attention reference against a naive formula (the whole masked score matrix, then
// exp / Σ exp with no max subtraction: independent of the reference's row loop), a case
// worked by hand, the two causal alignments, GQA/MQA, and rows that keep no key.
#include "bench/reference_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "bench/reference.h"
#include "frontend/parser.h"
#include "ir/error.h"

namespace loom {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> out(n);
  for (double& x : out) x = u(rng);
  return out;
}

// The masks as their definitions read: bottom-right, a key no further from the last key
// than the row is from the last row; top-left, a key no later than the row.
bool naive_keeps(Causal c, int64_t i, int64_t j, int64_t Sq, int64_t Sk) {
  if (c == Causal::TopLeft) return j - i <= 0;
  if (c == Causal::BottomRight) return Sq - 1 - i <= Sk - 1 - j;
  return true;
}

AttentionResult naive(const AttentionShape& sh, const AttentionAttrs& at,
                      const std::vector<double>& q, const std::vector<double>& k,
                      const std::vector<double>& v) {
  AttentionResult r;
  r.out.assign(size_t(sh.B * sh.Hq * sh.Sq * sh.D), 0.0);
  r.lse.assign(size_t(sh.B * sh.Hq * sh.Sq), 0.0);
  for (int64_t b = 0; b < sh.B; ++b)
    for (int64_t h = 0; h < sh.Hq; ++h) {
      int64_t hk = h * sh.Hkv / sh.Hq;
      for (int64_t i = 0; i < sh.Sq; ++i) {
        std::vector<double> e(size_t(sh.Sk), 0.0);
        double sum = 0;
        for (int64_t j = 0; j < sh.Sk; ++j) {
          double s = 0;
          for (int64_t d = 0; d < sh.D; ++d)
            s += q[size_t(((b * sh.Hq + h) * sh.Sq + i) * sh.D + d)] *
                 k[size_t(((b * sh.Hkv + hk) * sh.Sk + j) * sh.D + d)];
          e[size_t(j)] = naive_keeps(at.causal, i, j, sh.Sq, sh.Sk) ? std::exp(at.scale * s) : 0;
          sum += e[size_t(j)];
        }
        size_t row = size_t((b * sh.Hq + h) * sh.Sq + i);
        r.lse[row] = std::log(sum);  // log(0) = -inf for a row with no key
        for (int64_t d = 0; d < sh.D; ++d) {
          double o = 0;
          for (int64_t j = 0; j < sh.Sk; ++j)
            o += e[size_t(j)] * v[size_t(((b * sh.Hkv + hk) * sh.Sk + j) * sh.D + d)];
          r.out[row * size_t(sh.D) + size_t(d)] = sum > 0 ? o / sum : 0.0;
        }
      }
    }
  return r;
}

void expect_matches_naive(const AttentionShape& sh, Causal causal, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "B" << sh.B << " Hq" << sh.Hq << " Hkv" << sh.Hkv
                                    << " Sq" << sh.Sq << " Sk" << sh.Sk << " D" << sh.D
                                    << " causal=" << causal_name(causal));
  AttentionAttrs at;
  at.causal = causal;
  at.scale = 1.0 / std::sqrt(double(sh.D));
  auto q = random_values(size_t(sh.B * sh.Hq * sh.Sq * sh.D), seed);
  auto k = random_values(size_t(sh.B * sh.Hkv * sh.Sk * sh.D), seed + 1);
  auto v = random_values(size_t(sh.B * sh.Hkv * sh.Sk * sh.D), seed + 2);
  AttentionResult got = reference_attention(sh, at, q, k, v);
  AttentionResult want = naive(sh, at, q, k, v);
  ASSERT_EQ(got.out.size(), want.out.size());
  for (size_t i = 0; i < got.out.size(); ++i) ASSERT_NEAR(got.out[i], want.out[i], 1e-12) << i;
  for (size_t i = 0; i < got.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      ASSERT_EQ(got.lse[i], -kInf) << i;
      continue;
    }
    ASSERT_NEAR(got.lse[i], want.lse[i], 1e-12) << i;
  }
}

TEST(ReferenceAttention, ByHand) {
  // s = [0, log 3]: p = [1/4, 3/4], O = 1/4 * 1 + 3/4 * 5 = 4, LSE = log 4.
  AttentionAttrs at;
  at.scale = 1.0;
  AttentionResult r =
      reference_attention({1, 1, 1, 1, 2, 1}, at, {1.0}, {0.0, std::log(3.0)}, {1.0, 5.0});
  EXPECT_NEAR(r.out[0], 4.0, 1e-12);
  EXPECT_NEAR(r.lse[0], std::log(4.0), 1e-12);
  // Causal, bottom-right, Sq = Sk = 2: row 0 keeps key 0 only.
  at.causal = Causal::BottomRight;
  r = reference_attention({1, 1, 1, 2, 2, 1}, at, {1.0, 1.0}, {0.0, std::log(3.0)}, {1.0, 5.0});
  EXPECT_NEAR(r.out[0], 1.0, 1e-12);
  EXPECT_NEAR(r.out[1], 4.0, 1e-12);
  EXPECT_NEAR(r.lse[0], 0.0, 1e-12);
}

TEST(ReferenceAttention, Masks) {
  EXPECT_TRUE(attention_keeps(Causal::BottomRight, 0, 2, 3, 5));
  EXPECT_FALSE(attention_keeps(Causal::BottomRight, 0, 3, 3, 5));
  EXPECT_FALSE(attention_keeps(Causal::TopLeft, 0, 1, 3, 5));
  EXPECT_FALSE(attention_keeps(Causal::BottomRight, 1, 0, 5, 3));  // no key for rows 0, 1
  EXPECT_TRUE(attention_keeps(Causal::BottomRight, 2, 0, 5, 3));
  EXPECT_TRUE(attention_keeps(Causal::None, 0, 4, 3, 5));
  for (Causal c : {Causal::None, Causal::BottomRight, Causal::TopLeft})
    for (int64_t sq : {1, 3, 7})
      for (int64_t sk : {1, 4, 7}) expect_matches_naive({1, 2, 2, sq, sk, 3}, c, 7);
}

TEST(ReferenceAttention, EmptyRowsAreZeroWithMinusInfLse) {
  AttentionAttrs at;
  at.causal = Causal::BottomRight;
  at.scale = 0.5;
  auto q = random_values(5 * 4, 1), kv = random_values(3 * 4, 2);
  AttentionResult r = reference_attention({1, 1, 1, 5, 3, 4}, at, q, kv, kv);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.lse[size_t(i)], -kInf);
    for (int d = 0; d < 4; ++d) EXPECT_EQ(r.out[size_t(i * 4 + d)], 0.0);
  }
  EXPECT_TRUE(std::isfinite(r.lse[2]));
  // Top-left with Sq > Sk keeps key 0 in every row.
  at.causal = Causal::TopLeft;
  r = reference_attention({1, 1, 1, 5, 3, 4}, at, q, kv, kv);
  for (double x : r.lse) EXPECT_TRUE(std::isfinite(x));
}

TEST(ReferenceAttention, NanAndInfPropagateAsIeeeAndPyTorchHaveIt) {
  // A NaN in q makes every score of its row NaN: the row is NaN, not the empty row's 0
  // (std::max(-inf, NaN) is -inf, which once made it look empty). A +inf score makes
  // exp(inf - inf) = NaN; a +inf in V reaches O as +inf where its weight is positive.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  AttentionAttrs at;
  at.scale = 1.0;
  AttentionResult r = reference_attention({1, 1, 1, 2, 2, 1}, at, {nan, 1.0}, {0.5, 0.25}, {1.0, 5.0});
  EXPECT_TRUE(std::isnan(r.out[0]));
  EXPECT_TRUE(std::isnan(r.lse[0]));
  EXPECT_TRUE(std::isfinite(r.out[1]));
  r = reference_attention({1, 1, 1, 1, 2, 1}, at, {1.0}, {kInf, 0.0}, {1.0, 5.0});
  EXPECT_TRUE(std::isnan(r.out[0]));
  r = reference_attention({1, 1, 1, 1, 2, 1}, at, {1.0}, {0.0, 0.0}, {kInf, 5.0});
  EXPECT_EQ(r.out[0], kInf);
}

TEST(ReferenceAttention, GqaAndMqa) {
  expect_matches_naive({2, 4, 2, 5, 6, 8}, Causal::None, 11);
  expect_matches_naive({1, 4, 1, 6, 5, 8}, Causal::BottomRight, 12);
  expect_matches_naive({1, 6, 3, 4, 4, 2}, Causal::TopLeft, 13);
  // Heads sharing a K/V head differ only through Q; a head reading the wrong K/V would
  // fail the naive comparison above, and here the two groups must differ.
  AttentionAttrs at;
  at.scale = 1.0;
  std::vector<double> q(4 * 2, 1.0), k = random_values(2 * 3 * 2, 5), v = random_values(2 * 3 * 2, 6);
  AttentionResult r = reference_attention({1, 4, 2, 1, 3, 2}, at, q, k, v);
  EXPECT_EQ(r.out[0], r.out[2]);  // heads 0 and 1 read K/V head 0 with equal Q rows
  EXPECT_NE(r.out[0], r.out[4]);  // head 2 reads K/V head 1
}

TEST(ReferenceAttention, ThroughTheGraphEvaluator) {
  Graph g = parse_expression("attention(Q[1,4,3,8]:bf16, K[1,2,5,8]:bf16, V[1,2,5,8]:bf16, "
                             "causal=true, scale=0.3)");
  std::map<std::string, HostTensor> in;
  auto make = [&](const char* name, std::vector<int64_t> shape, uint64_t seed) {
    HostTensor t;
    t.dtype = DType::BF16;
    t.shape = shape;
    t.data = random_values(size_t(t.numel()), seed);
    in[name] = t;
  };
  make("Q", {1, 4, 3, 8}, 1);
  make("K", {1, 2, 5, 8}, 2);
  make("V", {1, 2, 5, 8}, 3);
  HostTensor got = reference_eval(g, in, false);
  AttentionAttrs at;
  at.causal = Causal::BottomRight;
  at.scale = 0.3;
  AttentionResult want =
      reference_attention({1, 4, 2, 3, 5, 8}, at, in["Q"].data, in["K"].data, in["V"].data);
  EXPECT_EQ(got.shape, (std::vector<int64_t>{1, 4, 3, 8}));
  EXPECT_EQ(got.data, want.out);
}

TEST(ReferenceAttention, RejectsBadSizes) {
  AttentionAttrs at;
  at.scale = 1;
  EXPECT_THROW(reference_attention({1, 3, 2, 1, 1, 1}, at, {1, 1, 1}, {1, 1}, {1, 1}), Error);
  EXPECT_THROW(reference_attention({1, 1, 1, 2, 1, 1}, at, {1}, {1}, {1}), Error);
}

}  // namespace
}  // namespace loom
