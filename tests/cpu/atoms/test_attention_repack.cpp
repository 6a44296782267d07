// Attention's P repack (c_to_a_pairs): two m16n8 accumulator tiles side by side are the
// A fragment of one m16n8k16 step, value for value, for the f16 and bf16 atoms — read
// off the table's maps, so k:012 may use the S accumulators as O += P V's A operand in
// place. Atoms whose layouts do not pair that way are refused with the reason.
#include <gtest/gtest.h>

#include "atoms/atoms.h"
#include "ir/error.h"

namespace loom {
namespace {

TEST(AttentionRepack, Mma16x8x16AccumulatorsAreTheAFragment) {
  EXPECT_NO_THROW(c_to_a_pairs(atom("mma_m16n8k16_f32_bf16")));
  EXPECT_NO_THROW(c_to_a_pairs(atom("mma_m16n8k16_f32_f16")));
}

TEST(AttentionRepack, OtherAtomsAreRefused) {
  // tf32 m16n8k8: k = n, so one A fragment spans one C tile's columns, not two.
  EXPECT_THROW(c_to_a_pairs(atom("mma_m16n8k8_f32_tf32")), Error);
  EXPECT_THROW(c_to_a_pairs(atom("fma_f32")), Error);
}

// The check can fail: an A layout with its two column halves swapped (values 4..7 before
// 0..3) no longer matches C tile 0 then tile 1.
TEST(AttentionRepack, ASwappedLayoutIsRefused) {
  AtomDef a = atom("mma_m16n8k16_f32_bf16");
  for (OperandLayout& l : a.layouts)
    if (l.name == "A") {
      auto map = l.map;
      l.map = [map](int lane, int v) { return map(lane, v ^ 4); };
    }
  try {
    c_to_a_pairs(a);
    ADD_FAILURE() << "a swapped A layout passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be read as the A fragment"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace loom
