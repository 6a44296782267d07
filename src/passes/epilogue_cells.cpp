// The cells of an epilogue (epilogue_cells.h). Steps:
//  1. The epilogue is what follows the kernel's last top-level statement holding a
//     reduction and the cp.async waits that drain it. Its stores must write one global
//     tensor, never atomically; its loops have constant extents.
//  2. Each store's flat offset is expanded into monomials (coefficient x sizes x one
//     opaque factor such as `lane / 4`). Terms of blockIdx and the sizes alone are the
//     block's; terms of threadIdx and the epilogue's loops are the cell's. A term goes
//     to the row when the row stride N divides its coefficient, else to the column; but
//     where the store sits under a bounds guard `col < N` (`row < M`), that guard's own
//     terms are the column (row), which settles tiles wider than the output (BN > N,
//     where a column step such as `n_w * 16` is a multiple of N = 16) and M == N.
//  3. offset == base + row * N + col is checked at random points, the stores' block
//     origins must agree, and every thread and loop iteration is enumerated: the cells
//     must tile [0, rows) x [0, cols) exactly once. Anything else is refused, never
//     guessed.
#include "passes/epilogue_cells.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "passes/analysis.h"

namespace loom {
namespace {

// ---- index expressions as sums of monomials ----

// `coef * syms... * atom`: a constant, problem-size symbols and one non-symbolic factor
// (a loop or let variable, or an opaque `lane / 4`); atom 1 for a pure coefficient.
struct Mono {
  int64_t coef = 1;
  std::vector<std::string> syms;  // sorted
  Expr atom = Expr(1);
  bool is_const() const { return syms.empty() && atom.is_const(); }
  bool same_as(const Mono& o) const {
    return coef == o.coef && syms == o.syms && atom.same_as(o.atom);
  }
};

std::vector<Mono> expand(const Expr& e, const std::set<std::string>& symbols) {
  switch (e.kind()) {
    case Expr::Kind::Const: return {Mono{e.const_value(), {}, Expr(1)}};
    case Expr::Kind::Var:
      if (symbols.count(e.var_name())) return {Mono{1, {e.var_name()}, Expr(1)}};
      return {Mono{1, {}, e}};
    case Expr::Kind::Add:
    case Expr::Kind::Sub: {
      std::vector<Mono> out = expand(e.lhs(), symbols), rhs = expand(e.rhs(), symbols);
      for (Mono& m : rhs) {
        if (e.kind() == Expr::Kind::Sub) m.coef = -m.coef;
        out.push_back(m);
      }
      return out;
    }
    case Expr::Kind::Mul: {
      std::vector<Mono> out;
      for (const Mono& a : expand(e.lhs(), symbols))
        for (const Mono& b : expand(e.rhs(), symbols)) {
          Mono m{a.coef * b.coef, a.syms, Expr(1)};
          m.syms.insert(m.syms.end(), b.syms.begin(), b.syms.end());
          std::sort(m.syms.begin(), m.syms.end());
          m.atom = a.atom.is_const() ? b.atom : b.atom.is_const() ? a.atom : a.atom * b.atom;
          out.push_back(m);
        }
      return out;
    }
    default: return {Mono{1, {}, e}};
  }
}

Expr rebuild(const std::vector<Mono>& ms, int64_t constant = 0) {
  Expr e = 0;
  for (const Mono& m : ms) {
    Expr t = m.atom * m.coef;
    for (const std::string& s : m.syms) t = t * Expr::var(s);
    e = e + t;
  }
  return e + constant;
}

// `m / d` when d (a stride: coefficient and symbols, no atom) divides it.
std::optional<Mono> divide(const Mono& m, const Mono& d) {
  if (d.coef == 0 || m.coef % d.coef != 0) return std::nullopt;
  Mono q{m.coef / d.coef, m.syms, m.atom};
  for (const std::string& s : d.syms) {
    auto it = std::find(q.syms.begin(), q.syms.end(), s);
    if (it == q.syms.end()) return std::nullopt;
    q.syms.erase(it);
  }
  return q;
}

class CellFinder {
 public:
  CellFinder(const KernelProgram& p, KernelOp& k) : p_(p), k_(k) {
    for (const std::string& sym : p_.symbols) symbols_.insert(sym);
  }

