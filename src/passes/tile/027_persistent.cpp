// t:027_persistent — persistent CTAs walk the output tiles (PERSISTENT=1).
//
// One CTA per output tile launches T CTAs; each pays its prologue (barrier setup, the
// first slabs' latency, the ring's fill) and the last wave runs partly empty. A
// persistent grid launches P = min(T, SMs) CTAs that stay resident and take tiles
// cta, cta + P, cta + 2P, ...: the prologue is paid once per SM, a tile's epilogue
// overlaps the next tile's first loads (the producer of a warp-specialized kernel runs
// ahead into the next tile), and the ring turns on across tiles (t:050).
//
// Steps, on an op whose grid nest ends in the rasterized `tile` loop (t:025; with
// GROUP_M=1 this pass first fuses the m_b, n_b loops into one, row-major):
//  1. The tile loop becomes `for cta in 0..P grid` (axis "tile", so k:010 binds it to
//     blockIdx.x).
//  2. Below the thread-tier loops (warpgroups, warps, threads: they stay outermost, one
//     set of threads serves every tile) the cell body is wrapped in
//     `for t_i in 0..(T - cta + P - 1) / P  # persistent` with `let tile = cta + t_i * P`
//     and the tile's coordinate Lets moved in after it.
//  3. Batch loops directly above the tiles (bmm's `b`, rank 4's `b0`, `b1`) fold into the
//     walk: `tile` becomes the linear (batch.., tile) work index over B x T, each batch
//     variable a Let of it and the tile's coordinate Lets read `tile % T`. A batch left as
//     a grid loop would launch B x P CTAs for P SMs, B waves of persistent CTAs that
//     contend for the SMs instead of one walk that fills them once; batch-major order
//     keeps consecutive CTAs on one batch's A and B slabs (L2 reuse, as GROUP_M does).
// Takes a symbolic tile count (run-time M, N: the grid min(T, SMs) is sized at launch);
// needs a constant batch count (a symbolic one is refused with the fix).
#include "ir/error.h"
#include "passes/passes.h"

