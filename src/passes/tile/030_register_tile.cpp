// t:030_register_tile — outer-product accumulation over the REGISTER tier.
//
// After partitioning, each of a thread's FM x FN cells runs its own reduction, loading
// A and B once per cell and multiply-add: 2 loads per FMA. Moving the reduction loop
// outside the register loops makes the cell grid an outer product: per step k a
// thread loads FM values of A and FN of B into register arrays and issues FM*FN FMAs —
// (FM + FN) loads per FM*FN FMAs, the article's biggest single lever.
//
// Steps, for every cell nest `for m_r, n_r REGISTER: [if guard:] acc = 0; for k reduce
// {...}; epilogue`:
//  1. acc becomes a register array acc[FM, FN], zeroed in its own register nest.
//  2. In the reduction body, a load whose index uses only some register variables is
//     hoisted into a nest over just those (a[m_r], b[n_r]) and predicated by the guard
//     conjuncts over the same variables (out-of-range rows read 0 instead of memory).
//     The remaining statements (multiply, accumulate) run in the full register nest
//     and refer to array elements.
//  3. The epilogue runs in its own register nest under the original guard.
// An op whose cell does not have that shape (an unfused elementwise op) is left alone.
//
// With an mma atom (ATOM=mma_*, t:010 put ATOM loops m_e, n_e under the REGISTER loops
// m_a, n_a) the cell nest is a warp's FM x FN atoms of AM x AN cells, and the rewrite
// keeps each atom's cells together so that k:025 can hand them to one mma.sync:
//  1. acc[FM, FN, AM, AN] (a warp's accumulators; Tile IR runs one warp's iteration
//     sequentially), zeroed over (m_a, n_a, m_e, n_e).
//  2. The reduction steps by whole atoms, k = k_a*AK + k_e: per k_a, A is loaded into
//     in0[FM, AM, AK] over (m_a, m_e, k_e) and B into in1[FN, AK, AN] over (n_a, k_e,
//     n_e) — each an atom operand tile, rows and columns as the atom's A (M x K) and
//     B (K x N) — predicated by their guard conjuncts and, when K is not a multiple of
//     AK, by k < K.
//  3. The multiply-accumulate runs in an ATOM nest over (m_e, n_e, k_e) inside the
//     REGISTER loops (m_a, n_a): one atom per (m_a, n_a).
//  4. The epilogue runs over (m_a, n_a, m_e, n_e) under the original guard.
#include <set>

#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/mma_choice.h"
#include "passes/passes.h"

