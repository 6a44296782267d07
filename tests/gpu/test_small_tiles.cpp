// GPU correctness of the small-tile organization of the Hopper GEMM's skinny and decode shapes
// (small_tile_cases.h): 64 x 32 wgmma tiles, 2-D clusters with A multicast along N and B
// along M, deep rings, split-K summed by the last CTA of a tile in the same launch
// (SPLITK_MODE=partials), swapped decode with CLUSTER_N. Through run_expression
// (NaN-poisoned output, fp64 reference), once plainly and once after a timed run of
// back-to-back launches (the tile counters must reset themselves). Skips with the reason
// on a GPU-less machine (every case still compiles for sm_90a first).
#include <gtest/gtest.h>

#include "compile_first.h"
#include "driver/run.h"
#include "runtime/device.h"
#include "small_tile_cases.h"

namespace loom {
namespace {

using small_tile::Case;

class GpuSmallTiles : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuSmallTiles, MatchesFp64Reference) {
  const Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 47;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  if (c.knobs.find("CLUSTER_") != std::string::npos) {
    EXPECT_NE(r.program.cuda.find("tma_load_2d_multicast"), std::string::npos);
  }
}

TEST_P(GpuSmallTiles, RepeatedLaunchesStayCorrect) {
  const Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 53;
  opt.bench = true;
  opt.timing.warmup = 3;
  opt.timing.reps = 20;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  if (c.knobs.find("SPLITK_MODE=partials") != std::string::npos) {
    EXPECT_EQ(r.program.state.kernel.kernels.size(), 1u) << "partials is one kernel";
  }
}

INSTANTIATE_TEST_SUITE_P(SmallTiles, GpuSmallTiles, ::testing::ValuesIn(small_tile::cases()));

}  // namespace
}  // namespace loom