namespace loom {
namespace {

// Loop IR names batch loops `b` (rank 3) or `b0`, `b1`, .. (rank 4 and up), l:000.
bool is_batch_axis(const std::string& axis) {
  if (axis.empty() || axis[0] != 'b') return false;
  for (size_t i = 1; i < axis.size(); ++i)
    if (axis[i] < '0' || axis[i] > '9') return false;
  return true;
}

void make_persistent(TileOp& op, int64_t sms) {
  // The grid nest; the last grid loop is the tiles.
  std::vector<Block*> holders;
  for (Block* b = &op.body; b->size() == 1 && (*b)[0].kind == StmtKind::For &&
                            (*b)[0].tier == Tier::Grid;
       b = &(*b)[0].body)
    holders.push_back(b);
  if (holders.empty()) throw Error("PERSISTENT=1: op '" + op.name + "' has no grid loops");
  Block& holder = *holders.back();
  Stmt tile_loop = holder[0];
  if (tile_loop.axis != "tile") {
    // GROUP_M=1: fuse m_b, n_b row-major.
    if (holders.size() < 2)
      throw Error("PERSISTENT=1: op '" + op.name + "' has one grid loop that is not the tiles");
    Block& outer = *holders[holders.size() - 2];
    const Stmt lm = outer[0];
    const Stmt& ln = lm.body[0];
    const Expr t = Expr::var("tile");
    Block body = {Stmt::Let(lm.var, t / ln.extent), Stmt::Let(ln.var, t % ln.extent)};
    body.insert(body.end(), ln.body.begin(), ln.body.end());
    outer = {Stmt::For("tile", lm.extent * ln.extent, LoopKind::Parallel, "tile", body,
                       Tier::Grid)};
    make_persistent(op, sms);
    return;
  }
  // T may be symbolic (a run-time M, N): the grid min(T, SMs) is then an expression the
  // launch evaluates from the sizes it is given, and the walk's trip count reads T in the
  // kernel (a size parameter), so one kernel serves every size.
  const Expr T = tile_loop.extent;
  // The batch loops right above the tiles, outermost first (step 3).
  size_t top = holders.size() - 1;
  while (top > 0 && is_batch_axis((*holders[top - 1])[0].axis)) --top;
  std::vector<Stmt> batch;
  Expr work = T;
  for (size_t i = top; i + 1 < holders.size(); ++i) {
    const Stmt& l = (*holders[i])[0];
    if (!l.extent.is_const())
      throw Error("PERSISTENT=1 walks batch entries and tiles together and needs a constant "
                  "batch count; " + op.name + "'s batch loop " + l.var + " runs to " +
                  l.extent.str() + ": bind the sizes (--dims) or use PERSISTENT=0");
    batch.push_back(l);
    work = work * l.extent;
  }
  const Expr P = min(work, Expr(sms));
  // The tile's Lets come first under the tile loop, then the thread tiers.
  Block lets, rest = tile_loop.body;
  while (!rest.empty() && rest.front().kind == StmtKind::Let) {
    lets.push_back(rest.front());
    rest.erase(rest.begin());
  }
  // Descend the thread tiers to the cell.
  Block* cell = &rest;
  while (cell->size() == 1 && (*cell)[0].kind == StmtKind::For &&
         ((*cell)[0].tier == Tier::Cluster || (*cell)[0].tier == Tier::Warpgroup ||
          (*cell)[0].tier == Tier::Warp || (*cell)[0].tier == Tier::Thread))
    cell = &(*cell)[0].body;
  const Expr cta = Expr::var("cta"), ti = Expr::var("t_i");
  Block inner = {Stmt::Let(tile_loop.var, cta + ti * P)};
  if (!batch.empty()) {
    // w = ((b0 * E1 + b1) ..) * T + tile: innermost batch loop first.
    const Expr w = Expr::var(tile_loop.var);
    Expr rest_w = w / T;
    for (size_t i = batch.size(); i-- > 0;) {
      const int64_t e = batch[i].extent.const_value();
      inner.push_back(Stmt::Let(batch[i].var, i == 0 ? rest_w : rest_w % e));
      rest_w = rest_w / e;
    }
    Block in_tile = lets;
    substitute_block(in_tile, {{tile_loop.var, w % T}});
    lets = in_tile;
  }
  inner.insert(inner.end(), lets.begin(), lets.end());
  inner.insert(inner.end(), cell->begin(), cell->end());
  *cell = {Stmt::For("t_i", (work - cta + P - 1) / P, LoopKind::Parallel, "persistent", inner)};
  *holders[top] = {Stmt::For("cta", P, LoopKind::Parallel, "tile", rest, Tier::Grid)};
}

}  // namespace

Pass pass_persistent() {
  return Pass{"t:027_persistent", Level::Tile, Level::Tile,
              "with PERSISTENT=1 the grid is min(units, SMs) CTAs, each looping over units "
              "cta, cta + P, ... below its thread tiers; a unit is a tile of one batch entry",
              {"PERSISTENT", "PERSISTENT_CTAS"},
              [](CompileState& s) {
                if (s.knob("PERSISTENT", 0) == 0) return;
                if (s.target.sm_count < 1)
                  throw Error("PERSISTENT=1 sizes the grid by the GPU's SM count, and the target "
                              "has none (compile for a probed GPU, or --target with an SM count)");
                // A cluster occupies CLUSTER_M x CLUSTER_N SMs: that many fewer persistent
                // steps, and the SMs left over by whole clusters stay idle (132 SMs hold
                // 16 clusters of 8).
                // PERSISTENT_CTAS caps the CTAs resident at once below the SM count (a GPC
                // whose free SMs do not pair up holds fewer clusters than SMs / 2).
                const int64_t per = std::max<int64_t>(1, s.knobs.get_int("CLUSTER_M", 1)) *
                                    std::max<int64_t>(1, s.knobs.get_int("CLUSTER_N", 1));
                int64_t ctas = s.knob("PERSISTENT_CTAS", 0);
                if (ctas == 0) ctas = std::max<int64_t>(per, s.target.sm_count / per * per);
                if (ctas < per || ctas % per != 0)
                  throw Error("PERSISTENT_CTAS=" + std::to_string(ctas) + " must be a positive "
                              "multiple of the cluster's CLUSTER_M x CLUSTER_N = " +
                              std::to_string(per) + " CTAs");
                for (auto& op : s.tile.ops) make_persistent(op, ctas / per);
              }};
}

}  // namespace loom
