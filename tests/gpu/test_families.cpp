// One kernel of every family at odd shapes (tests/gpu/family_cases.h), verified against
// the fp64 reference. scripts/sanitize.sh runs this binary under compute-sanitizer's
// memcheck, racecheck, synccheck and initcheck, so each family's kernel is checked for
// out-of-bounds and misaligned accesses, shared-memory races, illegal barrier use and
// reads of uninitialized device memory at shapes whose edges every tile hangs over.
#include <gtest/gtest.h>

#include "compile_first.h"
#include "driver/run.h"
#include "family_cases.h"

namespace loom {
namespace {

using family_test::Case;

class GpuFamily : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuFamily, MatchesFp64Reference) {
  const Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 11;
  RunReport r = run_expression(c.expr, opt);
  for (const auto& [knob, value] : c.must_use)
    EXPECT_EQ(r.program.state.used_knobs[knob], value) << c.family << ": " << knob;
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
}

INSTANTIATE_TEST_SUITE_P(Families, GpuFamily, ::testing::ValuesIn(family_test::cases()),
                         [](const auto& info) { return info.param.family; });

}  // namespace
}  // namespace loom