  EpilogueCells run() {
    Block& body = k_.body;
    c_.mainloop_end = mainloop_end();
    size_t& start = c_.start;
    start = c_.mainloop_end;
    while (start < body.size() && body[start].kind == StmtKind::AsyncWait) ++start;
    block_vars_ = {"blockIdx.x", "blockIdx.y", "blockIdx.z"};
    for (size_t i = 0; i < start; ++i)
      if (body[i].kind == StmtKind::Let) {
        c_.top_lets.push_back(body[i]);
        note_let(body[i]);
      }
    Block tail;
    for (size_t i = start; i < body.size(); ++i) {
      if (body[i].kind == StmtKind::Let) {
        tail.push_back(body[i]);
        note_let(body[i]);
        continue;
      }
      collect(body[i], {}, {}, tail);
    }
    if (c_.stores.empty()) {
      // A persistent kernel's stores sit inside its tile loop, before the mainloop's end
      // as this walk sees it: say that, not "stores nothing".
      // So does a warp-specialized kernel's, inside the consumers' arm.
      bool earlier = false, specialized = false;
      for (size_t i = 0; i < start && !earlier; ++i) {
        earlier = writes_global(body[i]);
        specialized |= earlier && body[i].kind == StmtKind::Specialize;
      }
      if (specialized)
        throw EpilogueRefusal{"its stores sit inside the consumer warpgroups' arm of a "
                              "warp-specialized kernel (WARP_SPECIALIZE=1), which the staged "
                              "epilogue does not enter",
                              "use EPILOGUE=direct (or tma_store) with WARP_SPECIALIZE=1, or "
                              "WARP_SPECIALIZE=0"};
      if (earlier)
        throw EpilogueRefusal{"its stores sit inside the persistent tile loop (PERSISTENT=1), "
                              "which the staged epilogue does not enter",
                              "use EPILOGUE=tma_store (or direct) with PERSISTENT=1, or PERSISTENT=0"};
      throw EpilogueRefusal{"its epilogue stores nothing"};
    }
    c_.out = &p_.tensor(c_.stores[0].store->tensor);
    for (EpilogueStore& site : c_.stores) analyze(site);
    check_common_origin();
    tile_extents();
    return c_;
  }

 private:
  bool writes_global(const Stmt& s) const {
    if (s.kind == StmtKind::Write && p_.tensor(s.tensor).role != TensorRole::Shared) return true;
    return std::any_of(s.body.begin(), s.body.end(), [&](const Stmt& c) { return writes_global(c); });
  }

  static bool holds_reduction(const Stmt& s) {
    if (s.kind == StmtKind::For && s.loop_kind == LoopKind::Reduce) return true;
    return std::any_of(s.body.begin(), s.body.end(), holds_reduction);
  }

  // Step 1: one past the last top-level statement that holds a reduction.
  size_t mainloop_end() const {
    size_t end = 0;
    for (size_t i = 0; i < k_.body.size(); ++i)
      if (holds_reduction(k_.body[i])) end = i + 1;
    if (end == 0) throw EpilogueRefusal{"it has no reduction loop"};
    return end;
  }

  // A variable is the block's when it derives from blockIdx alone (with the sizes);
  // threadIdx, the epilogue's loops and everything derived from them are the thread's.
  bool thread_var(const std::string& v) const { return !block_vars_.count(v) && !symbols_.count(v); }
  bool uses_thread(const Expr& e) const {
    std::set<std::string> vars;
    e.collect_vars(vars);
    return std::any_of(vars.begin(), vars.end(), [&](const std::string& v) { return thread_var(v); });
  }
  bool thread_only(const Expr& e) const {
    std::set<std::string> vars;
    e.collect_vars(vars);
    return std::all_of(vars.begin(), vars.end(), [&](const std::string& v) { return thread_var(v); });
  }
  void note_let(const Stmt& let) {
    std::set<std::string> vars;
    let.value.collect_vars(vars);
    const bool block = std::any_of(vars.begin(), vars.end(), [&](const std::string& v) {
      return block_vars_.count(v) != 0;
    });
    if (block && !uses_thread(let.value)) block_vars_.insert(let.var);
  }

  void collect_block(Block& b, const std::vector<std::pair<std::string, int64_t>>& loops,
                     const std::vector<Expr>& conds, Block lets) {
    for (Stmt& s : b) {
      if (s.kind == StmtKind::Let) {
        lets.push_back(s);
        note_let(s);
        continue;
      }
      collect(s, loops, conds, lets);
    }
  }

