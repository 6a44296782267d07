// GPU correctness of attention's wgmma kernel (ATTN_MMA=wgmma, k:013, docs/attention.md):
// every case of attention_wgmma_cases.h (Cases: the matrix at D = 64..256 in steps of 64;
// HeadDims: the multiples of 8 between, as column spans; PingPong: ATTN_PINGPONG=1;
// Overlap: ATTN_OVERLAP=1's tiles; Persistent: the walk) through
// run_expression, checked as
// test_attention.cpp checks the mma.sync kernel (O and LSE against the fp64 reference,
// O within twice the error of the 16-bit pipeline, LSE's -inf where a row keeps no key).
// Skips with the reason on a GPU-less machine.
#include <gtest/gtest.h>

#include "attention_wgmma_cases.h"
#include "compile_first.h"
#include "driver/run.h"

namespace loom {
namespace {

using attention_test::Case;

class GpuAttentionWgmma : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuAttentionWgmma, MatchesFp64Reference) {
  const Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 7;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_NE(r.program.cuda.find("loom::wgmma_m64n"), std::string::npos);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_EQ(r.lse_verify.has_value(), c.expr.find("lse=true") != std::string::npos);
  if (r.lse_verify) {
    EXPECT_TRUE(r.lse_verify->passed) << r.lse_verify->message;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuAttentionWgmma,
                         ::testing::ValuesIn(attention_test::wgmma_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return attention_test::name(info.param, info.index);
                         });

INSTANTIATE_TEST_SUITE_P(HeadDims, GpuAttentionWgmma,
                         ::testing::ValuesIn(attention_test::wgmma_head_dim_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return attention_test::name(info.param, info.index);
                         });

INSTANTIATE_TEST_SUITE_P(PingPong, GpuAttentionWgmma,
                         ::testing::ValuesIn(attention_test::wgmma_pingpong_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return attention_test::name(info.param, info.index);
                         });

INSTANTIATE_TEST_SUITE_P(Overlap, GpuAttentionWgmma,
                         ::testing::ValuesIn(attention_test::wgmma_overlap_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return attention_test::name(info.param, info.index);
                         });

INSTANTIATE_TEST_SUITE_P(PeelMask, GpuAttentionWgmma,
                         ::testing::ValuesIn(attention_test::wgmma_peel_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return attention_test::name(info.param, info.index);
                         });

INSTANTIATE_TEST_SUITE_P(OverlapWalk, GpuAttentionWgmma,
                         ::testing::ValuesIn(attention_test::wgmma_overlap_walk_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return attention_test::name(info.param, info.index);
                         });

INSTANTIATE_TEST_SUITE_P(Persistent, GpuAttentionWgmma,
                         ::testing::ValuesIn(attention_test::wgmma_persistent_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return attention_test::name(info.param, info.index);
                         });

}  // namespace
}  // namespace loom
