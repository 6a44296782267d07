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
#include <set>

#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

struct RegLoop { std::string var; Expr extent; std::string axis; };

Block nest(const std::vector<RegLoop>& loops, Block body) {
  for (int i = int(loops.size()) - 1; i >= 0; --i)
    body = {Stmt::For(loops[i].var, loops[i].extent, LoopKind::Parallel, loops[i].axis,
                      std::move(body), Tier::Register)};
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
  const Stmt* inner = &holder[pos];
  for (size_t i = 1; i < regs.size(); ++i) inner = &inner->body[0];
  Block cell = inner->body;
  Expr guard(1);
  if (cell.size() == 1 && cell[0].kind == StmtKind::If) {
    guard = cell[0].cond;
    Block g = cell[0].body;
    cell = g;
  }
  if (cell.size() < 2 || cell[0].kind != StmtKind::Init || cell[1].kind != StmtKind::For ||
      cell[1].loop_kind != LoopKind::Reduce)
    return false;
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

void rewrite(Block& b) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].kind == StmtKind::For && b[i].tier == Tier::Register) {
      rewrite_cell(b, i);
      return;  // one register nest per op
    }
    if (b[i].kind == StmtKind::For || b[i].kind == StmtKind::If) rewrite(b[i].body);
  }
}

}  // namespace

Pass pass_register_tile() {
  return Pass{"t:030_register_tile", Level::Tile, Level::Tile,
              "the reduction runs once per thread over FM x FN register-array accumulators "
              "(outer product); operand loads are per row / per column",
              {"FM", "FN"},
              [](CompileState& s) {
                for (auto& op : s.tile.ops) rewrite(op.body);
              }};
}

}  // namespace loom