  void collect(Stmt& s, std::vector<std::pair<std::string, int64_t>> loops,
               std::vector<Expr> conds, const Block& lets) {
    switch (s.kind) {
      case StmtKind::For:
        if (!s.extent.is_const())
          throw EpilogueRefusal{"its epilogue loop " + s.var + " has the symbolic extent " + s.extent.str()};
        loops.push_back({s.var, s.extent.const_value()});
        break;
      case StmtKind::If:
        for (const Expr& c : conjuncts(s.cond)) conds.push_back(c);
        break;
      case StmtKind::Write: {
        const TensorDecl& t = p_.tensor(s.tensor);
        if (t.role == TensorRole::Shared) throw EpilogueRefusal{"its epilogue writes shared memory"};
        if (s.atomic_add)
          throw EpilogueRefusal{"it adds its results into " + s.tensor + " atomically (split-K's atomic "
                        "combine), which a staged copy cannot do",
                        "use SPLITK_MODE=reduce, or EPILOGUE=direct"};
        if (!c_.stores.empty() && c_.stores[0].store->tensor != s.tensor)
          throw EpilogueRefusal{"its epilogue writes two tensors, " + c_.stores[0].store->tensor + " and " +
                        s.tensor};
        EpilogueStore site;
        site.store = &s;
        site.loops = loops;
        site.conds = conds;
        site.lets = lets;
        c_.stores.push_back(site);
        return;
      }
      case StmtKind::Barrier:
      case StmtKind::AsyncCopy:
      case StmtKind::TmaLoad:
      case StmtKind::Atom:
        throw EpilogueRefusal{"its epilogue holds a barrier, a copy or an atom"};
      default: return;
    }
    collect_block(s.body, loops, conds, lets);
  }

  // The stride of dimension `d` of the output as one monomial.
  Mono stride(size_t d) const {
    std::vector<Mono> m = expand(c_.out->strides()[d], symbols_);
    if (m.size() != 1 || !m[0].atom.is_const())
      throw EpilogueRefusal{"the stride of " + c_.out->name + " is not a product of sizes"};
    return m[0];
  }

  // One term of a store's offset: not yet placed, part of the cell's row or column, or
  // part of the block's row or column origin (which a guard names).
  enum class Role { Free, Cell, Block };
  struct Term {
    Mono m;
    Role role = Role::Free;
  };

  // Places, for each term of `index` (a guard's left side), a free term of `terms` equal
  // to it (through `key`: the term itself, or its quotient by the row stride), and sorts
  // them into the block's and the cell's; sums the constants. False (nothing placed)
  // when some term has no match: then `index` is not this coordinate of the store.
  template <class Key>
  bool match(const Expr& index, std::vector<Term>& terms, Key key, std::vector<Mono>& block,
             std::vector<Mono>& cell, int64_t& constant) const {
    std::vector<std::pair<size_t, Role>> hits;
    std::vector<Mono> b, c;
    int64_t k = 0;
    for (const Mono& want : expand(index, symbols_)) {
      if (want.is_const()) {
        k += want.coef;
        continue;
      }
      size_t i = 0;
      for (; i < terms.size(); ++i) {
        if (terms[i].role != Role::Free ||
            std::any_of(hits.begin(), hits.end(), [&](const auto& h) { return h.first == i; }))
          continue;
        std::optional<Mono> got = key(terms[i].m);
        if (got && got->same_as(want)) break;
      }
      if (i == terms.size()) return false;
      const bool thread = uses_thread(want.atom);
      hits.push_back({i, thread ? Role::Cell : Role::Block});
      (thread ? c : b).push_back(want);
    }
    for (const auto& [i, role] : hits) terms[i].role = role;
    block.insert(block.end(), b.begin(), b.end());
    cell.insert(cell.end(), c.begin(), c.end());
    constant += k;
    return true;
  }

