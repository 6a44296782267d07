// GPU correctness of wgmma on slabs the block's threads fill (STAGE=cp_async, ragged
// rows and tf32 transposed while written): tests/gpu/wgmma_cp_async_cases.h. Each case
// runs through run_expression: seeded inputs, output poisoned with NaN, fp64 reference,
// relative error under the dtype's threshold (tf32's for tf32 operands). Skips with the
// reason on a GPU-less machine (every case still compiles for sm_90a first).
#include <gtest/gtest.h>

#include "compile_first.h"
#include "driver/run.h"
#include "wgmma_cp_async_cases.h"

namespace loom {
namespace {

class GpuHopperCpAsync : public ::testing::TestWithParam<wgmma_cp_async_test::Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuHopperCpAsync, MatchesFp64Reference) {
  const wgmma_cp_async_test::Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 31;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.program.cuda.find("wgmma"), std::string::npos);
  EXPECT_EQ(r.program.cuda.find("tma_load"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(CpAsync, GpuHopperCpAsync,
                         ::testing::ValuesIn(wgmma_cp_async_test::cases()));

}  // namespace
}  // namespace loom
