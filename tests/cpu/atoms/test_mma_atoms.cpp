// The tensor-core entries of the atom table: mma.sync m16n8k16 (f16, bf16; f32 or f16
// accumulate), m16n8k8 tf32, and ldmatrix x4/x2 (+.trans, and the b32 view tf32 uses).
// Every layout is checked as a bijection onto its tile, against the PTX ISA formulas
// written out independently here, and ldmatrix is checked to compose with the mma
// fragments the way HGEMM (and TF32 GEMM) kernels use it.
// (The device wrappers are compiled with NVRTC in tests/gpu/test_mma_atoms.cpp, which
// links the runtime and the embedded device header; this folder links loom_atoms only.)
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "atoms/atoms.h"
#include "ir/error.h"

namespace loom {
namespace {

using Coord = std::pair<int, int>;

const std::vector<std::string> kMmaIds = {"mma_m16n8k16_f32_f16", "mma_m16n8k16_f32_bf16",
                                          "mma_m16n8k16_f16_f16", "mma_m16n8k8_f32_tf32"};
const std::vector<std::string> kLdmatrixIds = {"ldmatrix_x4", "ldmatrix_x2",
                                               "ldmatrix_x4_trans", "ldmatrix_x2_trans"};

// The PTX ISA formulas, spelled as the manual spells them (case analysis on the element
// index), not as atoms.cpp does (bit arithmetic), so a slip in either one shows.
Coord ptx_m16n8k16_a(int lane, int i) {
  int g = lane >> 2, t = lane % 4;
  int row = (i < 2 || (4 <= i && i < 6)) ? g : g + 8;
  int col = i < 4 ? t * 2 + (i & 0x1) : t * 2 + (i & 0x1) + 8;
  return {row, col};
}
Coord ptx_m16n8k16_b(int lane, int i) {
  int g = lane >> 2, t = lane % 4;
  int row = i < 2 ? t * 2 + (i & 0x1) : t * 2 + (i & 0x1) + 8;
  return {row, g};
}
Coord ptx_c(int lane, int i) {
  int g = lane >> 2, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 0x1)};
}
Coord ptx_m16n8k8_tf32_a(int lane, int i) {
  int g = lane >> 2, t = lane % 4;
  int row = (i == 0 || i == 2) ? g : g + 8;
  int col = (i == 0 || i == 1) ? t : t + 4;
  return {row, col};
}
Coord ptx_m16n8k8_tf32_b(int lane, int i) {
  int g = lane >> 2, t = lane % 4;
  return {i == 0 ? t : t + 4, g};
}

// Each (row, col) of the tile is hit exactly `times` times by lanes [0, lanes) x values.
void expect_cover(const OperandLayout& l, int lanes, int times, const std::string& what) {
  std::map<Coord, int> hits;
  for (int lane = 0; lane < lanes; ++lane)
    for (int v = 0; v < l.values_per_thread; ++v) {
      Coord c = l.map(lane, v);
      ASSERT_TRUE(c.first >= 0 && c.first < l.rows && c.second >= 0 && c.second < l.cols)
          << what << " " << l.name << ": lane " << lane << " value " << v << " -> ("
          << c.first << "," << c.second << ") is outside " << l.rows << "x" << l.cols;
      ++hits[c];
    }
  EXPECT_EQ(int(hits.size()), l.rows * l.cols) << what << " " << l.name;
  for (const auto& [c, n] : hits)
    EXPECT_EQ(n, times) << what << " " << l.name << " (" << c.first << "," << c.second << ")";
}

