// The Kernel IR description of ldmatrix (warp_copy) and lane_bits_expr, which turns the
// per-lane row starts of ldmatrix_row_starts into the index expression k:025 emits.
#include <gtest/gtest.h>

#include "atoms/atoms.h"
#include "ir/error.h"

namespace loom {
namespace {

TEST(WarpCopy, LdmatrixDeclarationsComeFromTheTable) {
  const WarpCopy x4 = warp_copy(atom("ldmatrix_x4"));
  EXPECT_EQ(x4.rows, 32);
  EXPECT_EQ(x4.cols, 8);
  EXPECT_EQ(x4.values, 8);
  // Stacked row r is read from lane r's address (lanes 0..31 each give one row).
  for (int r = 0; r < 32; ++r) EXPECT_EQ(x4.row_lane[size_t(r)], r);
  // Lane 5 (g = 1, t = 1): register 2 of the plain load is matrix 2, row 1, cols 2, 3.
  EXPECT_EQ(x4.dst[5 * 8 + 4], (std::pair<int, int>{17, 2}));
  EXPECT_EQ(x4.dst[5 * 8 + 5], (std::pair<int, int>{17, 3}));
  const WarpCopy x2t = warp_copy(atom("ldmatrix_x2_trans"));
  ASSERT_EQ(x2t.row_lane.size(), 16u);
  EXPECT_EQ(x2t.row_lane[15], 15);  // lanes 16..31 repeat rows; the lower lane is read
  EXPECT_EQ(x2t.dst[5 * 4 + 1], (std::pair<int, int>{3, 1}));  // .trans: (2t + 1, g)
  // The b32 view: 4 words per 16-byte row, one register per matrix.
  const WarpCopy b32 = warp_copy(atom("ldmatrix_x2_b32"));
  EXPECT_EQ(b32.element_bytes, 4);
  EXPECT_EQ(b32.rows, 16);
  EXPECT_EQ(b32.cols, 4);
  EXPECT_EQ(b32.values, 2);
  EXPECT_EQ(b32.dst[5 * 2 + 1], (std::pair<int, int>{9, 1}));  // matrix 1, row 5/4, word 5%4
  EXPECT_EQ(x4.element_bytes, 2);
  EXPECT_THROW(warp_copy(atom("mma_m16n8k16_f32_f16")), Error);
  EXPECT_THROW(warp_copy(atom("ld_shared_v4_b32")), Error);
}

int eval_lane(const Expr& e, int lane) { return int(e.eval({{"lane", lane}})); }

TEST(WarpCopy, LaneBitsExprWritesTheRowStartsOfEveryArrangement) {
  const Expr lane = Expr::var("lane");
  struct Arrangement { const char* id; const char* op; Major major; const char* row; const char* col; };
  for (const Arrangement& a : std::vector<Arrangement>{
           {"ldmatrix_x4", "A", Major::Row, "lane % 16", "lane / 16 * 8"},
           {"ldmatrix_x4_trans", "A", Major::Col, "lane / 8 % 2 * 8", "lane % 8 + lane / 16 * 8"},
           {"ldmatrix_x2_trans", "B", Major::Row, "lane % 16", "0"},
           {"ldmatrix_x2", "B", Major::Col, "lane / 8 % 2 * 8", "lane % 8"}}) {
    SCOPED_TRACE(a.id);
    const auto starts = ldmatrix_row_starts(atom(a.id), operand_layout(atom("mma_m16n8k16_f32_f16"), a.op), a.major);
    std::vector<int> rows, cols;
    for (const auto& [r, c] : starts) rows.push_back(r), cols.push_back(c);
    const Expr re = lane_bits_expr(rows, lane), ce = lane_bits_expr(cols, lane);
    EXPECT_EQ(re.str(), a.row);
    EXPECT_EQ(ce.str(), a.col);
    for (int l = 0; l < 32; ++l) {
      EXPECT_EQ(eval_lane(re, l), rows[size_t(l)]) << "lane " << l;
      EXPECT_EQ(eval_lane(ce, l), cols[size_t(l)]) << "lane " << l;
    }
  }
}

TEST(WarpCopy, LaneBitsExprRejectsTablesThatAreNotLinearInTheLaneBits) {
  std::vector<int> squares;
  for (int l = 0; l < 32; ++l) squares.push_back(l * l);
  try {
    lane_bits_expr(squares, Expr::var("lane"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lane 3 holds 9"), std::string::npos) << e.what();
  }
  EXPECT_THROW(lane_bits_expr({1, 2, 3}, Expr::var("lane")), Error);
}

}  // namespace
}  // namespace loom
