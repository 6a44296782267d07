// GPU correctness of CLUSTER_K: split-K reduced inside a thread-block cluster
// through distributed shared memory (cluster_k_cases.h), through run_expression
// (NaN-poisoned output, fp64 reference), once plainly and once after a timed run of
// back-to-back launches. Skips with the reason on a GPU-less machine (every case still
// compiles for sm_90a first).
#include <gtest/gtest.h>

#include "cluster_k_cases.h"
#include "compile_first.h"
#include "driver/run.h"
#include "runtime/device.h"

namespace loom {
namespace {

using cluster_k::Case;

class GpuClusterK : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuClusterK, MatchesFp64Reference) {
  const Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 41;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  // The partial tiles move by asynchronous stores into their owners' shared memory.
  if (!c.knobs.empty()) {
    EXPECT_NE(r.program.cuda.find("loom::st_async_v"), std::string::npos);
  }
}

TEST_P(GpuClusterK, RepeatedLaunchesStayCorrect) {
  const Case& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 43;
  opt.bench = true;
  opt.timing.warmup = 3;
  opt.timing.reps = 20;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
}

INSTANTIATE_TEST_SUITE_P(ClusterK, GpuClusterK, ::testing::ValuesIn(cluster_k::cases()));

}  // namespace
}  // namespace loom
