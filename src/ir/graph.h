// The graph of ops a user wrote: the frontend's output and the lowering's input.
//
// Ops are matmul-family contractions and elementwise ops. `linear(X, W, b)` is built as
// matmul(X, Wᵀ) followed by add(·, b) with b broadcast over rows, as torch computes it;
// `bmm` is a matmul with a leading batch dimension. Shapes follow numpy broadcasting
// for elementwise operands (a bias [N] against [M,N], a residual [M,N] against [M,N]).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/expr.h"
#include "ir/stmt.h"

namespace loom {

// A dimension is a constant or a symbol (e.g. `M` in `A[M,K]`).
struct Dim {
  int64_t value = 0;   // meaningful when sym is empty
  std::string sym;
  bool is_sym() const { return !sym.empty(); }
  Expr expr() const { return is_sym() ? Expr::var(sym) : Expr(value); }
  std::string str() const { return is_sym() ? sym : std::to_string(value); }
  bool operator==(const Dim& o) const { return sym == o.sym && (is_sym() || value == o.value); }
};

enum class OpKind { Input, Matmul, Unary, Binary };

struct Node {
  int id = -1;
  OpKind kind = OpKind::Input;
  std::string name;              // Input: tensor name; others: op name ("matmul", "relu")
  DType dtype = DType::F32;      // output element type
  std::vector<Dim> shape;        // logical output shape

  // Input: the tensor is stored with its last two dims swapped (`B[N,K].T` is the
  // logical [K,N] operand stored as [N,K]). storage_shape() undoes the swap.
  bool transposed = false;
  std::vector<Dim> storage_shape() const;

  // Matmul: inputs[0] = A [..,M,K], inputs[1] = B [..,K,N] (logical shapes).
  // Unary: op in {Relu, Gelu, Silu}; Binary: op in {Add, Mul, Sub, Max, ...}, whose
  // second operand is either inputs[1] or the immediate `scalar`.
  ScalarOp op = ScalarOp::Add;
  std::vector<int> inputs;
  std::optional<double> scalar;

  std::string origin;  // the user's op, e.g. "linear" for the matmul and add it became
  int column = 0;      // column in the expression text (1-based), for error messages
};

struct Graph {
  std::vector<Node> nodes;  // topologically ordered; the last node is the result
  int result() const { return int(nodes.size()) - 1; }
  const Node& node(int id) const { return nodes.at(id); }
  std::vector<std::string> symbols() const;  // distinct dim symbols, first-use order
  std::string str() const;                   // printer, one node per line
  void verify() const;                       // throws loom::Error on a broken invariant
};

}  // namespace loom