TEST(MmaAtoms, EntriesDescribeTheInstructions) {
  struct Want {
    std::string id;
    int k;
    DType ab, acc;
    std::string ptx;
  };
  for (const Want& w :
       {Want{"mma_m16n8k16_f32_f16", 16, DType::F16, DType::F32,
             "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"},
        Want{"mma_m16n8k16_f32_bf16", 16, DType::BF16, DType::F32,
             "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"},
        Want{"mma_m16n8k16_f16_f16", 16, DType::F16, DType::F16,
             "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"},
        Want{"mma_m16n8k8_f32_tf32", 8, DType::TF32, DType::F32,
             "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"}}) {
    SCOPED_TRACE(w.id);
    const AtomDef& a = atom(w.id);
    EXPECT_EQ(a.kind, AtomKind::Compute);
    EXPECT_EQ(a.ptx, w.ptx);
    EXPECT_EQ(a.wrapper, "loom::" + w.id);
    EXPECT_EQ(a.min_sm, 80);
    EXPECT_FALSE(a.needs_arch_specific);
    EXPECT_EQ(a.threads, 32);
    EXPECT_EQ(a.m, 16);
    EXPECT_EQ(a.n, 8);
    EXPECT_EQ(a.k, w.k);
    EXPECT_EQ(a.a_type, w.ab);
    EXPECT_EQ(a.b_type, w.ab);
    EXPECT_EQ(a.acc_type, w.acc);
    EXPECT_NE(a.ptx_section.find("Matrix Fragments for mma.m16n8k" + std::to_string(w.k)),
              std::string::npos)
        << a.ptx_section;
    const OperandLayout &A = operand_layout(a, "A"), &B = operand_layout(a, "B"),
                        &C = operand_layout(a, "C");
    EXPECT_EQ(Coord(A.rows, A.cols), Coord(a.m, a.k));
    EXPECT_EQ(Coord(B.rows, B.cols), Coord(a.k, a.n));
    EXPECT_EQ(Coord(C.rows, C.cols), Coord(a.m, a.n));
    // Values per thread: the tile spread evenly over the warp (8/4/4 for k16, 4/2/4 for k8).
    EXPECT_EQ(A.values_per_thread, w.k == 16 ? 8 : 4);
    EXPECT_EQ(B.values_per_thread, w.k == 16 ? 4 : 2);
    EXPECT_EQ(C.values_per_thread, 4);
  }
}

TEST(MmaAtoms, EveryLayoutIsABijectionOntoItsTile) {
  for (const auto& id : kMmaIds)
    for (const auto& l : atom(id).layouts) expect_cover(l, 32, 1, id);
  for (const auto& id : kLdmatrixIds) {
    const AtomDef& a = atom(id);
    const int count = operand_layout(a, "dst").rows / 8;
    expect_cover(operand_layout(a, "dst"), 32, 1, id);
    // src: lanes 0..8*count-1 each address one distinct stacked row...
    expect_cover(operand_layout(a, "src"), 8 * count, 1, id);
    // ...and the ignored lanes repeat them, so the whole warp covers each row 4/count times.
    expect_cover(operand_layout(a, "src"), 32, 4 / count, id);
  }
}

TEST(MmaAtoms, LayoutsMatchThePtxIsaFormulas) {
  struct Case {
    std::string id, operand;
    Coord (*ptx)(int, int);
  };
  for (const Case& c : {Case{"mma_m16n8k16_f32_f16", "A", ptx_m16n8k16_a},
                        Case{"mma_m16n8k16_f32_f16", "B", ptx_m16n8k16_b},
                        Case{"mma_m16n8k16_f32_f16", "C", ptx_c},
                        Case{"mma_m16n8k16_f32_bf16", "A", ptx_m16n8k16_a},
                        Case{"mma_m16n8k16_f32_bf16", "B", ptx_m16n8k16_b},
                        Case{"mma_m16n8k16_f32_bf16", "C", ptx_c},
                        Case{"mma_m16n8k16_f16_f16", "A", ptx_m16n8k16_a},
                        Case{"mma_m16n8k16_f16_f16", "B", ptx_m16n8k16_b},
                        Case{"mma_m16n8k16_f16_f16", "C", ptx_c},
                        Case{"mma_m16n8k8_f32_tf32", "A", ptx_m16n8k8_tf32_a},
                        Case{"mma_m16n8k8_f32_tf32", "B", ptx_m16n8k8_tf32_b},
                        Case{"mma_m16n8k8_f32_tf32", "C", ptx_c}}) {
    const OperandLayout& l = operand_layout(atom(c.id), c.operand.c_str());
    for (int lane = 0; lane < 32; ++lane)
      for (int v = 0; v < l.values_per_thread; ++v)
        ASSERT_EQ(l.map(lane, v), c.ptx(lane, v))
            << c.id << " " << c.operand << " lane " << lane << " value " << v;
  }
}