namespace loom {
namespace {

struct RegLoop {
  std::string var;
  Expr extent;
  std::string axis;
  Tier tier = Tier::Register;
  LoopKind kind = LoopKind::Parallel;
};

Block nest(const std::vector<RegLoop>& loops, Block body) {
  for (int i = int(loops.size()) - 1; i >= 0; --i)
    body = {Stmt::For(loops[i].var, loops[i].extent, loops[i].kind, loops[i].axis,
                      std::move(body), loops[i].tier)};
  return body;
}

std::set<std::string> vars_of(const std::vector<Expr>& es) {
  std::set<std::string> v;
  for (const auto& e : es) e.collect_vars(v);
  return v;
}

// Array index of each renamed value.
using Arrays = std::map<std::string, std::vector<Expr>>;

void index_operands(Block& b, const Arrays& arrays) {
  walk(b, [&](Stmt& s) {
    for (auto& a : s.args) {
      auto it = arrays.find(a.name);
      if (!a.is_imm() && a.index.empty() && it != arrays.end()) a.index = it->second;
    }
  });
}

// The cell under a nest of `depth` loops at holder[pos]: the innermost body, with its
// guard peeled off when it is one If (guard 1 otherwise).
struct Cell {
  Block body;
  Expr guard = Expr(1);
};
Cell cell_under(const Block& holder, size_t pos, size_t depth) {
  const Stmt* inner = &holder[pos];
  for (size_t i = 1; i < depth; ++i) inner = &inner->body[0];
  Cell c{inner->body};
  if (c.body.size() == 1 && c.body[0].kind == StmtKind::If) {
    c.guard = c.body[0].cond;
    Block g = c.body[0].body;
    c.body = g;
  }
  return c;
}

// `acc = 0; for k reduce {...}; epilogue`: the shape both rewrites expect.
bool init_reduce_epilogue(const Block& cell) {
  return cell.size() >= 2 && cell[0].kind == StmtKind::Init && cell[1].kind == StmtKind::For &&
         cell[1].loop_kind == LoopKind::Reduce;
}

// Rewrites the block holding a register nest; returns false when the shape differs.
bool rewrite_cell(Block& holder, size_t pos) {
  std::vector<RegLoop> regs;
  const Stmt* s = &holder[pos];
  while (s->kind == StmtKind::For && s->tier == Tier::Register) {
    regs.push_back({s->var, s->extent, s->axis});
    if (s->body.size() != 1) break;
    s = &s->body[0];
  }
  if (regs.empty()) return false;
  // The innermost register loop's body is the cell, possibly under one guard.
  auto [cell, guard] = cell_under(holder, pos, regs.size());
  if (!init_reduce_epilogue(cell)) return false;
  for (const auto& r : regs)
    if (!r.extent.is_const()) return false;

  std::vector<Expr> reg_idx;
  std::set<std::string> reg_names;
  for (const auto& r : regs) {
    reg_idx.push_back(Expr::var(r.var));
    reg_names.insert(r.var);
  }
  std::vector<Expr> guard_terms;
  if (!(guard.is_const() && guard.const_value() == 1)) guard_terms = conjuncts(guard);

  const Stmt& init = cell[0];
  const Stmt& red = cell[1];
  Arrays arrays{{init.dst, reg_idx}};
  Block out;
  std::vector<Expr> ext;
  for (const auto& r : regs) ext.push_back(r.extent);
  out.push_back(Stmt::Alloc(init.dst, ext));
  Stmt zero = init;
  zero.dst_index = reg_idx;
  out.push_back(nest(regs, {zero})[0]);

  // 2: split the reduction body into hoisted loads and the per-cell remainder.
  Block kbody, per_cell;
  for (const Stmt& st : red.body) {
    std::set<std::string> used = vars_of(st.index);
    std::vector<RegLoop> sub;
    for (const auto& r : regs)
      if (used.count(r.var)) sub.push_back(r);
    if (st.kind != StmtKind::Load || sub.size() == regs.size()) {
      // A load that depends on every register variable stays per cell; outside the
      // guard now, it is predicated by all of it.
      Stmt keep = st;
      if (st.kind == StmtKind::Load && !guard_terms.empty()) keep.pred = keep.pred && guard;
      per_cell.push_back(keep);
      continue;
    }
    Stmt ld = st;
    std::vector<Expr> idx, sub_ext;
    std::set<std::string> sub_names;
    for (const auto& r : sub) {
      idx.push_back(Expr::var(r.var));
      sub_ext.push_back(r.extent);
      sub_names.insert(r.var);
    }
    Expr pred(1);
    for (const auto& t : guard_terms) {
      std::set<std::string> tv;
      t.collect_vars(tv);
      bool mentions_sub = false, only_sub = true;
      for (const auto& v : tv)
        if (reg_names.count(v)) {
          if (sub_names.count(v)) mentions_sub = true;
          else only_sub = false;
        }
      if (mentions_sub && only_sub) pred = pred && t;
    }
    ld.pred = pred;
    if (sub.empty()) {
      kbody.push_back(ld);
    } else {
      ld.dst_index = idx;
      arrays[ld.dst] = idx;
      kbody.push_back(Stmt::Alloc(ld.dst, sub_ext));
      kbody.push_back(nest(sub, {ld})[0]);
    }
  }
  for (auto& st : per_cell)
    if (st.kind == StmtKind::Accum && st.dst == init.dst) st.dst_index = reg_idx;
  index_operands(per_cell, arrays);
  Block cellnest = nest(regs, per_cell);
  kbody.insert(kbody.end(), cellnest.begin(), cellnest.end());
  Stmt newred = Stmt::For(red.var, red.extent, red.loop_kind, red.axis, kbody, red.tier);
  out.push_back(newred);

  // 3: epilogue.
  Block epi(cell.begin() + 2, cell.end());
  index_operands(epi, {{init.dst, reg_idx}});
  if (!guard_terms.empty()) epi = {Stmt::If(guard, epi)};
  Block epinest = nest(regs, epi);
  out.insert(out.end(), epinest.begin(), epinest.end());

  holder.erase(holder.begin() + long(pos));
  holder.insert(holder.begin() + long(pos), out.begin(), out.end());
  return true;
}

// The guard's conjuncts that mention some of `vars` and no other cell variable.
Expr guard_over(const std::vector<Expr>& terms, const std::set<std::string>& cell_vars,
                const std::set<std::string>& vars) {
  Expr pred(1);
  for (const auto& t : terms) {
    std::set<std::string> tv;
    t.collect_vars(tv);
    bool mentions = false, only = true;
    for (const auto& v : tv)
      if (cell_vars.count(v)) {
        if (vars.count(v)) mentions = true;
        else only = false;
      }
    if (mentions && only) pred = pred && t;
  }
  return pred;
}

// The mma form (steps in the header). `regs` = m_a, n_a (REGISTER) then m_e, n_e (ATOM).
bool rewrite_mma_cell(Block& holder, size_t pos, const std::vector<RegLoop>& regs, int64_t AK) {
  std::vector<RegLoop> R, E;
  for (const auto& r : regs) (r.tier == Tier::Atom ? E : R).push_back(r);
  if (E.size() != 2 || R.size() != 2)
    throw Error("t:030_register_tile: an mma cell needs REGISTER loops m_a, n_a around ATOM "
                "loops m_e, n_e (t:010 with ATOM=mma_*), found " + std::to_string(R.size()) +
                " and " + std::to_string(E.size()));
  auto [cell, guard] = cell_under(holder, pos, regs.size());
  if (!init_reduce_epilogue(cell))
    throw Error("t:030_register_tile: an mma cell must be `acc = 0; for k reduce {...}; "
                "epilogue`; this op's is not (is it a contraction?)");
  std::vector<Expr> guard_terms;
  if (!(guard.is_const() && guard.const_value() == 1)) guard_terms = conjuncts(guard);
  std::set<std::string> cell_vars;
  std::vector<Expr> acc_idx, acc_ext;
  for (const auto& r : regs) {
    cell_vars.insert(r.var);
    acc_idx.push_back(Expr::var(r.var));
    acc_ext.push_back(r.extent);
  }
  const Stmt& init = cell[0];
  const Stmt& red = cell[1];

  // 1: accumulators.
  Block out;
  out.push_back(Stmt::Alloc(init.dst, acc_ext));
  Stmt zero = init;
  zero.dst_index = acc_idx;
  out.push_back(nest(regs, {zero})[0]);

  // 2: operand tiles per whole atom step.
  const std::string ka = red.var + "_a", ke = red.var + "_e";
  Expr k_of = Expr::var(ka) * AK + Expr::var(ke);
  Block body = red.body;
  substitute_block(body, {{red.var, k_of}});
  Expr k_tail(1);
  if (!(red.extent.is_const() && red.extent.const_value() % AK == 0)) k_tail = k_of < red.extent;
  const RegLoop ke_loop{ke, Expr(AK), red.axis, Tier::Atom, LoopKind::Parallel};
  Arrays arrays{{init.dst, acc_idx}};
  Block kbody, per_cell;
  for (const Stmt& st : body) {
    if (st.kind != StmtKind::Load) {
      per_cell.push_back(st);
      continue;
    }
    std::set<std::string> used = vars_of(st.index);
    std::vector<RegLoop> sub;
    std::set<std::string> sub_names;
    for (const auto& r : R)
      if (used.count(r.var)) sub.push_back(r), sub_names.insert(r.var);
    const bool rows = used.count(E[0].var), cols = used.count(E[1].var);
    if (rows == cols)
      throw Error("t:030_register_tile: the load `" + st.tensor + "` in the reduction uses " +
                  (rows ? "both" : "neither") + " of the atom's m and n cells, so it is not "
                  "an mma operand (A varies with m, B with n)");
    // A (M x K) is in0[.., m_e, k_e]; B (K x N) is in1[.., k_e, n_e].
    const RegLoop& e = rows ? E[0] : E[1];
    sub_names.insert(e.var);
    if (rows) sub.push_back(e), sub.push_back(ke_loop);
    else sub.push_back(ke_loop), sub.push_back(e);
    Stmt ld = st;
    ld.pred = guard_over(guard_terms, cell_vars, sub_names) && k_tail;
    std::vector<Expr> idx, ext;
    for (const auto& r : sub) idx.push_back(Expr::var(r.var)), ext.push_back(r.extent);
    ld.dst_index = idx;
    arrays[ld.dst] = idx;
    kbody.push_back(Stmt::Alloc(ld.dst, ext));
    kbody.push_back(nest(sub, {ld})[0]);
  }
  // 3: the atoms' multiply-accumulate.
  for (auto& st : per_cell)
    if (st.kind == StmtKind::Accum && st.dst == init.dst) st.dst_index = acc_idx;
  index_operands(per_cell, arrays);
  std::vector<RegLoop> mac = regs;
  mac.push_back({ke, Expr(AK), red.axis, Tier::Atom, LoopKind::Reduce});
  Block macnest = nest(mac, per_cell);
  kbody.insert(kbody.end(), macnest.begin(), macnest.end());
  out.push_back(Stmt::For(ka, ceil_div(red.extent, AK), LoopKind::Reduce, red.axis, kbody,
                          red.tier));

  // 4: epilogue.
  Block epi(cell.begin() + 2, cell.end());
  index_operands(epi, {{init.dst, acc_idx}});
  if (!guard_terms.empty()) epi = {Stmt::If(guard, epi)};
  Block epinest = nest(regs, epi);
  out.insert(out.end(), epinest.begin(), epinest.end());

  holder.erase(holder.begin() + long(pos));
  holder.insert(holder.begin() + long(pos), out.begin(), out.end());
  return true;
}

void rewrite(Block& b, int64_t AK) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].kind == StmtKind::For && b[i].tier == Tier::Register) {
      std::vector<RegLoop> regs;
      bool atoms = false;
      for (const Stmt* s = &b[i];
           s->kind == StmtKind::For && (s->tier == Tier::Register || s->tier == Tier::Atom);
           s = &s->body[0]) {
        regs.push_back({s->var, s->extent, s->axis, s->tier});
        atoms |= s->tier == Tier::Atom;
        if (s->body.size() != 1) break;
      }
      if (atoms) rewrite_mma_cell(b, i, regs, AK);
      else rewrite_cell(b, i);
      return;  // one register nest per op
    }
    if (b[i].kind == StmtKind::For || b[i].kind == StmtKind::If) rewrite(b[i].body, AK);
  }
}

}  // namespace

Pass pass_register_tile() {
  return Pass{"t:030_register_tile", Level::Tile, Level::Tile,
              "the reduction runs once per thread over FM x FN register-array accumulators "
              "(outer product); operand loads are per row / per column",
              {"FM", "FN", "ATOM"},
              [](CompileState& s) {
                const AtomDef* mma = chosen_mma(s);
                for (auto& op : s.tile.ops) rewrite(op.body, mma ? mma->k : 1);
              }};
}

}  // namespace loom
