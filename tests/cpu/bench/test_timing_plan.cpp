#include "bench/timing_plan.h"

#include <gtest/gtest.h>

#include "bench/timing.h"
#include "ir/error.h"

namespace loom {
namespace {

constexpr int64_t MiB = 1 << 20;
constexpr int64_t kH200L2 = 60 * MiB, kH100L2 = 50 * MiB;
constexpr int64_t kPlenty = int64_t(64) << 30;

TEST(RotationSets, EnoughSetsForTwiceTheL2) {
  // Decode 16x4096x4096 bf16: a 32 MiB weight and a 128 KiB activation.
  const int64_t decode = 32 * MiB + 128 * 1024;
  EXPECT_EQ(rotation_sets(decode, kH200L2, kPlenty), 4);  // 3 sets = 96.4 MiB < 120
  EXPECT_EQ(rotation_sets(decode, kH100L2, kPlenty), 4);  // 3 sets = 96.4 MiB < 100
  // 128x128x16384 bf16: 8 MiB of inputs.
  EXPECT_EQ(rotation_sets(8 * MiB, kH200L2, kPlenty), 15);
  EXPECT_EQ(rotation_sets(8 * MiB, kH100L2, kPlenty), 13);
}

TEST(RotationSets, AtLeastTwoAndCapped) {
  // A set of L2 size or more still needs a second set to alternate with.
  EXPECT_EQ(rotation_sets(kH200L2, kH200L2, kPlenty), 2);
  EXPECT_EQ(rotation_sets(4 * kH200L2, kH200L2, kPlenty), 2);
  // 1 MiB sets would need 120 of them: over kMaxInputSets.
  EXPECT_EQ(rotation_sets(1 * MiB, kH200L2, kPlenty), 0);
  EXPECT_EQ(rotation_sets(2 * kH200L2 / kMaxInputSets, kH200L2, kPlenty), kMaxInputSets);
  // Memory: 4 sets of 32 MiB do not fit in 100 MiB.
  EXPECT_EQ(rotation_sets(32 * MiB, kH200L2, 100 * MiB), 0);
  EXPECT_EQ(rotation_sets(0, kH200L2, kPlenty), 0);
  EXPECT_EQ(rotation_sets(MiB, 0, kPlenty), 0);
}

TEST(PlanL2, AutoRotatesSmallInputsAndReadsLargeOnes) {
  L2Plan small = plan_l2(L2Request::automatic, 8 * MiB, kH200L2, kPlenty);
  EXPECT_EQ(small.method, L2Method::rotate);
  EXPECT_EQ(small.sets, 15);
  // 4096^3 bf16: 64 MiB of inputs, more than the L2.
  L2Plan large = plan_l2(L2Request::automatic, 64 * MiB, kH200L2, kPlenty);
  EXPECT_EQ(large.method, L2Method::read);
  EXPECT_EQ(large.sets, 1);
  // Tiny inputs need too many sets: read instead.
  L2Plan tiny = plan_l2(L2Request::automatic, 64 * 1024, kH200L2, kPlenty);
  EXPECT_EQ(tiny.method, L2Method::read);
  EXPECT_NE(tiny.why.find("too many"), std::string::npos);
  // No memory for the sets: read.
  EXPECT_EQ(plan_l2(L2Request::automatic, 8 * MiB, kH200L2, 64 * MiB).method, L2Method::read);
}

TEST(PlanL2, ExplicitRequestsAreHonoured) {
  EXPECT_EQ(plan_l2(L2Request::flush, 8 * MiB, kH200L2, kPlenty).method, L2Method::flush);
  EXPECT_EQ(plan_l2(L2Request::read, 8 * MiB, kH200L2, kPlenty).method, L2Method::read);
  EXPECT_EQ(plan_l2(L2Request::off, 8 * MiB, kH200L2, kPlenty).method, L2Method::off);
  L2Plan big = plan_l2(L2Request::rotate, 64 * MiB, kH200L2, kPlenty);
  EXPECT_EQ(big.method, L2Method::rotate);
  EXPECT_EQ(big.sets, 2);
  try {
    plan_l2(L2Request::rotate, 64 * 1024, kH200L2, kPlenty);
    FAIL() << "rotating 64 KiB sets cannot reach 2x L2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--l2 read"), std::string::npos) << e.what();
  }
}

TEST(PlanL2, ParsesTheOption) {
  EXPECT_EQ(parse_l2_request("auto"), L2Request::automatic);
  EXPECT_EQ(parse_l2_request("rotate"), L2Request::rotate);
  EXPECT_EQ(parse_l2_request("read"), L2Request::read);
  EXPECT_EQ(parse_l2_request("flush"), L2Request::flush);
  EXPECT_EQ(parse_l2_request("off"), L2Request::off);
  EXPECT_THROW(parse_l2_request("memset"), Error);
  for (L2Method m : {L2Method::off, L2Method::flush, L2Method::read, L2Method::rotate})
    EXPECT_EQ(l2_method_from_name(l2_method_name(m)), m);
  EXPECT_THROW(l2_method_from_name("auto"), Error);
}

TEST(DescribeL2, NamesMethodSetsAndReason) {
  L2Plan p = plan_l2(L2Request::automatic, 32 * MiB + 128 * 1024, kH200L2, kPlenty);
  EXPECT_EQ(describe_l2(p),
            "rotate over 4 input sets of 32.1 MiB (128.5 MiB = 2.1x L2), no flush (auto: "
            "inputs under L2)");
  p = plan_l2(L2Request::flush, 64 * MiB, kH200L2, kPlenty);
  EXPECT_EQ(describe_l2(p),
            "flush: write 120.0 MiB before each rep, leaving dirty lines (--l2 flush)");
  p = plan_l2(L2Request::automatic, 64 * MiB, kH200L2, kPlenty);
  EXPECT_EQ(describe_l2(p),
            "read: a kernel reads 120.0 MiB before each rep, leaving clean lines (auto: inputs "
            "of L2 size or more)");
}

TEST(GraphLaunches, WholePassesOverTheSets) {
  EXPECT_EQ(graph_launches(1), kLaunchesPerGraph);
  EXPECT_EQ(graph_launches(4), 20);
  EXPECT_EQ(graph_launches(15), 30);
  EXPECT_EQ(graph_launches(64), 64);
  for (int sets : {1, 2, 3, 7, 13, 64}) {
    EXPECT_EQ(graph_launches(sets) % sets, 0) << sets;
    EXPECT_GE(graph_launches(sets), kLaunchesPerGraph) << sets;
  }
}

}  // namespace
}  // namespace loom
