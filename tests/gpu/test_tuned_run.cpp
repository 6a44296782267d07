// `loom run` with a tuning record: run_expression asks its choose_tuned hook (the tuning
// database lookup in the loom command) for knobs with the GPU it probed, compiles them
// under any explicit knobs, verifies, and says where the knobs came from.
#include <gtest/gtest.h>

#include "compile_first.h"
#include "driver/run.h"

namespace loom {
namespace {

const std::string kExpr = "matmul(A[512,384]:f32, B[384,256]:f32)";
const std::string kTuned = "BM=64,BN=32,FM=4,FN=2,BK=8,STAGE=sync,STAGES=2";

TEST(TunedRun, TakesTheHooksKnobsAndVerifies) {
  compile_then_require_gpu(kExpr, kTuned);
  if (IsSkipped() || HasFailure()) return;
  RunOptions opt;
  std::string seen_gpu;
  opt.choose_tuned = [&](const Graph& g, const DeviceInfo& dev, CompileOptions& c) {
    EXPECT_FALSE(g.nodes.empty());
    seen_gpu = dev.name;
    c.tuned = Knobs::parse(kTuned);
    c.tuned_source = "tuned: test hook";
  };
  RunReport r = run_expression(kExpr, opt);
  EXPECT_FALSE(seen_gpu.empty());
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_EQ(r.program.knob_source, "tuned: test hook");
  EXPECT_EQ(r.program.state.used_knobs.at("BN"), "32");

  opt.knobs = Knobs::parse("BK=16");  // explicit staging over the tuned tiling
  RunReport both = run_expression(kExpr, opt);
  EXPECT_TRUE(both.verify.passed) << both.verify.message;
  EXPECT_EQ(both.program.knob_source, "explicit over tuned: test hook");
  EXPECT_EQ(both.program.state.used_knobs.at("BN"), "32");
  EXPECT_EQ(both.program.state.used_knobs.at("BK"), "16");
}

}  // namespace
}  // namespace loom
