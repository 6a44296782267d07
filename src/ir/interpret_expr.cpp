// Compiled index expressions (see interpret_expr.h).
#include "ir/interpret_expr.h"

#include <algorithm>

#include "ir/error.h"

namespace loom::interp {
namespace {

// Floor forms, as Expr::eval computes them (expr.cpp): a negative intermediate must
// fold the same way on every path.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Two's complement arithmetic without signed overflow.
int64_t wrap_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

}  // namespace

// An affine form (terms by slot, no slot twice) or a node of nodes_.
struct IntExpr::Form {
  bool affine = true;
  int64_t constant = 0;
  std::vector<std::pair<size_t, int64_t>> terms;  // (slot, coefficient)
  int node = -1;

  void add(const Form& o, int64_t scale) {
    constant = wrap_add(constant, wrap_mul(scale, o.constant));
    for (const auto& [slot, c] : o.terms) {
      auto it = std::find_if(terms.begin(), terms.end(),
                             [&, s = slot](const auto& t) { return t.first == s; });
      if (it == terms.end()) terms.emplace_back(slot, wrap_mul(scale, c));
      else it->second = wrap_add(it->second, wrap_mul(scale, c));
    }
  }
  bool is_constant() const { return affine && terms.empty(); }
};

IntExpr::IntExpr(const Expr& e, const std::function<int(const std::string&)>& slot_of,
                 const std::function<bool(int)>& thread_dependent)
    : src_(e) {
  Form f = compile(e, slot_of, thread_dependent);
  if (f.affine) root_ = store(f);
  else LOOM_CHECK(f.node == int(nodes_.size()) - 1, "the root node is not the last");
}

IntExpr::Affine IntExpr::store(const Form& f) {
  Affine a;
  a.constant = f.constant;
  a.first = uint32_t(terms_.size());
  for (const auto& [slot, c] : f.terms)
    if (c != 0) terms_.push_back(Term{c, slot});
  a.count = uint32_t(terms_.size()) - a.first;
  return a;
}

// The node index of `f`, or -1 with `into` set to its affine form.
int IntExpr::materialize(Form f, Affine& into) {
  if (!f.affine) return f.node;
  into = store(f);
  return -1;
}

IntExpr::Form IntExpr::compile(const Expr& e,
                               const std::function<int(const std::string&)>& slot_of,
                               const std::function<bool(int)>& thread_dependent) {
  using K = Expr::Kind;
  Form f;
  if (e.is_const()) {
    f.constant = e.const_value();
    return f;
  }
  if (e.is_var()) {
    const int slot = slot_of(e.var_name());
    dependent_ = dependent_ || thread_dependent(slot);
    f.terms.emplace_back(size_t(slot), 1);
    return f;
  }
  Form a = compile(e.lhs(), slot_of, thread_dependent);
  Form b = compile(e.rhs(), slot_of, thread_dependent);
  const K k = e.kind();
  if (a.affine && b.affine) {
    if (k == K::Add || k == K::Sub) {
      a.add(b, k == K::Add ? 1 : -1);
      return a;
    }
    if (k == K::Mul && (a.is_constant() || b.is_constant())) {
      Form r;
      if (a.is_constant()) r.add(b, a.constant);
      else r.add(a, b.constant);
      return r;
    }
  }
  Node n;
  n.kind = k;
  n.a = materialize(std::move(a), n.a_affine);
  n.b = materialize(std::move(b), n.b_affine);
  nodes_.push_back(n);
  f.affine = false;
  f.node = int(nodes_.size()) - 1;
  return f;
}

int64_t IntExpr::eval_node(int i, const int64_t* ints, size_t threads, int t) const {
  const Node& n = nodes_[size_t(i)];
  using K = Expr::Kind;
  const int64_t a = n.a < 0 ? affine(n.a_affine, ints, threads, t) : eval_node(n.a, ints, threads, t);
  if (n.kind == K::And && a == 0) return 0;
  if (n.kind == K::Or && a != 0) return 1;
  const int64_t b = n.b < 0 ? affine(n.b_affine, ints, threads, t) : eval_node(n.b, ints, threads, t);
  switch (n.kind) {
    case K::Add: return wrap_add(a, b);
    case K::Sub: return int64_t(uint64_t(a) - uint64_t(b));
    case K::Mul: return wrap_mul(a, b);
    case K::FloorDiv:
    case K::Mod:
      if (b == 0)
        throw Error("index expression '" + src_.str() + "' divides by zero");
      return n.kind == K::FloorDiv ? floor_div(a, b) : floor_mod(a, b);
    case K::Min: return std::min(a, b);
    case K::Max: return std::max(a, b);
    case K::Lt: return a < b;
    case K::Le: return a <= b;
    case K::Eq: return a == b;
    case K::And: return b != 0;
    case K::Or: return b != 0;
    default: LOOM_CHECK(false, "unknown index expression kind");
  }
  return 0;
}

}  // namespace loom::interp
