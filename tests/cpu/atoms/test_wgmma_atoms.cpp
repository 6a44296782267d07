// The wgmma entries of the atom table: one per type and N, with the register fragments of
// PTX ISA 9.7.15.5.1.1 — checked here against the ISA's formulas written out independently
// (warp w of the warpgroup owns rows 16w..16w+15, the mma.sync m16n8 pattern inside), and
// each layout covering its tile exactly once; and their Kernel IR descriptions.
#include <gtest/gtest.h>

#include <set>

#include "atoms/atoms.h"
#include "ir/error.h"

namespace loom {
namespace {

using Coord = std::pair<int, int>;

std::vector<const AtomDef*> wgmma_atoms() {
  std::vector<const AtomDef*> out;
  for (const AtomDef& a : atom_table())
    if (a.threads == 128) out.push_back(&a);
  return out;
}

// The ISA's figures as formulas: thread t, warp w = t/32, groupID g, threadID_in_group q.
Coord isa_c(int t, int v) {
  const int w = t / 32, g = (t % 32) / 4, q = t % 4;
  return {16 * w + g + 8 * ((v >> 1) & 1), 8 * (v / 4) + 2 * q + (v & 1)};
}
Coord isa_a16(int t, int v) {
  const int w = t / 32, g = (t % 32) / 4, q = t % 4;
  return {16 * w + g + 8 * ((v >> 1) & 1), 2 * q + (v & 1) + 8 * (v >> 2)};
}
Coord isa_a_tf32(int t, int v) {
  const int w = t / 32, g = (t % 32) / 4, q = t % 4;
  return {16 * w + g + 8 * (v & 1), q + 4 * (v >> 1)};
}

TEST(WgmmaAtoms, OneEntryPerTypeAndN) {
  ASSERT_EQ(wgmma_atoms().size(), 3u * 32u);
  for (DType in : {DType::F16, DType::BF16, DType::TF32})
    for (int n = 8; n <= 256; n += 8) {
      const AtomDef* a = wgmma_atom(in, n);
      ASSERT_NE(a, nullptr) << dtype_name(in) << " n" << n;
      const int k = in == DType::TF32 ? 8 : 16;
      EXPECT_EQ(a->id, "wgmma_m64n" + std::to_string(n) + "k" + std::to_string(k) + "_f32_" +
                           dtype_name(in));
      EXPECT_EQ(a->ptx, "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k" +
                            std::to_string(k) + ".f32." + dtype_name(in) + "." + dtype_name(in));
      EXPECT_EQ(a->m, 64);
      EXPECT_EQ(a->n, n);
      EXPECT_EQ(a->k, k);
      EXPECT_EQ(a->threads, 128);
      EXPECT_EQ(a->min_sm, 90);
      EXPECT_TRUE(a->needs_arch_specific);
      EXPECT_EQ(a->acc_type, DType::F32);
      EXPECT_EQ(a->b_type, in);
    }
  EXPECT_EQ(wgmma_atom(DType::BF16, 12), nullptr);
  EXPECT_EQ(wgmma_atom(DType::BF16, 264), nullptr);
  EXPECT_EQ(wgmma_atom(DType::BF16, 0), nullptr);
  EXPECT_EQ(wgmma_atom(DType::F32, 64), nullptr);
}

TEST(WgmmaAtoms, LayoutsAreThePtxFragments) {
  for (const AtomDef* a : wgmma_atoms()) {
    SCOPED_TRACE(a->id);
    const OperandLayout& c = operand_layout(*a, "C");
    ASSERT_EQ(c.values_per_thread, a->n / 2);
    ASSERT_EQ(c.rows, 64);
    ASSERT_EQ(c.cols, a->n);
    const OperandLayout& A = operand_layout(*a, "A");
    const bool tf32 = a->a_type == DType::TF32;
    ASSERT_EQ(A.rows, 64);
    ASSERT_EQ(A.cols, a->k);
    ASSERT_EQ(A.values_per_thread, tf32 ? 4 : 8);
    EXPECT_THROW(operand_layout(*a, "B"), Error);  // B lives in shared memory only
    for (int t = 0; t < 128; ++t) {
      for (int v = 0; v < c.values_per_thread; ++v)
        ASSERT_EQ(c.map(t, v), isa_c(t, v)) << "C thread " << t << " value " << v;
      for (int v = 0; v < A.values_per_thread; ++v)
        ASSERT_EQ(A.map(t, v), tf32 ? isa_a_tf32(t, v) : isa_a16(t, v))
            << "A thread " << t << " value " << v;
    }
  }
}

TEST(WgmmaAtoms, EachLayoutCoversItsTileOnce) {
  for (const AtomDef* a : wgmma_atoms())
    for (const char* op : {"A", "C"}) {
      SCOPED_TRACE(a->id + " " + op);
      const OperandLayout& l = operand_layout(*a, op);
      std::set<Coord> seen;
      for (int t = 0; t < 128; ++t)
        for (int v = 0; v < l.values_per_thread; ++v) {
          const Coord e = l.map(t, v);
          ASSERT_TRUE(e.first >= 0 && e.first < l.rows && e.second >= 0 && e.second < l.cols)
              << "thread " << t << " value " << v;
          ASSERT_TRUE(seen.insert(e).second) << "(" << e.first << ", " << e.second << ") twice";
          // Warp w of the warpgroup owns rows 16w..16w+15.
          ASSERT_EQ(e.first / 16, t / 32) << "thread " << t << " value " << v;
        }
      EXPECT_EQ(seen.size(), size_t(l.rows * l.cols));
    }
}

TEST(WgmmaAtoms, WarpgroupAtomFillsTheKernelIrContract) {
  const AtomDef& a = *wgmma_atom(DType::BF16, 128);
  for (bool rs : {false, true}) {
    SCOPED_TRACE(rs ? "rs" : "ss");
    const WarpAtom w = warpgroup_atom(a, rs);
    EXPECT_EQ(w.id, rs ? "wgmma_m64n128k16_f32_bf16_rs" : "wgmma_m64n128k16_f32_bf16_ss");
    EXPECT_EQ(w.threads, 128);
    EXPECT_EQ(w.a_shared, !rs);
    EXPECT_TRUE(w.b_shared);
    EXPECT_TRUE(w.b.empty());
    EXPECT_EQ(w.b_values, 0);
    EXPECT_EQ(w.m, 64);
    EXPECT_EQ(w.n, 128);
    EXPECT_EQ(w.k, 16);
    EXPECT_EQ(w.c_values, 64);
    ASSERT_EQ(w.c.size(), size_t(128 * 64));
    EXPECT_EQ(w.c[size_t(37 * 64 + 13)], isa_c(37, 13));
    if (rs) {
      EXPECT_EQ(w.a_values, 8);
      ASSERT_EQ(w.a.size(), size_t(128 * 8));
      EXPECT_EQ(w.a[size_t(101 * 8 + 6)], isa_a16(101, 6));
    } else {
      EXPECT_TRUE(w.a.empty());
      EXPECT_EQ(w.a_values, 0);
    }
    bool back_rs = !rs;
    EXPECT_EQ(wgmma_variant(w.id, &back_rs), &a);
    EXPECT_EQ(back_rs, rs);
  }
  EXPECT_EQ(wgmma_variant("wgmma_m64n128k16_f32_bf16"), nullptr);
  EXPECT_EQ(wgmma_variant("mma_m16n8k16_f32_f16_ss"), nullptr);
  EXPECT_EQ(wgmma_variant("_rs"), nullptr);
}

TEST(WgmmaAtoms, WarpAndWarpgroupDescriptionsDoNotMix) {
  try {
    warp_atom(*wgmma_atom(DType::F16, 64));
    ADD_FAILURE() << "a wgmma entry has no 32-lane description";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("warpgroup_atom"), std::string::npos) << e.what();
  }
  EXPECT_THROW(warpgroup_atom(atom("mma_m16n8k16_f32_f16"), false), Error);
  EXPECT_THROW(warpgroup_atom(atom("ldmatrix_x4"), true), Error);
}

}  // namespace
}  // namespace loom
