#include "bench/timing.h"

#include <gtest/gtest.h>

#include "ir/error.h"

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

}  // namespace
}  // namespace loom
