// t:050_multibuffer — give every staged slab a ring of STAGES buffers.
//
// With one buffer the next slab cannot be written while the current one is read, so
// loads and math serialize. A ring of S buffers indexed by k_o % S lets the copy of a
// later slab overlap the math on the current one (k:050_pipeline reorders the copies;
// this pass only makes the storage and indices ready, so the sequential Tile IR
// semantics are unchanged). Steps: prepend a dimension S to each staged shared tensor,
// set the copy's ring slot to `k_o % S` (k_o = the loop around the stage), and prepend
// the same slot to every load of that tensor in the stage's body. Under a persistent
// tile loop (t:027) the ring runs on across tiles: slot = (t_i * KO + k_o) % S, or with
// stream-K units (t:048) of varying length (ring_base + k_r) % S, ring_base the stages
// the CTA issued before the unit.
#include "ir/error.h"
#include "passes/passes.h"

namespace loom {
namespace {

// `outer`: the loop around the stage (k_o); `count`: the number of stages issued before
// this iteration of the loops above k_o (a persistent tile loop's t_i times the stages
// per tile), so the ring keeps turning across tiles: slot = (count + k_o) % S.
void ring(Block& b, TileProgram& p, int64_t S, const std::string& outer, const Expr& count) {
  for (auto& st : b) {
    if (st.kind == StmtKind::Stage) {
      Expr slot = (count + Expr::var(outer)) % S;
      for (auto& c : st.copies) {
        TensorDecl& t = p.tensor(c.shared);
        t.shape.insert(t.shape.begin(), Expr(S));
        c.shared_prefix.insert(c.shared_prefix.begin(), slot);
        walk(st.body, [&](Stmt& s) {
          if (s.kind == StmtKind::Load && s.tensor == c.shared) s.index.insert(s.index.begin(), slot);
        });
      }
      continue;
    }
    if (st.kind == StmtKind::For && st.axis == "persistent") {
      // Stream-K units (t:048) say how many stages the CTA issued before them.
      bool unit_base = false;
      for (const Stmt& x : st.body) unit_base |= x.kind == StmtKind::Let && x.var == "ring_base";
      if (unit_base) {
        ring(st.body, p, S, st.var, count + Expr::var("ring_base"));
        continue;
      }
      // The stage loop inside: its extent is the stages per tile.
      Expr per_tile = 0;
      walk(st.body, [&](const Stmt& x) {
        if (x.kind == StmtKind::For)
          for (const Stmt& y : x.body)
            if (y.kind == StmtKind::Stage) per_tile = x.extent;
      });
      ring(st.body, p, S, st.var, count + Expr::var(st.var) * per_tile);
      continue;
    }
    if (st.kind == StmtKind::For || st.kind == StmtKind::If)
      ring(st.body, p, S, st.kind == StmtKind::For ? st.var : outer, count);
  }
}

}  // namespace

Pass pass_multibuffer() {
  return Pass{"t:050_multibuffer", Level::Tile, Level::Tile,
              "staged slabs live in rings of STAGES buffers indexed by k_o % STAGES",
              {"STAGES"},
              [](CompileState& s) {
                int64_t S = s.knob("STAGES", 1);
                std::string mode = s.knobs.get_str("STAGE", "sync");
                if (mode == "sync" && S > 2)
                  throw Error("STAGES=" + std::to_string(S) +
                              " needs STAGE=cp_async or STAGE=tma: STAGE=sync double-buffers "
                              "through registers, so at most 2 buffers");
                if (S <= 1 || mode == "direct") return;
                for (auto& op : s.tile.ops) ring(op.body, s.tile, S, "", Expr(0));
              }};
}

}  // namespace loom
