// Trials are timed as `loom run --bench` times (trial_timing.h): the L2 plan of
// bench/timing_plan.h for the problem, never the old write flush unless asked for; short
// launches replayed from CUDA graphs and ranked by that.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "tune/trial_timing.h"

namespace loom::tune {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kH100L2 = 50 * kMiB;
constexpr int64_t kFree = 70 * 1024 * kMiB;

TimingOptions asked() {
  TimingOptions t;
  t.reps = 9;
  t.warmup = 3;
  t.max_seconds = 1.5;
  return t;
}

// Decode 16x4096x4096 bf16: a 32 MiB weight (+128 KiB) is under the L2, so its launches
// rotate over sets totalling twice the L2: 4 sets.
TEST(TrialTiming, InputsUnderL2RotateAsTheBenchmarkDoes) {
  const int64_t set = (16 * 4096 + 4096 * 4096) * 2;
  TrialTiming t = plan_trial_timing(asked(), L2Request::automatic, set, kH100L2, kFree);
  EXPECT_EQ(t.plan.method, L2Method::rotate);
  EXPECT_EQ(t.timing.l2, L2Method::rotate);
  EXPECT_EQ(t.timing.input_sets, 4);
  EXPECT_EQ(t.timing.input_set_bytes, set);
  // The plan is exactly what `loom run` makes (free memory halved for the sets).
  L2Plan run = plan_l2(L2Request::automatic, set, kH100L2, kFree / 2);
  EXPECT_EQ(run.method, t.plan.method);
  EXPECT_EQ(run.sets, t.plan.sets);
  // What the tuner asked for stays.
  EXPECT_EQ(t.timing.reps, 9);
  EXPECT_EQ(t.timing.warmup, 3);
  EXPECT_EQ(t.timing.max_seconds, 1.5);
}

// 4096^3 bf16: 64 MiB of inputs, more than the L2: a read flush, one input set.
TEST(TrialTiming, InputsOverL2ReadFlush) {
  const int64_t set = 2 * 4096 * 4096 * 2;
  TrialTiming t = plan_trial_timing(asked(), L2Request::automatic, set, kH100L2, kFree);
  EXPECT_EQ(t.timing.l2, L2Method::read);
  EXPECT_EQ(t.timing.input_sets, 1);
}

// Too little free memory for the sets: read, as `loom run` falls back.
TEST(TrialTiming, NoRoomForSetsReads) {
  const int64_t set = 32 * kMiB;
  TrialTiming t = plan_trial_timing(asked(), L2Request::automatic, set, kH100L2, 64 * kMiB);
  EXPECT_EQ(t.timing.l2, L2Method::read);
  EXPECT_EQ(t.timing.input_sets, 1);
}

// An explicit request is honoured: flush only when asked; rotate refused where it cannot.
TEST(TrialTiming, ExplicitRequestsAreHonoured) {
  const int64_t set = 32 * kMiB;
  EXPECT_EQ(plan_trial_timing(asked(), L2Request::flush, set, kH100L2, kFree).timing.l2,
            L2Method::flush);
  EXPECT_EQ(plan_trial_timing(asked(), L2Request::off, set, kH100L2, kFree).timing.l2,
            L2Method::off);
  EXPECT_THROW(plan_trial_timing(asked(), L2Request::rotate, 4096, kH100L2, kFree), Error);
  for (L2Request r : {L2Request::automatic, L2Request::off, L2Request::flush, L2Request::read,
                      L2Request::rotate})
    EXPECT_EQ(parse_l2_request(l2_request_name(r)), r);
}

// A trial replays from a CUDA graph below twice the benchmark's bound: its comparison
// partners are timed in other trials, and a short launch's event median can come out
// well over 20 us from host noise alone.
TEST(TrialTiming, TrialsReplayBelowTwiceTheBenchmarksBound) {
  EXPECT_EQ(TimingOptions().graph_replay_below_us, kGraphReplayBelowUs);
  EXPECT_EQ(kTrialGraphReplayBelowUs, 2 * kGraphReplayBelowUs);
  for (L2Request r : {L2Request::automatic, L2Request::read, L2Request::off})
    EXPECT_EQ(plan_trial_timing(asked(), r, 32 * kMiB, kH100L2, kFree).timing.graph_replay_below_us,
              kTrialGraphReplayBelowUs);
  EXPECT_TRUE(plan_trial_timing(asked(), L2Request::automatic, 32 * kMiB, kH100L2, kFree)
                  .timing.graph_replay_if_short);
}

// A replayed trial is ranked by its replay time, one without by its event median; the
// method is named so the record says how its time was taken. The 2026-11-22 case: the
// unsplit kernel's event median (11.81 us) beat the split default's (11.7 + noise), while
// replayed the default is 7.3 us.
TEST(TrialTiming, ShortTrialsAreRankedByGraphReplay) {
  Measurement unsplit, split, long_one;
  unsplit.median_us = 11.81;
  unsplit.graph_us = 10.9;
  split.median_us = 11.95;
  split.graph_us = 7.3;
  long_one.median_us = 812.5;
  EXPECT_LT(unsplit.median_us, split.median_us);
  EXPECT_LT(trial_us(split), trial_us(unsplit));
  EXPECT_EQ(trial_us(split), 7.3);
  EXPECT_EQ(trial_us(long_one), 812.5);
  EXPECT_STREQ(trial_timed(split), "graph");
  EXPECT_STREQ(trial_timed(long_one), "event");
  EXPECT_STREQ(trial_timed(failed_measurement(TrialStatus::fault, "x")), "event");
}

}  // namespace
}  // namespace loom::tune
