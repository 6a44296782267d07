// The reliability cases of tests/gpu/family_cases.h (one kernel per family, at odd shapes)
// on the CPU: each compiles for sm_90a to the family it names (the knob values that make
// it so are recorded by the passes) and NVRTC accepts it without spills. Without this a
// moved default or a refused knob would turn a family's sanitizer and NaN/Inf checks into
// checks of some other kernel, or into failures seen only on the GPU.
#include <gtest/gtest.h>

#include "../../gpu/family_cases.h"
#include "driver/compile.h"
#include "nvrtc_check.h"

namespace loom {
namespace {

using family_test::Case;

class FamilyCase : public ::testing::TestWithParam<Case> {};

TEST_P(FamilyCase, BuildsItsFamilyAndCompilesForSm90aWithoutSpills) {
  const Case& c = GetParam();
  CompileOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.target = Target::for_arch("sm_90a");
  const CompiledProgram p = compile_expression(c.expr, opt);
  for (const auto& [knob, value] : c.must_use) {
    ASSERT_TRUE(p.state.used_knobs.count(knob)) << c.family << " does not read " << knob;
    EXPECT_EQ(p.state.used_knobs.at(knob), value) << c.family << ": " << knob;
  }
  const CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a");
  ASSERT_GT(r.cubin.size(), 0u) << r.log;
  if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache skipped ptxas' report (set CUDA_CACHE_DISABLE=1)";
  nvrtc_check::expect_no_spills(p, r);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyCase, ::testing::ValuesIn(family_test::cases()),
                         [](const auto& info) { return info.param.family; });

}  // namespace
}  // namespace loom
