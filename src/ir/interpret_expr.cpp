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

}  // namespace

IntExpr::IntExpr(const Expr& e, const std::function<int(const std::string&)>& slot_of,
                 const std::function<bool(int)>& thread_dependent)
    : src_(e) {
  if (e.is_const()) constant_ = e.const_value();
  else compile(e, slot_of, thread_dependent);
}

int IntExpr::compile(const Expr& e, const std::function<int(const std::string&)>& slot_of,
                     const std::function<bool(int)>& thread_dependent) {
  Node n;
  n.kind = e.kind();
  if (e.is_const()) {
    n.value = e.const_value();
  } else if (e.is_var()) {
    n.value = slot_of(e.var_name());
    dependent_ = dependent_ || thread_dependent(int(n.value));
  } else {
    n.a = compile(e.lhs(), slot_of, thread_dependent);
    n.b = compile(e.rhs(), slot_of, thread_dependent);
  }
  nodes_.push_back(n);
  return int(nodes_.size()) - 1;
}

int64_t IntExpr::eval_node(int i, const int64_t* ints, size_t threads, int t) const {
  const Node& n = nodes_[size_t(i)];
  using K = Expr::Kind;
  switch (n.kind) {
    case K::Const: return n.value;
    case K::Var: return ints[size_t(n.value) * threads + size_t(t)];
    default: break;
  }
  int64_t a = eval_node(n.a, ints, threads, t);
  if (n.kind == K::And && a == 0) return 0;
  if (n.kind == K::Or && a != 0) return 1;
  int64_t b = eval_node(n.b, ints, threads, t);
  switch (n.kind) {
    case K::Add: return a + b;
    case K::Sub: return a - b;
    case K::Mul: return a * b;
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
