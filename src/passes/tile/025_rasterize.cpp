// t:025_rasterize — grouped CTA rasterization (GROUP_M).
//
// CTAs are scheduled roughly in launch order. Row-major order walks a whole row of N
// tiles before the next M tile, so the B column panels it streams are evicted from L2
// before the next row wants them again. Walking GROUP_M tiles down M before stepping
// along N keeps a GROUP_M-row band of A and the current B panel hot together.
//
// Steps, for each op whose grid nest ends in the `m_b`, `n_b` GRID loops:
//  1. Replace both by one GRID loop `tile in 0..num_m*num_n` (axis "tile"), so the
//     kernel's tile count sits on blockIdx.x (2^31-1 blocks, not y's 65535).
//  2. Bind the tile coordinates with Lets: group g = tile / (GROUP_M*num_n) covers M
//     tiles m_first = g*GROUP_M .. +m_rows, where m_rows = min(GROUP_M, num_m - m_first)
//     makes the last group shorter when GROUP_M does not divide num_m; inside a group
//     consecutive tiles go down M first (m_b = m_first + r % m_rows), then along N
//     (n_b = r / m_rows), with r = tile % (GROUP_M*num_n).
// GROUP_M=1 is the row-major order the two loops already give: no change. Runs after
// t:020 (which proves guards from m_b/n_b loop ranges a Let no longer states).
#include <set>

#include "passes/loop_rewrite.h"
#include "passes/passes.h"

namespace loom {
namespace {

void rasterize(TileOp& op, int64_t group, const std::vector<std::string>& symbols) {
  std::vector<Block*> holders;  // holders[i] holds grid loop i, alone
  for (Block* b = &op.body; b->size() == 1 && (*b)[0].kind == StmtKind::For &&
                            (*b)[0].tier == Tier::Grid;
       b = &(*b)[0].body)
    holders.push_back(b);
  if (holders.size() < 2) return;
  const Stmt lm = (*holders[holders.size() - 2])[0];
  const Stmt& ln = lm.body[0];

  std::set<std::string> taken(symbols.begin(), symbols.end());
  walk(op.body, [&](const Stmt& s) {
    if (!s.var.empty()) taken.insert(s.var);
  });
  const std::string axis = lm.axis.empty() ? lm.var : lm.axis;
  const std::string tile = fresh_name("tile", taken);
  const std::string first = fresh_name(axis + "_first", taken);
  const std::string rows = fresh_name(axis + "_rows", taken);

  Expr t = Expr::var(tile), per_group = Expr(group) * ln.extent;
  Expr r = t % per_group;
  Block body = {
      Stmt::Let(first, t / per_group * group),
      Stmt::Let(rows, min(Expr(group), lm.extent - Expr::var(first))),
      Stmt::Let(lm.var, Expr::var(first) + r % Expr::var(rows)),
      Stmt::Let(ln.var, r / Expr::var(rows)),
  };
  body.insert(body.end(), ln.body.begin(), ln.body.end());
  *holders[holders.size() - 2] = {Stmt::For(tile, lm.extent * ln.extent, LoopKind::Parallel,
                                            "tile", std::move(body), Tier::Grid)};
}

}  // namespace

Pass pass_rasterize() {
  return Pass{"t:025_rasterize", Level::Tile, Level::Tile,
              "with GROUP_M > 1 the m_b, n_b grid loops are one `tile` grid loop whose Lets "
              "walk GROUP_M tiles down M before stepping along N",
              {"GROUP_M"},
              [](CompileState& s) {
                int64_t group = s.knob("GROUP_M", 1);
                if (group == 1) return;
                for (auto& op : s.tile.ops) rasterize(op, group, s.tile.symbols);
              }};
}

}  // namespace loom
