// Index expressions compiled against the interpreter's integer slots.
//
// The interpreter evaluates an index for every thread of a block at every statement,
// millions of times per pass test; Expr::eval looks every variable up in a hash map.
// Compiling once per kernel turns variables into slot numbers, so an evaluation is a
// walk over a small array. Sums and constant multiples of variables (most indices, and
// the operands of the divisions and comparisons of the rest) become one affine node,
// c + Σ coefficient × slot, evaluated without recursion. The arithmetic is Expr's (floor
// division and modulo, And/Or evaluating their right side only when the left one leaves
// the result open), so an index means the same thing here as in the printer, the passes
// and bounds().
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
    if (nodes_.empty()) return affine(root_, ints, threads, t);
    return eval_node(int(nodes_.size()) - 1, ints, threads, t);
  }
  // Same value for every thread of a block (no threadIdx in its dependences).
  bool uniform() const { return !dependent_; }
  bool is_one() const { return nodes_.empty() && root_.count == 0 && root_.constant == 1; }
  const Expr& expr() const { return src_; }
  std::string str() const { return src_.str(); }

 private:
  // c + Σ terms_[first + i].coefficient × slot value, i < count.
  struct Affine {
    int64_t constant = 0;
    uint32_t first = 0, count = 0;
  };
  struct Term {
    int64_t coefficient;
    size_t slot;
  };
  // A node that is not affine: an operation of two operands, each an affine form
  // (`a_affine`) or an earlier node (`a`).
  struct Node {
    Expr::Kind kind = Expr::Kind::Add;
    Affine a_affine, b_affine;
    int a = -1, b = -1;  // -1: the operand is the affine form
  };
  struct Form;  // compile()'s result: an affine form or a node
  Form compile(const Expr& e, const std::function<int(const std::string&)>& slot_of,
               const std::function<bool(int)>& thread_dependent);
  int materialize(Form f, Affine& into);
  Affine store(const Form& f);

  int64_t affine(const Affine& f, const int64_t* ints, size_t threads, int t) const {
    // Unsigned: a wrap-around is two's complement, never undefined behavior.
    uint64_t v = uint64_t(f.constant);
    const Term* term = terms_.data() + f.first;
    for (uint32_t i = 0; i < f.count; ++i)
      v += uint64_t(term[i].coefficient) *
           uint64_t(ints[term[i].slot * threads + size_t(t)]);
    return int64_t(v);
  }
  int64_t eval_node(int i, const int64_t* ints, size_t threads, int t) const;

  std::vector<Node> nodes_;  // children before parents, the root last; empty: root_ is it
  std::vector<Term> terms_;
  Affine root_;
  Expr src_;
  bool dependent_ = false;
};

}  // namespace loom::interp
