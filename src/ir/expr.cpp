// Integer index expressions: simplifying construction, printing, evaluation, bounds.
//
// Semantics of FloorDiv and Mod are floor division and floor modulo (the remainder has
// the divisor's sign), as in Python. Every index Loom builds is non-negative, where this
// agrees with C's truncating `/` and `%`, which is why the printer emits C operators.
// eval() and the constant folder use the floor forms so that a negative intermediate
// (e.g. a substituted `k - 1` at k = 0) folds the same way bounds() reasons about it.
#include "ir/expr.h"

#include <algorithm>
#include <limits>

#include "ir/error.h"

namespace loom {

struct Expr::Node {
  Kind kind = Kind::Const;
  int64_t value = 0;  // Const
  std::string name;   // Var
  Expr a, b;          // binary kinds; null in leaves (a default Expr would recurse here)

  Node() : a(std::shared_ptr<const Node>()), b(std::shared_ptr<const Node>()) {}

  // The simplifying builders live here because a nested class may use Expr's private
  // constructor: make() decides the shape, raw() wraps the node.
  static Expr raw(Kind k, const Expr& a, const Expr& b);
  static Expr add_const(const Expr& x, int64_t c);
  static Expr make_add(Expr a, Expr b);
  static Expr make_sub(const Expr& a, const Expr& b);
  static Expr make_mul(Expr a, Expr b);
  static Expr make_div(const Expr& a, const Expr& b);
  static Expr make_mod(const Expr& a, const Expr& b);
  static Expr make_logic(Kind k, Expr a, Expr b);
};

namespace {

using Kind = Expr::Kind;

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

bool is_binary(Kind k) { return k != Kind::Const && k != Kind::Var; }

bool is_boolean(Kind k) {
  return k == Kind::Lt || k == Kind::Le || k == Kind::Eq || k == Kind::And || k == Kind::Or;
}

const char* op_symbol(Kind k) {
  switch (k) {
    case Kind::Add: return "+";
    case Kind::Sub: return "-";
    case Kind::Mul: return "*";
    case Kind::FloorDiv: return "/";
    case Kind::Mod: return "%";
    case Kind::Lt: return "<";
    case Kind::Le: return "<=";
    case Kind::Eq: return "==";
    case Kind::And: return "&&";
    case Kind::Or: return "||";
    default: return "?";
  }
}

// C precedence, higher binds tighter. Eq sits below Lt/Le as in C, so that a printed
// `a == b < c` is never produced for `(a == b) < c`.
int precedence(Kind k) {
  switch (k) {
    case Kind::Or: return 1;
    case Kind::And: return 2;
    case Kind::Eq: return 3;
    case Kind::Lt:
    case Kind::Le: return 4;
    case Kind::Add:
    case Kind::Sub: return 5;
    case Kind::Mul:
    case Kind::FloorDiv:
    case Kind::Mod: return 6;
    default: return 7;  // constants, variables, min(), max()
  }
}

int64_t fold(Kind k, int64_t a, int64_t b) {
  switch (k) {
    case Kind::Add: return a + b;
    case Kind::Sub: return a - b;
    case Kind::Mul: return a * b;
    case Kind::FloorDiv: return floor_div(a, b);
    case Kind::Mod: return floor_mod(a, b);
    case Kind::Min: return std::min(a, b);
    case Kind::Max: return std::max(a, b);
    case Kind::Lt: return a < b;
    case Kind::Le: return a <= b;
    case Kind::Eq: return a == b;
    case Kind::And: return a != 0 && b != 0;
    case Kind::Or: return a != 0 || b != 0;
    default: LOOM_CHECK(false, "fold of a non-binary expression kind");
  }
  return 0;
}

bool const_equals(const Expr& e, int64_t c) { return e.is_const() && e.const_value() == c; }
bool has_const_rhs(const Expr& e, Kind k) { return e.kind() == k && e.rhs().is_const(); }

// The constant term of `x + c` / `x - c`, and the rest: lets additive constants gather
// on the right wherever they came from.
bool split_const(const Expr& e, Expr& rest, int64_t& c) {
  if (has_const_rhs(e, Kind::Add)) { rest = e.lhs(); c = e.rhs().const_value(); return true; }
  if (has_const_rhs(e, Kind::Sub)) { rest = e.lhs(); c = -e.rhs().const_value(); return true; }
  return false;
}

void check_divisor(Kind k, const Expr& a, const Expr& b) {
  if (const_equals(b, 0))
    throw Error(std::string("index expression divides by zero: (") + a.str() + ") " +
                op_symbol(k) + " 0; a tile size or extent that divides must be positive");
}

}  // namespace

Expr::Expr() {
  static const std::shared_ptr<const Node> zero = std::make_shared<Node>();
  n_ = zero;
}

Expr::Expr(int64_t c) {
  auto n = std::make_shared<Node>();
  n->value = c;
  n_ = std::move(n);
}

Expr Expr::var(const std::string& name) {
  LOOM_CHECK(!name.empty(), "a variable needs a name");
  auto n = std::make_shared<Node>();
  n->kind = Kind::Var;
  n->name = name;
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}

// Raw node construction, no simplification; used once make() has decided the shape.
Expr Expr::Node::raw(Kind k, const Expr& a, const Expr& b) {
  auto n = std::make_shared<Node>();
  n->kind = k;
  n->a = a;
  n->b = b;
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}

// x + c with the constant's sign folded into the operator: `x - 3`, never `x + -3`.
Expr Expr::Node::add_const(const Expr& x, int64_t c) {
  if (c == 0) return x;
  if (x.is_const()) return Expr(x.const_value() + c);
  if (c < 0 && c != std::numeric_limits<int64_t>::min()) return raw(Kind::Sub, x, Expr(-c));
  return raw(Kind::Add, x, Expr(c));
}

Expr Expr::Node::make_add(Expr a, Expr b) {
  if (a.is_const() && !b.is_const()) std::swap(a, b);  // constant on the right
  if (const_equals(b, 0)) return a;
  Expr rest;
  int64_t c = 0;
  if (b.is_const()) {
    if (split_const(a, rest, c)) return add_const(rest, c + b.const_value());  // (x+a)+b
    return add_const(a, b.const_value());
  }
  if (split_const(a, rest, c)) return add_const(Expr::make(Kind::Add, rest, b), c);  // (x+c)+y
  if (split_const(b, rest, c)) return add_const(Expr::make(Kind::Add, a, rest), c);  // x+(y+c)
  return raw(Kind::Add, a, b);
}

Expr Expr::Node::make_sub(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return Expr(0);
  if (b.is_const()) {
    Expr rest;
    int64_t c = 0;
    if (split_const(a, rest, c)) return add_const(rest, c - b.const_value());  // (x+a)-b
    return add_const(a, -b.const_value());
  }
  return raw(Kind::Sub, a, b);
}

Expr Expr::Node::make_mul(Expr a, Expr b) {
  if (a.is_const() && !b.is_const()) std::swap(a, b);  // constant on the right
  if (const_equals(b, 0)) return Expr(0);
  if (const_equals(b, 1)) return a;
  if (b.is_const() && has_const_rhs(a, Kind::Mul))  // (x*a)*b
    return Expr::make(Kind::Mul, a.lhs(), Expr(a.rhs().const_value() * b.const_value()));
  if (!b.is_const() && has_const_rhs(a, Kind::Mul))  // (x*c)*y -> (x*y)*c
    return Expr::make(Kind::Mul, Expr::make(Kind::Mul, a.lhs(), b), a.rhs());
  if (has_const_rhs(b, Kind::Mul))  // x*(y*c) -> (x*y)*c
    return Expr::make(Kind::Mul, Expr::make(Kind::Mul, a, b.lhs()), b.rhs());
  return raw(Kind::Mul, a, b);
}

Expr Expr::Node::make_div(const Expr& a, const Expr& b) {
  check_divisor(Kind::FloorDiv, a, b);
  if (const_equals(b, 1) || const_equals(a, 0)) return a;
  if (b.is_const() && b.const_value() > 0) {
    int64_t c = b.const_value();
    if (has_const_rhs(a, Kind::Mul) && a.rhs().const_value() % c == 0)  // (x*c*q)/c = x*q
      return Expr::make(Kind::Mul, a.lhs(), Expr(a.rhs().const_value() / c));
    if (has_const_rhs(a, Kind::FloorDiv) && a.rhs().const_value() > 0)  // (x/p)/c = x/(p*c)
      return Expr::make(Kind::FloorDiv, a.lhs(), Expr(a.rhs().const_value() * c));
  }
  return raw(Kind::FloorDiv, a, b);
}

Expr Expr::Node::make_mod(const Expr& a, const Expr& b) {
  check_divisor(Kind::Mod, a, b);
  if (const_equals(b, 1) || const_equals(a, 0)) return Expr(0);
  if (b.is_const() && b.const_value() > 0 && has_const_rhs(a, Kind::Mul) &&
      a.rhs().const_value() % b.const_value() == 0)  // (x*c*q)%c = 0
    return Expr(0);
  return raw(Kind::Mod, a, b);
}

// `c && x` is x only when x is already 0/1; for an integer x it would not be.
Expr Expr::Node::make_logic(Kind k, Expr a, Expr b) {
  if (a.is_const() && !b.is_const()) std::swap(a, b);
  if (b.is_const()) {
    bool truth = b.const_value() != 0;
    if (k == Kind::And && !truth) return Expr(0);
    if (k == Kind::Or && truth) return Expr(1);
    if (is_boolean(a.kind())) return a;
  }
  return raw(k, a, b);
}

Expr Expr::make(Kind k, const Expr& a, const Expr& b) {
  LOOM_CHECK(is_binary(k), "Expr::make needs a binary kind");
  if (k == Kind::FloorDiv || k == Kind::Mod) check_divisor(k, a, b);
  if (a.is_const() && b.is_const()) return Expr(fold(k, a.const_value(), b.const_value()));
  switch (k) {
    case Kind::Add: return Node::make_add(a, b);
    case Kind::Sub: return Node::make_sub(a, b);
    case Kind::Mul: return Node::make_mul(a, b);
    case Kind::FloorDiv: return Node::make_div(a, b);
    case Kind::Mod: return Node::make_mod(a, b);
    case Kind::Min:
    case Kind::Max: return a.same_as(b) ? a : Node::raw(k, a, b);
    case Kind::Lt: return a.same_as(b) ? Expr(0) : Node::raw(k, a, b);
    case Kind::Le:
    case Kind::Eq: return a.same_as(b) ? Expr(1) : Node::raw(k, a, b);
    case Kind::And:
    case Kind::Or: return Node::make_logic(k, a, b);
    default: break;
  }
  return Node::raw(k, a, b);
}

// ---- accessors -----------------------------------------------------------------------

Expr::Kind Expr::kind() const { return n_->kind; }

int64_t Expr::const_value() const {
  LOOM_CHECK(is_const(), "const_value() of a non-constant expression " + str());
  return n_->value;
}

const std::string& Expr::var_name() const {
  LOOM_CHECK(is_var(), "var_name() of a non-variable expression " + str());
  return n_->name;
}

const Expr& Expr::lhs() const {
  LOOM_CHECK(is_binary(kind()), "lhs() of a leaf expression " + str());
  return n_->a;
}

const Expr& Expr::rhs() const {
  LOOM_CHECK(is_binary(kind()), "rhs() of a leaf expression " + str());
  return n_->b;
}

// ---- printing ----------------------------------------------------------------------------

namespace {

// An operand keeps its parentheses when it binds more loosely than its parent, or
// equally on the right unless the operator is associative with itself (a + b + c,
// a * b * c); a - (b + c) and a * (b / c) keep theirs.
bool needs_parens(Kind parent, const Expr& child, bool is_rhs) {
  int pp = precedence(parent), pc = precedence(child.kind());
  if (pc != pp) return pc < pp;
  if (!is_rhs) return false;
  bool associative = parent == Kind::Add || parent == Kind::Mul || parent == Kind::And ||
                     parent == Kind::Or;
  return !(associative && child.kind() == parent);
}

}  // namespace

std::string Expr::str() const { return str(Spelling{}); }

std::string Expr::str(const Spelling& spelling) const {
  const auto operand = [&](const Expr& child, bool is_rhs) {
    std::string s = child.str(spelling);
    return needs_parens(kind(), child, is_rhs) ? "(" + s + ")" : s;
  };
  const auto min_max = [&](const Expr& child) {
    std::string s = child.str(spelling);
    return spelling.min_max_operand ? spelling.min_max_operand(child, s) : s;
  };
  switch (kind()) {
    case Kind::Const: return std::to_string(n_->value);
    case Kind::Var: return spelling.var ? spelling.var(n_->name) : n_->name;
    case Kind::Min: return "min(" + min_max(n_->a) + ", " + min_max(n_->b) + ")";
    case Kind::Max: return "max(" + min_max(n_->a) + ", " + min_max(n_->b) + ")";
    default:
      return operand(n_->a, false) + " " + op_symbol(kind()) + " " + operand(n_->b, true);
  }
}

// ---- evaluation and rewriting ------------------------------------------------------

int64_t Expr::eval(const Env& env) const {
  switch (kind()) {
    case Kind::Const: return n_->value;
    case Kind::Var: {
      auto it = env.find(n_->name);
      if (it == env.end())
        throw Error("cannot evaluate index expression '" + str() + "': variable '" +
                    n_->name + "' is unbound; bind it (a loop variable or a size symbol)");
      return it->second;
    }
    default: break;
  }
  int64_t a = n_->a.eval(env);
  if (kind() == Kind::And && a == 0) return 0;
  if (kind() == Kind::Or && a != 0) return 1;
  int64_t b = n_->b.eval(env);
  if ((kind() == Kind::FloorDiv || kind() == Kind::Mod) && b == 0)
    throw Error("index expression '" + str() + "' divides by zero (divisor '" + n_->b.str() +
                "' evaluated to 0)");
  return fold(kind(), a, b);
}

Expr Expr::substitute(const std::map<std::string, Expr>& repl) const {
  switch (kind()) {
    case Kind::Const: return *this;
    case Kind::Var: {
      auto it = repl.find(n_->name);
      return it == repl.end() ? *this : it->second;
    }
    default: break;
  }
  Expr a = n_->a.substitute(repl), b = n_->b.substitute(repl);
  if (a.n_ == n_->a.n_ && b.n_ == n_->b.n_) return *this;  // untouched: share the node
  return make(kind(), a, b);
}

void Expr::collect_vars(std::set<std::string>& out) const {
  if (is_var()) out.insert(n_->name);
  if (!is_binary(kind())) return;
  n_->a.collect_vars(out);
  n_->b.collect_vars(out);
}

bool Expr::uses(const std::string& var) const {
  if (is_var()) return n_->name == var;
  if (!is_binary(kind())) return false;
  return n_->a.uses(var) || n_->b.uses(var);
}

bool Expr::same_as(const Expr& o) const {
  if (n_ == o.n_) return true;
  if (kind() != o.kind()) return false;
  switch (kind()) {
    case Kind::Const: return n_->value == o.n_->value;
    case Kind::Var: return n_->name == o.n_->name;
    default: return n_->a.same_as(o.n_->a) && n_->b.same_as(o.n_->b);
  }
}

// ---- bounds --------------------------------------------------------------------------

namespace {

using Range = Expr::Range;

// Interval endpoints are computed in 128 bits; a result outside int64 is "unbounded".
std::optional<Range> checked(__int128 lo, __int128 hi) {
  constexpr __int128 kMin = std::numeric_limits<int64_t>::min();
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  if (lo < kMin || hi > kMax) return std::nullopt;
  return Range{int64_t(lo), int64_t(hi)};
}

Range truth(bool can_be_false, bool can_be_true) {
  return Range{can_be_true && !can_be_false ? 1 : 0, can_be_true ? 1 : 0};
}

bool surely_true(Range r) { return r.lo > 0 || r.hi < 0; }
bool surely_false(Range r) { return r.lo == 0 && r.hi == 0; }

std::optional<Range> combine(Kind k, Range a, Range b) {
  switch (k) {
    case Kind::Add: return checked(__int128(a.lo) + b.lo, __int128(a.hi) + b.hi);
    case Kind::Sub: return checked(__int128(a.lo) - b.hi, __int128(a.hi) - b.lo);
    case Kind::Mul: {
      __int128 p[4] = {__int128(a.lo) * b.lo, __int128(a.lo) * b.hi, __int128(a.hi) * b.lo,
                       __int128(a.hi) * b.hi};
      return checked(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
    }
    case Kind::FloorDiv: {
      // With a positive divisor floor(a/b) is monotone in a and in b, so the extremes
      // sit at the corners; a divisor range that reaches 0 or below is unbounded.
      if (b.lo <= 0) return std::nullopt;
      int64_t q[4] = {floor_div(a.lo, b.lo), floor_div(a.lo, b.hi), floor_div(a.hi, b.lo),
                      floor_div(a.hi, b.hi)};
      return Range{*std::min_element(q, q + 4), *std::max_element(q, q + 4)};
    }
    case Kind::Mod: {
      if (b.lo <= 0) return std::nullopt;
      if (b.lo == b.hi && floor_div(a.lo, b.lo) == floor_div(a.hi, b.lo))
        return Range{floor_mod(a.lo, b.lo), floor_mod(a.hi, b.lo)};  // one period: exact
      if (a.lo >= 0) return Range{0, std::min(a.hi, b.hi - 1)};
      return Range{0, b.hi - 1};
    }
    case Kind::Min: return Range{std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    case Kind::Max: return Range{std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    case Kind::Lt: return truth(a.hi >= b.lo, a.lo < b.hi);
    case Kind::Le: return truth(a.hi > b.lo, a.lo <= b.hi);
    case Kind::Eq: {
      bool decided_equal = a.lo == a.hi && b.lo == b.hi && a.lo == b.lo;
      bool disjoint = a.hi < b.lo || b.hi < a.lo;
      return truth(!decided_equal, !disjoint);
    }
    case Kind::And:
      return truth(!surely_true(a) || !surely_true(b), !surely_false(a) && !surely_false(b));
    case Kind::Or:
      return truth(!surely_true(a) && !surely_true(b), !surely_false(a) || !surely_false(b));
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<Expr::Range> Expr::bounds(const std::map<std::string, Range>& vars) const {
  switch (kind()) {
    case Kind::Const: return Range{n_->value, n_->value};
    case Kind::Var: {
      auto it = vars.find(n_->name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    }
    default: break;
  }
  auto a = n_->a.bounds(vars);
  if (!a) return std::nullopt;
  auto b = n_->b.bounds(vars);
  if (!b) return std::nullopt;
  return combine(kind(), *a, *b);
}

// ---- operators -------------------------------------------------------------------------

Expr operator+(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Add, a, b); }
Expr operator-(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Sub, a, b); }
Expr operator*(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Mul, a, b); }
Expr operator/(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::FloorDiv, a, b); }
Expr operator%(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Mod, a, b); }
Expr operator<(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Lt, a, b); }
Expr operator<=(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Le, a, b); }
Expr operator&&(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::And, a, b); }
Expr min(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Min, a, b); }
Expr max(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Max, a, b); }
Expr ceil_div(const Expr& a, const Expr& b) { return (a + b - 1) / b; }

}  // namespace loom