TEST(MmaAtoms, SpotChecksFromTheFragmentFigures) {
  const AtomDef& f16 = atom("mma_m16n8k16_f32_f16");
  const OperandLayout &A = operand_layout(f16, "A"), &B = operand_layout(f16, "B"),
                      &C = operand_layout(f16, "C");
  EXPECT_EQ(A.map(5, 0), Coord(1, 2));    // groupID 1, threadID_in_group 1
  EXPECT_EQ(A.map(5, 1), Coord(1, 3));
  EXPECT_EQ(A.map(0, 2), Coord(8, 0));    // a2: eight rows down
  EXPECT_EQ(A.map(0, 4), Coord(0, 8));    // a4: eight columns right
  EXPECT_EQ(A.map(31, 7), Coord(15, 15));
  EXPECT_EQ(B.map(5, 3), Coord(11, 1));   // b3: row 2t+1+8, column groupID
  EXPECT_EQ(B.map(28, 0), Coord(0, 7));
  EXPECT_EQ(C.map(30, 3), Coord(15, 5));
  EXPECT_EQ(C.map(1, 1), Coord(0, 3));

  const AtomDef& tf32 = atom("mma_m16n8k8_f32_tf32");
  const OperandLayout &TA = operand_layout(tf32, "A"), &TB = operand_layout(tf32, "B");
  EXPECT_EQ(TA.map(6, 1), Coord(9, 2));   // a1 steps down a row half, not across
  EXPECT_EQ(TA.map(6, 2), Coord(1, 6));
  EXPECT_EQ(TB.map(9, 1), Coord(5, 2));

  const OperandLayout& x4 = operand_layout(atom("ldmatrix_x4"), "dst");
  const OperandLayout& x4t = operand_layout(atom("ldmatrix_x4_trans"), "dst");
  EXPECT_EQ(x4.map(5, 2), Coord(9, 2));   // matrix 1, row 5/4, columns 2(5%4)
  EXPECT_EQ(x4t.map(5, 3), Coord(11, 1)); // matrix 1 transposed: row 2(5%4)+1, column 5/4
  EXPECT_EQ(x4.map(31, 7), Coord(31, 7));
}

TEST(MmaAtoms, LdmatrixDestinationLayoutsMatchThePtxIsa) {
  for (const auto& id : kLdmatrixIds) {
    const AtomDef& a = atom(id);
    const bool trans = id.find("trans") != std::string::npos;
    const int count = id.find("x4") != std::string::npos ? 4 : 2;
    EXPECT_EQ(a.kind, AtomKind::Copy);
    EXPECT_EQ(a.threads, 32);
    EXPECT_EQ(a.src, MemSpace::Shared);
    EXPECT_EQ(a.dst, MemSpace::Register);
    EXPECT_EQ(a.bytes, 4 * count);
    EXPECT_EQ(a.min_sm, 75);
    EXPECT_EQ(a.wrapper, "loom::" + id);
    EXPECT_EQ(a.ptx, "ldmatrix.sync.aligned.m8n8.x" + std::to_string(count) +
                         (trans ? ".trans" : "") + ".shared.b16");
    const OperandLayout& dst = operand_layout(a, "dst");
    ASSERT_EQ(dst.values_per_thread, 2 * count);
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < count; ++reg)
        for (int half = 0; half < 2; ++half) {
          // Register `reg` holds matrix `reg`: row lane/4, columns 2*(lane%4) + {0,1}.
          int row = lane / 4, col = 2 * (lane % 4) + half;
          if (trans) std::swap(row, col);
          ASSERT_EQ(dst.map(lane, 2 * reg + half), Coord(8 * reg + row, col))
              << id << " lane " << lane << " reg " << reg << " half " << half;
        }
  }
}

TEST(MmaAtoms, LdmatrixRowProvider) {
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(ldmatrix_row_provider(lane, 4), lane);
  EXPECT_EQ(ldmatrix_row_provider(15, 2), 15);
  EXPECT_EQ(ldmatrix_row_provider(20, 2), 4);
  EXPECT_EQ(ldmatrix_row_provider(31, 2), 15);
  EXPECT_EQ(ldmatrix_row_provider(13, 1), 5);
  EXPECT_THROW(ldmatrix_row_provider(0, 3), Error);
  EXPECT_THROW(ldmatrix_row_provider(32, 4), Error);
}

// Simulates ldmatrix on a tile whose element (r, c) has the value r*cols + c: lane
// `sr` (< 8*count) supplies the address of stacked row sr, which starts at starts[sr]
// and runs along the tile's rows (Row) or columns (Col). Returns, per (lane, value), the
// value delivered, to compare with the fragment's element.
int simulated_ldmatrix(const OperandLayout& dst, const std::vector<Coord>& starts, Major major,
                       int cols, int lane, int v) {
  auto [sr, sc] = dst.map(lane, v);
  Coord s = starts.at(sr);  // the PTX ISA: lane sr's address is row sr's
  Coord e = major == Major::Row ? Coord{s.first, s.second + sc} : Coord{s.first + sc, s.second};
  return e.first * cols + e.second;
}

