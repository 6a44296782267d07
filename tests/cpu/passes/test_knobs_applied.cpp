// The knobs a program records (CompileState::used_knobs: `loom run`'s kernel table, the
// tuner's records, scripts/attention_bench.py's knob column) are the knobs that applied.
// The contraction passes l:015 (SWAP_AB), l:020 (SPLITK, SPLITK_MODE) and l:022
// (CLUSTER_K) recorded their defaults for attention too, which has no contraction; they
// now record nothing there, refuse a split given for it, and record as before for GEMMs.
#include <gtest/gtest.h>

#include "pass_check.h"

namespace loom {
namespace {

const char* kAttention =
    "attention(Q[1,2,128,64]:bf16, K[1,2,128,64]:bf16, V[1,2,128,64]:bf16, causal=false)";
const char* kGemmOnly[] = {"SWAP_AB", "SPLITK", "SPLITK_MODE", "CLUSTER_K"};

TEST(KnobsApplied, AttentionRecordsNoContractionKnobs) {
  const CompileState s = passcheck::compile_sm90a(kAttention, "");
  EXPECT_FALSE(s.used_knobs.empty());
  for (const char* k : kGemmOnly) EXPECT_EQ(s.used_knobs.count(k), 0u) << k;
}

TEST(KnobsApplied, GemmsStillRecordThem) {
  const CompileState s = passcheck::compile_sm90a("matmul(A[64,64]:bf16, B[64,64]:bf16)", "");
  for (const char* k : kGemmOnly) EXPECT_EQ(s.used_knobs.count(k), 1u) << k;
  EXPECT_EQ(s.used_knobs.at("SWAP_AB"), "0");
  EXPECT_EQ(s.used_knobs.at("SPLITK"), "1");
}

// Given for attention, a split or a swap is refused with the fix; the neutral values pass.
TEST(KnobsApplied, AttentionRefusesAGivenSplitOrSwap) {
  const std::string split = passcheck::error_of(kAttention, "SPLITK=2");
  EXPECT_NE(split.find("use SPLITK=1"), std::string::npos) << split;
  const std::string swap = passcheck::error_of(kAttention, "SWAP_AB=1");
  EXPECT_NE(swap.find("use SWAP_AB=0"), std::string::npos) << swap;
  const std::string cluster = passcheck::error_of(kAttention, "CLUSTER_K=2");
  EXPECT_NE(cluster.find("use CLUSTER_K=1"), std::string::npos) << cluster;
  EXPECT_EQ(passcheck::error_of(kAttention, "SPLITK=1,SWAP_AB=0,CLUSTER_K=1"), "");
}

}  // namespace
}  // namespace loom
