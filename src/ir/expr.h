// Integer index expressions: loop extents, tensor indices, guards, launch dimensions.
//
// An Expr is an immutable tree shared by value (copying an Expr copies a pointer).
// Constructors fold constants and apply the identities x+0, x*1, x*0, (x/1), (x%1) so
// that printed IR stays readable after many substitutions. Every index Loom builds is
// non-negative, so FloorDiv/Mod print as C's `/` and `%` with the same meaning.
//
// Variables are loop variables (`a0`, `m_b`), problem-size symbols (`M`, `N`, `K` when
// the expression leaves them symbolic) and, in Kernel IR, the builtins `blockIdx.x`,
// `blockIdx.y`, `blockIdx.z`, `threadIdx.x`.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace loom {

class Expr {
 public:
  enum class Kind { Const, Var, Add, Sub, Mul, FloorDiv, Mod, Min, Max, Lt, Le, Eq, And, Or };

  Expr();                          // the constant 0
  Expr(int64_t c);                 // NOLINT: implicit from integer constants on purpose
  Expr(int c) : Expr(int64_t(c)) {}  // NOLINT
  static Expr var(const std::string& name);
  static Expr make(Kind k, const Expr& a, const Expr& b);  // simplifying constructor

  Kind kind() const;
  bool is_const() const { return kind() == Kind::Const; }
  bool is_var() const { return kind() == Kind::Var; }
  int64_t const_value() const;        // requires is_const()
  const std::string& var_name() const;  // requires is_var()
  const Expr& lhs() const;            // binary kinds
  const Expr& rhs() const;

  // Infix form, fully parenthesized only where precedence needs it; valid C as well.
  std::string str() const;
  // The same text with the leaves and min/max operands spelled by `spelling`: the CUDA
  // renderer's index expressions (symbols as their parameters, min/max operands of one
  // type) share this one printer and its parentheses.
  struct Spelling {
    std::function<std::string(const std::string& var)> var;  // a variable's name
    // The text of an operand of min/max, given the operand and its spelled text.
    std::function<std::string(const Expr& operand, const std::string& text)> min_max_operand;
  };
  std::string str(const Spelling& spelling) const;

  // Evaluation with every variable bound; an unbound variable throws loom::Error.
  using Env = std::unordered_map<std::string, int64_t>;
  int64_t eval(const Env& env) const;

  // Replace variables by expressions (simultaneously), re-simplifying on the way up.
  Expr substitute(const std::map<std::string, Expr>& repl) const;
  void collect_vars(std::set<std::string>& out) const;
  bool uses(const std::string& var) const;

  // Interval of the value given intervals of the variables ([lo, hi], inclusive).
  // Returns nullopt when a variable has no range or an operation is not bounded.
  struct Range { int64_t lo, hi; };
  std::optional<Range> bounds(const std::map<std::string, Range>& vars) const;

  bool same_as(const Expr& o) const;  // structural equality

 private:
  struct Node;
  explicit Expr(std::shared_ptr<const Node> n) : n_(std::move(n)) {}
  std::shared_ptr<const Node> n_;
};

Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr operator/(const Expr& a, const Expr& b);  // floor division (non-negative operands)
Expr operator%(const Expr& a, const Expr& b);
Expr operator<(const Expr& a, const Expr& b);
Expr operator<=(const Expr& a, const Expr& b);
Expr operator&&(const Expr& a, const Expr& b);
Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);
Expr ceil_div(const Expr& a, const Expr& b);  // (a + b - 1) / b

}  // namespace loom
