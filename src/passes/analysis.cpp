#include "passes/analysis.h"

#include <random>
#include <set>

#include "atoms/atoms.h"
#include "ir/error.h"

namespace loom {

namespace {
void flatten(const Expr& e, Expr::Kind kind, std::vector<Expr>& out) {
  if (e.kind() == kind) {
    flatten(e.lhs(), kind, out);
    flatten(e.rhs(), kind, out);
  } else {
    out.push_back(e);
  }
}
}  // namespace

std::vector<Expr> sum_terms(const Expr& e) {
  std::vector<Expr> out;
  flatten(e, Expr::Kind::Add, out);
  return out;
}

std::vector<Expr> conjuncts(const Expr& e) {
  std::vector<Expr> out;
  flatten(e, Expr::Kind::And, out);
  return out;
}

Expr distribute_constants(const Expr& e) {
  switch (e.kind()) {
    case Expr::Kind::Const:
    case Expr::Kind::Var: return e;
    case Expr::Kind::Mul: {
      Expr a = distribute_constants(e.lhs()), b = distribute_constants(e.rhs());
      if (b.is_const() && a.kind() == Expr::Kind::Add)
        return distribute_constants(a.lhs() * b) + distribute_constants(a.rhs() * b);
      if (a.is_const() && b.kind() == Expr::Kind::Add)
        return distribute_constants(a * b.lhs()) + distribute_constants(a * b.rhs());
      return a * b;
    }
    default: return Expr::make(e.kind(), distribute_constants(e.lhs()), distribute_constants(e.rhs()));
  }
}

bool provably_divisible(const Expr& e, int64_t w) {
  if (w == 1) return true;
  switch (e.kind()) {
    case Expr::Kind::Const: return e.const_value() % w == 0;
    case Expr::Kind::Add:
    case Expr::Kind::Sub: return provably_divisible(e.lhs(), w) && provably_divisible(e.rhs(), w);
    case Expr::Kind::Mul: return provably_divisible(e.lhs(), w) || provably_divisible(e.rhs(), w);
    default: return false;
  }
}

SwizzleSplit split_for_swizzle(const Expr& offset, const Swizzle& s) {
  if (s.bits == 0) return {offset, Expr(0)};
  const int64_t period = int64_t(1) << (s.base + s.shift + s.bits);
  SwizzleSplit out{Expr(0), Expr(0)};
  for (const Expr& t : sum_terms(distribute_constants(offset))) {
    if (provably_divisible(t, period)) {
      out.outer = out.outer + t;
    } else if (t.is_const() && t.const_value() > period) {
      // A constant's whole periods are additive too (an epilogue's row + 8 is 512 + 8).
      out.outer = out.outer + (t.const_value() - t.const_value() % period);
      out.inner = out.inner + t.const_value() % period;
    } else {
      out.inner = out.inner + t;
    }
  }
  return out;
}

Ranges kernel_builtin_ranges(const KernelOp& k) {
  Ranges r;
  const char* names[3] = {"blockIdx.x", "blockIdx.y", "blockIdx.z"};
  for (int d = 0; d < 3; ++d)
    if (k.grid[d].is_const()) r[names[d]] = {0, k.grid[d].const_value() - 1};
  r["threadIdx.x"] = {0, k.block_threads - 1};
  return r;
}

void enter_range(Ranges& r, const Stmt& s) {
  if (s.kind == StmtKind::For) {
    if (auto b = s.extent.bounds(r)) r[s.var] = {0, b->hi - 1};
  } else if (s.let_load()) {
    r.erase(s.var);  // an integer read from memory: no range is known
  } else if (s.kind == StmtKind::Let) {
    if (auto b = s.value.bounds(r)) r[s.var] = *b;
  }
}

bool provably_less(const Expr& e, const Expr& bound, const Ranges& r) {
  auto eb = e.bounds(r);
  auto bb = bound.bounds(r);
  return eb && bb && eb->hi < bb->lo;
}

namespace {
void k_innermost(const Block& b, const ProgramBase& p, std::map<std::string, std::string>& axes,
                 std::map<std::string, bool>& out) {
  for (const Stmt& s : b) {
    if (s.kind == StmtKind::Load && p.has_tensor(s.tensor)) {
      const TensorDecl& t = p.tensor(s.tensor);
      if (t.role == TensorRole::Shared && t.shape.size() >= 2 && !s.index.empty()) {
        std::set<std::string> vars;
        s.index.back().collect_vars(vars);
        bool k = false;
        for (const std::string& v : vars) k |= axes.count(v) && axes.at(v) == "k";
        out[s.tensor] = out[s.tensor] || k;
      }
    }
    if (s.kind == StmtKind::For) axes[s.var] = s.axis;
    k_innermost(s.body, p, axes, out);
    if (s.kind == StmtKind::For) axes.erase(s.var);
  }
}
}  // namespace

std::map<std::string, bool> shared_k_innermost(const TileProgram& p) {
  std::map<std::string, std::string> axes;
  std::map<std::string, bool> out;
  for (const TileOp& op : p.ops) k_innermost(op.body, p, axes, out);
  return out;
}

std::optional<int64_t> constant_difference(const Expr& a, const Expr& b) {
  std::vector<Expr> ta = sum_terms(distribute_constants(a)), tb = sum_terms(distribute_constants(b));
  int64_t diff = 0;
  std::vector<bool> used(ta.size(), false);
  for (const Expr& t : tb) {
    if (t.is_const()) {
      diff += t.const_value();
      continue;
    }
    bool matched = false;
    for (size_t i = 0; i < ta.size() && !matched; ++i)
      if (!used[i] && !ta[i].is_const() && ta[i].same_as(t)) used[i] = matched = true;
    if (!matched) return std::nullopt;
  }
  for (size_t i = 0; i < ta.size(); ++i) {
    if (ta[i].is_const()) diff -= ta[i].const_value();
    else if (!used[i]) return std::nullopt;
  }
  return diff;
}

std::set<std::string> bound_names(const Block& b) {
  std::set<std::string> n;
  walk(b, [&](const Stmt& s) {
    if (!s.var.empty()) n.insert(s.var);
    if (!s.dst.empty() && s.kind != StmtKind::TmaLoad && s.kind != StmtKind::TmaStore)
      n.insert(s.dst);
  });
  return n;
}

void rename_clashes(Block& body, const std::set<std::string>& taken, const std::string& suffix) {
  std::map<std::string, std::string> to;
  for (const std::string& n : bound_names(body)) {
    if (!taken.count(n)) continue;
    std::string fresh = n + suffix;
    for (int i = 0; taken.count(fresh); ++i) fresh = n + suffix + std::to_string(i);
    to[n] = fresh;
  }
  std::map<std::string, Expr> ints;
  for (const auto& [from, fresh] : to) ints[from] = Expr::var(fresh);
  substitute_block(body, ints);
  auto rn = [&](std::string& name) {
    auto it = to.find(name);
    if (it != to.end()) name = it->second;
  };
  walk(body, [&](Stmt& s) {
    rn(s.var);
    if (s.kind != StmtKind::TmaLoad && s.kind != StmtKind::TmaStore) rn(s.dst);
    for (Operand& o : s.args) rn(o.name);
  });
}

bool agree_at_random_points(const Expr& a, const Expr& b, uint64_t seed) {
  std::set<std::string> vars;
  a.collect_vars(vars);
  b.collect_vars(vars);
  std::mt19937_64 rng(seed);
  for (int trial = 0, tried = 0; tried < 16 && trial < 64; ++trial) {
    Expr::Env env;
    for (const std::string& v : vars) env[v] = int64_t(rng() % 1000) + 1;
    int64_t av = 0, bv = 0;
    try {
      av = a.eval(env);
      bv = b.eval(env);
    } catch (const Error&) {
      continue;
    }
    ++tried;
    if (av != bv) return false;
  }
  return true;
}

bool warp_specialized_wgmma(const KernelOp& k) {
  bool specialized = false, wgmma = false;
  walk(k.body, [&](const Stmt& s) {
    specialized |= s.kind == StmtKind::Specialize;
    const WarpAtom* w = s.kind == StmtKind::Atom ? find_warp_atom(k, s.atom) : nullptr;
    wgmma |= w && w->threads == 128;
  });
  return specialized && wgmma;
}

}  // namespace loom
