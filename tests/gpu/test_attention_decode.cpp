// GPU correctness of decode attention (SPLIT_KV's split kernel and combine, GQA_PACK's
// packed rows; docs/attention.md, "Decode"): every case of attention_decode_cases.h through
// run_expression — seeded inputs, O and LSE poisoned with NaN, checked against the fp64
// reference with the threshold of verification.md's "Attention", LSE's -inf exactly where
// a row keeps no key. Skips with the reason on a GPU-less machine.
#include <gtest/gtest.h>

#include "attention_decode_cases.h"
#include "compile_first.h"
#include "driver/run.h"

namespace loom {
namespace {

using attention_test::Case;

class GpuAttentionDecode : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuAttentionDecode, MatchesFp64Reference) {
  const Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 11;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_NE(r.program.cuda.find("loom::mma_m16n8k16_f32_"), std::string::npos);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_EQ(r.lse_verify.has_value(), c.expr.find("lse=true") != std::string::npos);
  if (r.lse_verify) {
    EXPECT_TRUE(r.lse_verify->passed) << r.lse_verify->message;
  }
}

// Repeated launches: the bench times many launches back to back, then re-verifies a
// clean launch (run.cpp). COMBINE=last_cta's arrival counters are zeroed once when
// allocated and reset by each row set's last CTA: a counter left non-zero would make a
// later launch combine early (or never), which the re-verification catches.
TEST_P(GpuAttentionDecode, RepeatedLaunchesStayCorrect) {
  const Case& c = GetParam();
  // COMBINE=last_cta by name, or the defaults (which pick it for long splits).
  if (c.knobs.find("COMBINE=last_cta") == std::string::npos && !c.knobs.empty())
    GTEST_SKIP() << "only COMBINE=last_cta keeps state between launches";
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 37;
  opt.bench = true;
  opt.timing.warmup = 3;
  opt.timing.reps = 20;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  if (r.lse_verify) {
    EXPECT_TRUE(r.lse_verify->passed) << r.lse_verify->message;
  }
  const auto& used = r.program.state.used_knobs;
  if (used.count("COMBINE") && used.at("COMBINE") == "last_cta") {
    EXPECT_EQ(r.program.state.kernel.kernels.size(), 1u) << "last_cta is one kernel";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuAttentionDecode,
                         ::testing::ValuesIn(attention_test::decode_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return attention_test::name(info.param, info.index);
                         });

}  // namespace
}  // namespace loom
