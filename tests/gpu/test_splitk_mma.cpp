// GPU correctness of split-K on tensor-core tiles: mma.sync and wgmma tiles
// with the reduce, atomic and fixup combines (splitk_mma_cases.h), through run_expression
// (NaN-poisoned output, fp64 reference). The fixup cases also run as a timed benchmark
// against cuBLAS: dozens of launches with no reset between them, then a checked launch,
// which is wrong if a launch leaves a tile counter or a workspace element nonzero. Skips
// with the reason on a GPU-less machine (every case still compiles for sm_90a first).
#include <gtest/gtest.h>

#include "compile_first.h"
#include "driver/run.h"
#include "runtime/device.h"
#include "splitk_mma_cases.h"

namespace loom {
namespace {

using splitk_mma::Case;

class GpuSplitKMma : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuSplitKMma, MatchesFp64Reference) {
  const Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 31;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.program.cuda.find(c.wgmma ? "wgmma" : "mma_m16n8k16"), std::string::npos);
}

// Repeated launches: the bench times many launches back to back, then re-verifies a
// clean launch (run.cpp); the counters and the workspace must have reset themselves.
TEST_P(GpuSplitKMma, RepeatedLaunchesStayCorrect) {
  const Case& c = GetParam();
  if (c.knobs.find("SPLITK_MODE=fixup") == std::string::npos && !c.knobs.empty())
    GTEST_SKIP() << "only the fixup combine keeps state between launches";
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 37;
  opt.bench = true;
  opt.timing.warmup = 3;
  opt.timing.reps = 20;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  // Counters and workspace are reused launch after launch: fixup's are reset by the CTA
  // that finishes each tile, in its one kernel.
  if (c.knobs.find("SPLITK_MODE=fixup") != std::string::npos) {
    EXPECT_EQ(r.program.state.kernel.kernels.size(), 1u) << "fixup is one kernel";
  }
}

INSTANTIATE_TEST_SUITE_P(SplitK, GpuSplitKMma, ::testing::ValuesIn(splitk_mma::cases()));

}  // namespace
}  // namespace loom