  // Step 2 for one store: offset = base + row * N + col.
  void analyze(EpilogueStore& site) {
    const Stmt& w = *site.store;
    const size_t rank = c_.out->shape.size();
    if (rank < 2) throw EpilogueRefusal{c_.out->name + " has fewer than two dimensions"};
    const Expr& rows = c_.out->shape[rank - 2];
    const Expr& cols = c_.out->shape[rank - 1];
    for (const Expr& c : site.conds)
      if (!(c.kind() == Expr::Kind::Lt && (c.rhs().same_as(rows) || c.rhs().same_as(cols))))
        throw EpilogueRefusal{"its store is guarded by " + c.str() + ", not by row < " + rows.str() +
                      " or column < " + cols.str()};
    const Expr offset = w.index.at(0);
    std::vector<Term> terms;
    int64_t constant = 0;
    for (const Mono& m : expand(offset, symbols_)) {
      // Loom's indices are sums of non-negative terms; the split relies on it.
      if (m.coef < 0) throw EpilogueRefusal{"its offset " + offset.str() + " subtracts"};
      if (uses_thread(m.atom) && !thread_only(m.atom))
        throw EpilogueRefusal{"the term " + rebuild({m}).str() + " of its offset mixes the block's "
                      "and the thread's variables"};
      if (m.is_const()) constant += m.coef;
      else terms.push_back(Term{m});
    }
    const Mono n = stride(rank - 2);
    const Expr n_expr = c_.out->strides()[rank - 2];
    auto itself = [](const Mono& m) { return std::optional<Mono>(m); };
    auto over_n = [&](const Mono& m) { return divide(m, n); };
    auto place = [&](Term& t, std::vector<Mono>& block, std::vector<Mono>& cell, const Mono& as) {
      const bool thread = uses_thread(t.m.atom);
      t.role = thread ? Role::Cell : Role::Block;
      (thread ? cell : block).push_back(as);
    };

    // Column: a guard `col < N` whose terms the offset holds as they are (with M == N the
    // row guard has the same bound, but its terms appear times N); else the terms that
    // no row step divides, and the constant below N.
    std::vector<Mono> col_block, col_cell;
    int64_t col_c = 0;
    bool col_guard = false;
    for (const Expr& c : site.conds)
      if (c.rhs().same_as(cols) && match(c.lhs(), terms, itself, col_block, col_cell, col_c)) {
        col_guard = true;
        break;
      }
    if (!col_guard) {
      for (Term& t : terms)
        if (!divide(t.m, n)) place(t, col_block, col_cell, t.m);
      col_c = n.syms.empty() ? constant % n.coef : constant;
    }
    constant -= col_c;
    if (constant < 0 || (constant != 0 && (!n.syms.empty() || constant % n.coef != 0)))
      throw EpilogueRefusal{"the constant of its offset " + offset.str() + " is no row plus column"};
    // The rest are rows and batch entries: multiples of the row stride. A size-only term
    // (8 * N: an atom's lower half with a symbolic N) is a row constant.
    int64_t rows_c = n.syms.empty() ? constant / n.coef : 0;
    for (Term& t : terms) {
      if (t.role != Role::Free) continue;
      std::optional<Mono> q = divide(t.m, n);
      if (!q) throw EpilogueRefusal{"the term " + rebuild({t.m}).str() + " of its offset is neither a "
                            "column nor a multiple of the row stride " + n_expr.str()};
      if (q->is_const()) {
        rows_c += q->coef;
        t.role = Role::Cell;
      }
    }
    std::vector<Mono> row_block, row_cell;
    int64_t row_c = 0;
    bool row_guard = false;
    for (const Expr& c : site.conds)
      if (c.rhs().same_as(rows) && match(c.lhs(), terms, over_n, row_block, row_cell, row_c)) {
        row_guard = true;
        break;
      }
    if (!row_guard) {
      for (Term& t : terms)
        if (t.role == Role::Free && uses_thread(t.m.atom)) place(t, row_block, row_cell, *divide(t.m, n));
      row_c = rows_c;
    }
    if (row_c > rows_c)
      throw EpilogueRefusal{"its row guard's constant exceeds the row of its offset " + offset.str()};
    // Everything but the cell (batch entries, the block's origin) is the block's base.
    std::vector<Mono> base;
    for (const Term& t : terms) {
      if (t.role == Role::Cell) continue;
      if (uses_thread(t.m.atom))
        throw EpilogueRefusal{"the term " + rebuild({t.m}).str() + " of its offset moves a thread "
                      "between batch entries"};
      base.push_back(t.m);
    }
    site.base = rebuild(base) + Expr(rows_c - row_c) * n_expr;
    site.row = rebuild(row_cell, row_c);
    site.col = rebuild(col_cell, col_c);
    if (row_guard) site.row0 = rebuild(row_block);
    if (col_guard) site.col0 = rebuild(col_block);
    check_identity(offset, site.base + site.row * n_expr + site.col, site);
  }