void expect_ldmatrix_gives_fragment(const std::string& ldm, const std::string& mma,
                                    const std::string& operand, Major major,
                                    const std::vector<Coord>& want_starts) {
  SCOPED_TRACE(ldm + " -> " + mma + " " + operand);
  const OperandLayout& frag = operand_layout(atom(mma), operand.c_str());
  const OperandLayout& dst = operand_layout(atom(ldm), "dst");
  std::vector<Coord> starts = ldmatrix_row_starts(atom(ldm), frag, major);
  ASSERT_EQ(starts.size(), 32u);
  for (size_t lane = 0; lane < want_starts.size(); ++lane)
    EXPECT_EQ(starts[lane], want_starts[lane]) << "lane " << lane;
  for (int lane = 0; lane < 32; ++lane)
    for (int v = 0; v < frag.values_per_thread; ++v) {
      auto [r, c] = frag.map(lane, v);
      ASSERT_EQ(simulated_ldmatrix(dst, starts, major, frag.cols, lane, v), r * frag.cols + c)
          << "lane " << lane << " value " << v;
    }
}

TEST(MmaAtoms, LdmatrixX4OfARowMajorTileIsTheMmaAFragment) {
  // The HGEMM arrangement: lanes 0-7 rows 0-7 of columns 0-7, lanes 8-15 rows 8-15, lanes
  // 16-31 the same rows at column 8 (quadrants in the order of registers a0a1..a6a7).
  std::vector<Coord> want;
  for (int lane = 0; lane < 32; ++lane) want.push_back({lane % 16, (lane / 16) * 8});
  expect_ldmatrix_gives_fragment("ldmatrix_x4", "mma_m16n8k16_f32_f16", "A", Major::Row, want);
  expect_ldmatrix_gives_fragment("ldmatrix_x4", "mma_m16n8k16_f16_f16", "A", Major::Row, want);
}

TEST(MmaAtoms, LdmatrixX2TransOfARowMajorKxNTileIsTheMmaBFragment) {
  // B stored K x N row-major (rows of N contiguous): .trans turns its rows into the
  // column-per-group fragment; lanes 16-31 repeat lanes 0-15.
  std::vector<Coord> want;
  for (int lane = 0; lane < 32; ++lane) want.push_back({lane % 16, 0});
  expect_ldmatrix_gives_fragment("ldmatrix_x2_trans", "mma_m16n8k16_f32_bf16", "B", Major::Row,
                                 want);
}

TEST(MmaAtoms, LdmatrixX2OfAnNMajorBIsTheMmaBFragment) {
  // B stored N x K (the "B^T" / .col operand: K contiguous): no transpose needed.
  std::vector<Coord> want;
  for (int lane = 0; lane < 32; ++lane) want.push_back({((lane % 16) / 8) * 8, lane % 8});
  expect_ldmatrix_gives_fragment("ldmatrix_x2", "mma_m16n8k16_f32_f16", "B", Major::Col, want);
}

TEST(MmaAtoms, LdmatrixX4TransOfAColumnMajorAIsTheMmaAFragment) {
  std::vector<Coord> want;
  for (int lane = 0; lane < 32; ++lane)
    want.push_back({8 * ((lane / 8) & 1), lane % 8 + 8 * (lane / 16)});
  expect_ldmatrix_gives_fragment("ldmatrix_x4_trans", "mma_m16n8k16_f32_f16", "A", Major::Col,
                                 want);
}

TEST(MmaAtoms, LdmatrixRowStartsRejectsWhatTheInstructionCannotDo) {
  const OperandLayout& A = operand_layout(atom("mma_m16n8k16_f32_f16"), "A");
  const OperandLayout& B = operand_layout(atom("mma_m16n8k16_f32_f16"), "B");
  try {
    ldmatrix_row_starts(atom("ldmatrix_x2"), A, Major::Row);
    FAIL() << "x2 gives 4 values per thread; A has 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(".x4"), std::string::npos) << e.what();
  }
  // A row-major A through .trans: each register half would come from a different row.
  EXPECT_THROW(ldmatrix_row_starts(atom("ldmatrix_x4_trans"), A, Major::Row), Error);
  EXPECT_THROW(ldmatrix_row_starts(atom("ldmatrix_x4"), A, Major::Col), Error);
  // A row-major K x N B without .trans pairs the wrong elements.
  EXPECT_THROW(ldmatrix_row_starts(atom("ldmatrix_x2"), B, Major::Row), Error);
  // tf32 fragments hold one 32-bit element per register: not a b16 ldmatrix shape.
  EXPECT_THROW(ldmatrix_row_starts(atom("ldmatrix_x4"),
                                   operand_layout(atom("mma_m16n8k8_f32_tf32"), "A"), Major::Row),
               Error);
}

