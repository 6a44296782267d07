// GPU correctness of varlen attention (docs/attention.md, "Serving forms: varlen"): every
// case of attention_varlen_cases.h through run_expression — cumulative lengths from
// fill_serving_inputs, O and LSE poisoned with NaN, each sequence's rows checked against the
// fp64 reference on that sequence with the threshold of verification.md's "Attention".
// Skips with the reason on a GPU-less machine.
#include <gtest/gtest.h>

#include "attention_varlen_cases.h"
#include "compile_first.h"
#include "driver/run.h"

namespace loom {
namespace {

using attention_test::Case;

class GpuAttentionVarlen : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuAttentionVarlen, MatchesFp64Reference) {
  const Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 13;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_NE(r.program.cuda.find("__ldg(&loom_t_CQ["), std::string::npos);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_EQ(r.lse_verify.has_value(), c.expr.find("lse=true") != std::string::npos);
  if (r.lse_verify) {
    EXPECT_TRUE(r.lse_verify->passed) << r.lse_verify->message;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuAttentionVarlen,
                         ::testing::ValuesIn(attention_test::varlen_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return "case" + std::to_string(info.index);
                         });

}  // namespace
}  // namespace loom
