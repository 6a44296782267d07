// Attention's verification (bench/verify_attention.h): its fp64 rows are the reference's;
// the 16-bit pipeline's own output and the rounded reference pass; an error three times
// the pipeline's fails (both the relative Frobenius and the max rule), as do a NaN, an
// LSE of -inf where the row keeps keys and a finite LSE where it keeps none; above the
// full-check size it checks a sample of rows, in which an error is still found.
#include "bench/verify_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "frontend/parser.h"
#include "ir/interpreter.h"

namespace loom {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Sq = 9 > Sk = 6 with the bottom-right mask: rows 0..2 keep no key.
const char* const kExpr =
    "attention(Q[1,2,9,16]:bf16, K[1,1,6,16]:bf16, V[1,1,6,16]:bf16, causal=true, lse=true)";

struct Problem {
  Graph g;
  std::map<std::string, HostTensor> inputs;
  AttentionShape sh;
  AttentionResult ref;
  HostTensor out, lse;
  explicit Problem(const char* expr = kExpr, AttentionShape shape = {1, 2, 1, 9, 6, 16})
      : g(parse_expression(expr)), sh(shape) {
    uint64_t seed = 3;
    for (auto [name, h, s] : {std::tuple{"Q", sh.Hq, sh.Sq}, {"K", sh.Hkv, sh.Sk}, {"V", sh.Hkv, sh.Sk}}) {
      HostTensor t;
      t.dtype = DType::BF16;
      t.shape = {sh.B, h, s, sh.D};
      for (int64_t i = 0; i < t.numel(); ++i) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t.data.push_back(round_to_dtype(DType::BF16, double(seed >> 11) / double(1ull << 53) * 2 - 1));
      }
      inputs[name] = t;
    }
    ref = reference_attention(sh, g.attention()->attention, inputs["Q"].data, inputs["K"].data,
                              inputs["V"].data);
    out.dtype = DType::BF16;
    out.shape = {sh.B, sh.Hq, sh.Sq, sh.D};
    lse.dtype = DType::F32;
    lse.shape = {sh.B, sh.Hq, sh.Sq};
    lse.data = ref.lse;
  }
  std::vector<double> pipeline() const {
    return reference_attention_16bit(sh, g.attention()->attention, inputs.at("Q").data,
                                     inputs.at("K").data, inputs.at("V").data, DType::BF16);
  }
  AttentionVerify check(double full_check_macs = kAttentionFullCheckMacs) const {
    return verify_attention(g, inputs, out, &lse, full_check_macs);
  }
};

// The rows verify_attention computes are reference_attention's, to the last bit or so.
TEST(VerifyAttention, ItsRowsAreTheReferences) {
  Problem p;
  p.out.data = p.ref.out;
  AttentionVerify v = p.check();
  EXPECT_TRUE(v.passed()) << v.message();
  EXPECT_LT(v.out.rel_fro_error, 1e-14);
  EXPECT_EQ(v.rows_checked, 18);
}

// Past the full-check size: 3 heads x (first, middle, last 64 rows) of 200 — a wrong row
// in the sample fails, and the message says rows were sampled.
TEST(VerifyAttention, LargeProblemsCheckASample) {
  Problem p("attention(Q[1,4,200,16]:bf16, K[1,2,50,16]:bf16, V[1,2,50,16]:bf16, causal=true, lse=true)",
            {1, 4, 2, 200, 50, 16});
  p.out.data = p.pipeline();
  AttentionVerify v = p.check(0);
  EXPECT_TRUE(v.passed()) << v.message();
  EXPECT_EQ(v.rows_checked, 3 * 192);
  EXPECT_EQ(v.rows_total, 800);
  EXPECT_NE(v.message().find("rows sampled: 576 of 800"), std::string::npos) << v.message();
  // Row 199 (the last) of head 3 (the last pair) is in the sample.
  p.out.data[size_t((3 * 200 + 199) * 16 + 5)] += 0.25;
  EXPECT_FALSE(p.check(0).passed());
}

TEST(VerifyAttention, PipelineAndRoundedReferencePass) {
  Problem p;
  p.out.data = p.pipeline();
  AttentionVerify v = p.check();
  EXPECT_TRUE(v.passed()) << v.message();
  EXPECT_GT(v.pipeline_error, 0.0);
  for (double& x : p.out.data) x = 0;
  for (size_t i = 0; i < p.ref.out.size(); ++i) p.out.data[i] = round_to_dtype(DType::BF16, p.ref.out[i]);
  v = p.check();
  EXPECT_TRUE(v.passed()) << v.message();
  ASSERT_TRUE(v.lse.has_value());
  EXPECT_TRUE(v.lse->passed) << v.lse->message;
}

TEST(VerifyAttention, ThreeTimesThePipelinesErrorFails) {
  Problem p;
  const std::vector<double> lowp = p.pipeline();
  p.out.data.resize(lowp.size());
  for (size_t i = 0; i < lowp.size(); ++i) p.out.data[i] = p.ref.out[i] + 3 * (lowp[i] - p.ref.out[i]);
  EXPECT_FALSE(p.check().passed());
  // One element off by three times the pipeline's largest error: the norm may absorb it,
  // the max rule does not.
  p.out.data = lowp;
  const AttentionVerify ok = p.check();
  size_t worst = 0;
  for (size_t i = 0; i < lowp.size(); ++i)
    if (std::fabs(lowp[i] - p.ref.out[i]) > std::fabs(lowp[worst] - p.ref.out[worst])) worst = i;
  p.out.data[worst] = p.ref.out[worst] + 3 * (lowp[worst] - p.ref.out[worst]);
  const AttentionVerify bad = p.check();
  EXPECT_FALSE(bad.passed()) << bad.message() << " (pipeline max " << ok.pipeline_max_error << ")";
  p.out.data = lowp;
  p.out.data[5] = std::nan("");
  EXPECT_FALSE(p.check().passed());
}

TEST(VerifyAttention, LseInfinitiesMustMatch) {
  Problem p;
  p.out.data = p.pipeline();
  ASSERT_TRUE(std::isinf(p.lse.data[0]));   // row 0 of head 0 keeps no key
  ASSERT_FALSE(std::isinf(p.lse.data[8]));  // the last row keeps all 6
  p.lse.data[0] = 0.0;
  AttentionVerify v = p.check();
  EXPECT_FALSE(v.passed());
  EXPECT_NE(v.lse->message.find("lse[0]"), std::string::npos) << v.lse->message;
  p.lse.data[0] = -kInf;
  p.lse.data[8] = -kInf;
  EXPECT_FALSE(p.check().passed());
  p.lse.data[8] = p.ref.lse[8] + 1e-3;
  EXPECT_FALSE(p.check().passed());
  p.lse.data[8] = p.ref.lse[8];
  EXPECT_TRUE(p.check().passed());
}

}  // namespace
}  // namespace loom
