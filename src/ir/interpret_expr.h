// Index expressions compiled against the interpreter's integer slots.
//
// The interpreter evaluates an index for every thread of a block at every statement,
// millions of times per pass test; Expr::eval looks every variable up in a hash map.
// Compiling once per kernel turns variables into slot numbers, so an evaluation is a
// walk over a small array. The arithmetic is Expr's (floor division and modulo), so an
// index means the same thing here as in the printer, the passes and bounds().
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace loom::interp {

class IntExpr {
 public:
  IntExpr() = default;  // the constant 0
  // `slot_of` maps a variable to its slot and throws when it is unbound;
  // `thread_dependent` says whether a slot's value may differ between a block's threads.
  IntExpr(const Expr& e, const std::function<int(const std::string&)>& slot_of,
          const std::function<bool(int)>& thread_dependent);

  // Value for thread `t`; integer slot `s` of thread `t` lives at ints[s * threads + t].
  int64_t eval(const int64_t* ints, size_t threads, int t) const {
    return nodes_.empty() ? constant_ : eval_node(int(nodes_.size()) - 1, ints, threads, t);
  }
  // Same value for every thread of a block (no threadIdx in its dependences).
  bool uniform() const { return !dependent_; }
  bool is_one() const { return nodes_.empty() && constant_ == 1; }
  const Expr& expr() const { return src_; }
  std::string str() const { return src_.str(); }

 private:
  struct Node {
    Expr::Kind kind = Expr::Kind::Const;
    int64_t value = 0;  // Const: the constant; Var: the slot
    int a = -1, b = -1;
  };
  int compile(const Expr& e, const std::function<int(const std::string&)>& slot_of,
              const std::function<bool(int)>& thread_dependent);
  int64_t eval_node(int i, const int64_t* ints, size_t threads, int t) const;

  std::vector<Node> nodes_;  // children before parents, the root last; empty: a constant
  int64_t constant_ = 0;
  Expr src_;
  bool dependent_ = false;
};

}  // namespace loom::interp