// The b32 view of ldmatrix (the same .b16 instruction on 32-bit data): register `reg` of
// lane l is word l%4 of row l/4 of matrix `reg` — the two halves the b16 layout gives the
// lane (columns 2(l%4), 2(l%4)+1 of 8) are exactly that word.
TEST(MmaAtoms, LdmatrixB32ViewIsTheB16LayoutOnWords) {
  for (int count : {4, 2}) {
    const std::string id = "ldmatrix_x" + std::to_string(count) + "_b32";
    SCOPED_TRACE(id);
    const AtomDef& a = atom(id);
    const AtomDef& b16 = atom("ldmatrix_x" + std::to_string(count));
    EXPECT_EQ(a.ptx, b16.ptx);
    EXPECT_EQ(a.bytes, b16.bytes);
    EXPECT_EQ(a.element_bytes, 4);
    EXPECT_EQ(b16.element_bytes, 2);
    EXPECT_EQ(a.wrapper, "loom::" + id);
    const OperandLayout& dst = operand_layout(a, "dst");
    const OperandLayout& half = operand_layout(b16, "dst");
    ASSERT_EQ(dst.values_per_thread, count);
    EXPECT_EQ(operand_layout(a, "src").cols, 4);
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < count; ++reg) {
        const Coord w = dst.map(lane, reg);
        EXPECT_EQ(w, Coord(8 * reg + lane / 4, lane % 4)) << "lane " << lane;
        // The b16 halves of the same register: one row, columns 2w and 2w + 1.
        EXPECT_EQ(half.map(lane, 2 * reg), Coord(w.first, 2 * w.second));
        EXPECT_EQ(half.map(lane, 2 * reg + 1), Coord(w.first, 2 * w.second + 1));
      }
  }
  EXPECT_EQ(find_atom("ldmatrix_x4_trans_b32"), nullptr);  // would split words
}

TEST(MmaAtoms, LdmatrixB32X4OfAKContiguousTileIsTheTf32AFragment) {
  // The article's As addressing: lanes 0-15 rows 0-15 at word 0, lanes 16-31 at word 4.
  std::vector<Coord> want;
  for (int lane = 0; lane < 32; ++lane) want.push_back({lane % 16, 4 * (lane / 16)});
  expect_ldmatrix_gives_fragment("ldmatrix_x4_b32", "mma_m16n8k8_f32_tf32", "A", Major::Row, want);
}

TEST(MmaAtoms, LdmatrixB32X2OfAnNByKTileIsTheTf32BFragment) {
  // B stored [N][K] (K contiguous): lane l < 16 addresses column l%8 from k = 4((l/8)%2).
  std::vector<Coord> want;
  for (int lane = 0; lane < 32; ++lane) want.push_back({4 * ((lane % 16) / 8), lane % 8});
  expect_ldmatrix_gives_fragment("ldmatrix_x2_b32", "mma_m16n8k8_f32_tf32", "B", Major::Col, want);
}

TEST(MmaAtoms, LdmatrixB32RefusesMContiguousAAndNContiguousB) {
  const AtomDef& tf32 = atom("mma_m16n8k8_f32_tf32");
  EXPECT_THROW(ldmatrix_row_starts(atom("ldmatrix_x4_b32"), operand_layout(tf32, "A"), Major::Col),
               Error);
  EXPECT_THROW(ldmatrix_row_starts(atom("ldmatrix_x2_b32"), operand_layout(tf32, "B"), Major::Row),
               Error);
  try {
    ldmatrix_row_starts(atom("ldmatrix_x2_b32"), operand_layout(tf32, "A"), Major::Row);
    FAIL() << "x2 gives 2 values per thread; A has 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the .x4 variant would match"), std::string::npos)
        << e.what();
  }
}

TEST(MmaAtoms, OperandLayoutNamesItsOperands) {
  try {
    operand_layout(atom("ldmatrix_x4"), "A");
    FAIL() << "ldmatrix has no A operand";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("src, dst"), std::string::npos) << e.what();
  }
}

TEST(MmaAtoms, VectorizerNeverPicksAWarpCollectiveCopy) {
  // ldmatrix_x4 moves 16 bytes per thread Shared -> Register, like ld.shared.v4, but
  // shuffles data across lanes: it must never stand in for a plain vector load.
  for (int bytes : {4, 8, 16, 32}) {
    const AtomDef* a = vector_copy_atom(MemSpace::Shared, MemSpace::Register, bytes);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->threads, 1) << a->id;
    EXPECT_EQ(a->id.rfind("ld_shared", 0), 0u) << a->id;
  }
}

TEST(MmaAtoms, IdsAreUnique) {
  std::set<std::string> ids;
  for (const auto& a : atom_table()) EXPECT_TRUE(ids.insert(a.id).second) << a.id;
}

}  // namespace
}  // namespace loom