  // Whether `a` and `b` agree at random points (symbols from 1 to 4000, variables up
  // to 63): how a wrong split is caught, whatever the reason, before it could put a
  // value in the wrong place.
  bool same_value(const Expr& a, const Expr& b) const {
    std::set<std::string> vars;
    a.collect_vars(vars);
    b.collect_vars(vars);
    std::mt19937_64 rng(54);
    for (int trial = 0; trial < 16; ++trial) {
      Expr::Env env;
      for (const std::string& v : vars)
        env[v] = symbols_.count(v) ? int64_t(rng() % 4000 + 1) : int64_t(rng() % 64);
      if (a.eval(env) != b.eval(env)) return false;
    }
    return true;
  }

  void check_identity(const Expr& offset, const Expr& rebuilt, const EpilogueStore& site) const {
    if (!same_value(offset, rebuilt))
      throw EpilogueRefusal{"its store " + offset.str() + " does not split into a block base, a row "
                    "and a column (" + site.row.str() + ", " + site.col.str() + ")"};
  }

  // The copy-out serves every store with one base and one row / column origin.
  void check_common_origin() const {
    const EpilogueStore& first = c_.stores[0];
    const EpilogueStore* row = nullptr;
    const EpilogueStore* col = nullptr;
    for (const EpilogueStore& site : c_.stores) {
      if (site.row0 && !row) row = &site;
      if (site.col0 && !col) col = &site;
      const bool same = same_value(site.base, first.base) &&
                        (!site.row0 || same_value(*site.row0, *row->row0)) &&
                        (!site.col0 || same_value(*site.col0, *col->col0));
      if (!same)
        throw EpilogueRefusal{"its stores " + first.store->index[0].str() + " and " +
                      site.store->index[0].str() + " start from different block origins"};
    }
  }

  // The cell coordinates of every store, for every thread and loop iteration: they must
  // cover [0, TM) x [0, TN) exactly once.
  void tile_extents() {
    std::vector<std::pair<int64_t, int64_t>> cells;
    const int64_t T = k_.block_threads;
    for (const EpilogueStore& site : c_.stores) {
      const int w = site.store->width;
      Expr::Env env;
      std::vector<int64_t> at(site.loops.size(), 0);
      for (int64_t t = 0; t < T; ++t) {
        env.clear();
        env["threadIdx.x"] = t;
        for (;;) {
          for (size_t i = 0; i < at.size(); ++i) env[site.loops[i].first] = at[i];
          for (const Block* lets : std::initializer_list<const Block*>{&c_.top_lets, &site.lets})
            for (const Stmt& l : *lets)
              if (thread_var(l.var)) env[l.var] = l.value.eval(env);
          const int64_t r = site.row.eval(env), c = site.col.eval(env);
          for (int i = 0; i < w; ++i) cells.push_back({r, c + i});
          size_t i = 0;
          for (; i < at.size(); ++i) {
            if (++at[i] < site.loops[i].second) break;
            at[i] = 0;
          }
          if (i == at.size()) break;
        }
      }
    }
    c_.rows = c_.cols = 0;
    for (const auto& [r, c] : cells) {
      if (r < 0 || c < 0) throw EpilogueRefusal{"a cell lies at a negative row or column"};
      c_.rows = std::max(c_.rows, r + 1);
      c_.cols = std::max(c_.cols, c + 1);
    }
    if (c_.rows * c_.cols != int64_t(cells.size()))
      throw EpilogueRefusal{"its " + std::to_string(cells.size()) + " stored cells do not tile a " +
                    std::to_string(c_.rows) + " x " + std::to_string(c_.cols) + " block tile once"};
    std::vector<char> seen(size_t(c_.rows * c_.cols), 0);
    for (const auto& [r, c] : cells)
      if (seen[size_t(r * c_.cols + c)]++)
        throw EpilogueRefusal{"two stores write cell (" + std::to_string(r) + ", " + std::to_string(c) +
                      ") of the block tile"};
  }


  const KernelProgram& p_;
  KernelOp& k_;
  std::set<std::string> symbols_;
  std::set<std::string> block_vars_;
  EpilogueCells c_;
};

}  // namespace

EpilogueCells epilogue_cells(const KernelProgram& p, KernelOp& k) { return CellFinder(p, k).run(); }

}  // namespace loom
