#include "bench/timing.h"

#include <gtest/gtest.h>

#include "ir/error.h"
#include "runtime/nvrtc.h"

namespace loom {
namespace {

TEST(SummarizeSamples, OddCountOrderStatistics) {
  Timing t = summarize_samples({5, 1, 4, 2, 3});
  EXPECT_EQ(t.reps, 5);
  EXPECT_DOUBLE_EQ(t.min_us, 1);
  EXPECT_DOUBLE_EQ(t.median_us, 3);
  EXPECT_DOUBLE_EQ(t.p10_us, 1.4);  // rank 0.4 between 1 and 2
  EXPECT_DOUBLE_EQ(t.p90_us, 4.6);  // rank 3.6 between 4 and 5
  EXPECT_FALSE(t.graph_median_us.has_value());
}

TEST(SummarizeSamples, EvenCountMedianIsMeanOfMiddleTwo) {
  EXPECT_DOUBLE_EQ(summarize_samples({4, 1, 3, 2}).median_us, 2.5);
}

TEST(SummarizeSamples, SingleSampleAndEmpty) {
  Timing t = summarize_samples({7});
  EXPECT_DOUBLE_EQ(t.p10_us, 7);
  EXPECT_DOUBLE_EQ(t.p90_us, 7);
  EXPECT_THROW(summarize_samples({}), Error);
}

// Rotation is refused before anything touches the GPU: candidates without a set
// parameter cannot rotate, and one set is no rotation.
TEST(TimeCandidates, RotationNeedsSetsAndSetAwareCandidates) {
  TimingOptions opt;
  opt.l2 = L2Method::rotate;
  opt.input_sets = 2;
  EXPECT_THROW(time_interleaved({[](cudaStream_t) {}}, nullptr, opt), Error);
  opt.input_sets = 1;
  try {
    time_candidates({[](cudaStream_t, int) {}}, nullptr, opt);
    FAIL() << "one input set cannot rotate";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least 2 input sets"), std::string::npos);
  }
}

// The read flush's kernel builds for the GPUs Loom times on (NVRTC needs no GPU).
TEST(ReadFlushKernel, CompilesForHopperAndAmpere) {
  for (const char* arch : {"sm_90", "sm_80"}) {
    CompileRequest req;
    req.source = l2_read_flush_source();
    req.arch = arch;
    CompileResult r = compile(req, nullptr);
    EXPECT_FALSE(r.cubin.empty()) << arch;
    ASSERT_TRUE(r.resources.count("loom_l2_read_flush")) << arch;
    EXPECT_EQ(r.resources.at("loom_l2_read_flush").spill_store_bytes, 0) << arch;
  }
}

}  // namespace
}  // namespace loom
