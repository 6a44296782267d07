// t:020_simplify_guards — drop the bounds checks that the loop ranges prove true.
//
// A guard `e < X` is redundant when the largest value `e` takes over the enclosing
// loops' ranges is below the smallest value of X: with M = 4096 and BM = 64 the grid
// covers M exactly and `m_b * 64 + m_t * 4 + m_r < 4096` always holds. Symbolic sizes
// prove nothing, so their guards stay. Steps: split each If's condition into its
// conjuncts, keep those not proven, and inline the body when none is left.
#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

using Ranges = std::map<std::string, Expr::Range>;

bool proven(const Expr& term, const Ranges& r) {
  auto b = term.bounds(r);
  return b && b->lo == 1 && b->hi == 1;
}

void simplify(Block& b, Ranges& ranges) {
  for (size_t i = 0; i < b.size(); ++i) {
    Stmt& s = b[i];
    if (s.kind == StmtKind::For) {
      auto ext = s.extent.bounds(ranges);
      bool bounded = ext && ext->hi >= 1;
      if (bounded) ranges[s.var] = {0, ext->hi - 1};
      simplify(s.body, ranges);
      if (bounded) ranges.erase(s.var);
    } else if (s.kind == StmtKind::If) {
      simplify(s.body, ranges);
      std::vector<Expr> terms = conjuncts(s.cond), kept;
      for (const auto& t : terms)
        if (!proven(t, ranges)) kept.push_back(t);
      if (kept.empty()) {
        Block body = std::move(s.body);
        b.erase(b.begin() + long(i));
        b.insert(b.begin() + long(i), body.begin(), body.end());
        i += body.size() - 1;
      } else {
        Expr c = kept[0];
        for (size_t k = 1; k < kept.size(); ++k) c = c && kept[k];
        s.cond = c;
      }
    }
  }
}

}  // namespace

Pass pass_simplify_guards() {
  return Pass{"t:020_simplify_guards", Level::Tile, Level::Tile,
              "every remaining guard can fail for some block of the grid",
              {},
              [](CompileState& s) {
                for (auto& op : s.tile.ops) {
                  Ranges r;
                  simplify(op.body, r);
                }
              }};
}

}  // namespace loom
