// GPU correctness of attention's mma.sync kernel (t:012 + k:012, docs/attention.md): every
// case of attention_cases.h runs through run_expression — seeded inputs, O and LSE
// poisoned with NaN, O and LSE checked against the fp64 reference, O within twice the
// error of the 16-bit pipeline (P rounded to the input dtype, O stored in it) on the same
// inputs, both as relative Frobenius and as max error, LSE's -inf exactly where a row
// keeps no key (bench/verify_attention.h). Skips with the reason on a GPU-less machine.
#include <gtest/gtest.h>

#include "attention_cases.h"
#include "compile_first.h"
#include "driver/run.h"

namespace loom {
namespace {

using attention_test::Case;

class GpuAttention : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    compile_then_require_gpu(GetParam().expr, attention_test::mma_sync(GetParam().knobs));
  }
};

TEST_P(GpuAttention, MatchesFp64Reference) {
  const Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(attention_test::mma_sync(c.knobs));
  opt.seed = 7;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_NE(r.program.cuda.find("loom::mma_m16n8k16_f32_"), std::string::npos);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_EQ(r.lse_verify.has_value(), c.expr.find("lse=true") != std::string::npos);
  if (r.lse_verify) {
    EXPECT_TRUE(r.lse_verify->passed) << r.lse_verify->message;
  }
}

// One tensor as Q, K and V: one buffer bound to all three operands, on both kernels.
TEST(GpuAttentionOneTensor, MatchesFp64Reference) {
  const std::string e = "attention(q[2,4,300,64]:bf16, q[2,4,300,64]:bf16, q[2,4,300,64]:bf16, "
                        "causal=true, lse=true)";
  for (const std::string& knobs : {attention_test::mma_sync(""), std::string()}) {
    compile_then_require_gpu(e, knobs);
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFailure()) return;
    RunOptions opt;
    opt.knobs = Knobs::parse(knobs);
    opt.seed = 7;
    RunReport r = run_expression(e, opt);
    EXPECT_TRUE(r.verify.passed) << knobs << ": " << r.verify.message;
    ASSERT_TRUE(r.lse_verify.has_value());
    EXPECT_TRUE(r.lse_verify->passed) << knobs << ": " << r.lse_verify->message;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuAttention, ::testing::ValuesIn(attention_test::cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return attention_test::name(info.param, info.index);
                         });

}  // namespace
}  // namespace loom
