// Building a Loom graph from C++: the same graphs the expression language makes
// (the parser builds through this class), with the same checks.
//
//   loom::GraphBuilder b;
//   auto x = b.input("X", {loom::dim("M"), loom::dim(1024)}, loom::DType::BF16);
//   auto w = b.input("W", {loom::dim(4096), loom::dim(1024)}, loom::DType::BF16);
//   auto y = b.relu(b.linear(x, w));
//   loom::Graph g = b.build(y);
//
// Shape convention: `input` takes the *storage* shape, exactly as the expression
// language writes it, and `transposed` is the `.T` suffix: B[N,K]:f16.T is
// input("B", {N, K}, F16, true), the logical [K,N] operand stored row-major as [N,K].
//
// Rules (each broken rule is a loom::Error naming the operands and the fix):
// one contraction (matmul, bmm or linear) or one attention per graph; its operands are inputs; every
// elementwise op applies to the contraction's result (a chain), with an input tensor
// that broadcasts numpy-style to that result without growing it, or a number.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace loom {

inline Dim dim(int64_t value) { return Dim{value, {}}; }
inline Dim dim(std::string symbol) { return Dim{0, std::move(symbol)}; }

// A value made by one GraphBuilder; meaningless to any other.
struct TensorRef {
  int id = -1;
};

// attention's options (docs/attention.md): the mask, the scale of Q Kᵀ (default
// 1/sqrt(D), which needs a numeric D), and whether the op also returns the LSE.
// Paged KV ("Paged KV" there): block_table BT [B, maxp] i32 and seqlens_k L [B] i32, both
// or neither; K and V are then page pools [P, Hkv, page, D] (page a power of two, 16..256).
struct AttentionOptions {
  Causal causal = Causal::None;
  std::optional<double> scale;
  bool lse = false;
  std::optional<TensorRef> block_table;
  std::optional<TensorRef> seqlens_k;
  // Varlen ("Serving forms: varlen"): cu_seqlens_q CQ [B+1] i32, cu_seqlens_k CK [B+1] i32
  // and max_seqlen_q (> 0), all three or none; Q is then [Tq,Hq,D] and K, V [Tk,Hkv,D].
  std::optional<TensorRef> cu_seqlens_q;
  std::optional<TensorRef> cu_seqlens_k;
  std::optional<int64_t> max_seqlen_q;
};

class GraphBuilder {
 public:
  // An input tensor (see the shape convention above). Naming the same tensor again
  // with the same storage shape and dtype is allowed (e.g. A and A.T); identical uses
  // share one node.
  // `pitch`: the tensor is a view into a larger buffer — the strides (elements) of the
  // dimensions outside the innermost, the row pitch last; fewer than rank - 1 leave the
  // outer ones dense over the given ones; empty: dense. input("A", {M, K}, BF16, false,
  // {1056}) is the expression language's A[M,K|1056]:bf16.
  TensorRef input(std::string name, std::vector<Dim> storage_shape, DType dtype,
                  bool transposed = false, std::vector<int64_t> pitch = {});

  // [M,K] x [K,N] -> [M,N], or batched [B,M,K] x [B,K,N] -> [B,M,N] (logical shapes).
  // Output dtype: `out`, else f32 for f32/tf32 operands and the operand dtype otherwise.
  TensorRef matmul(TensorRef a, TensorRef b, std::optional<DType> out = {});
  // matmul restricted to rank-3 operands.
  TensorRef bmm(TensorRef a, TensorRef b, std::optional<DType> out = {});
  // X[M,K] . W[N,K]ᵀ (+ bias[N]), as torch.nn.functional.linear: built as a matmul
  // with W used transposed, then an add of the bias; both nodes have origin "linear".
  // X may have one or two leading dims ([B,S,K], [B,H,S,K]): W is shared by every entry.
  TensorRef linear(TensorRef x, TensorRef w, std::optional<TensorRef> bias = {},
                   std::optional<DType> out = {});

  // softmax(scale · Q Kᵀ, masked) V for Q [B,Hq,Sq,D], K and V [B,Hkv,Sk,D], f16 or bf16
  // (f32 accumulation), Hq a multiple of Hkv. The result is O [B,Hq,Sq,D] in Q's dtype;
  // with opt.lse the program also writes `lse` [B,Hq,Sq] f32. Attention is a graph of
  // its own: its operands are inputs and nothing is applied to its result. With
  // opt.block_table and opt.seqlens_k, K and V are page pools [P,Hkv,page,D] (paged KV).
  TensorRef attention(TensorRef q, TensorRef k, TensorRef v, const AttentionOptions& opt = {});

  TensorRef relu(TensorRef x);
  TensorRef gelu(TensorRef x);       // the exact (erf) form, torch's default
  TensorRef gelu_tanh(TensorRef x);  // torch's approximate='tanh'
  TensorRef silu(TensorRef x);

  // x is the contraction's result (or an op on it); y an input tensor or a number. For
  // the commutative add, mul and max the operands may come in either order.
  TensorRef add(TensorRef x, TensorRef y);
  TensorRef add(TensorRef x, double y);
  TensorRef sub(TensorRef x, TensorRef y);
  TensorRef sub(TensorRef x, double y);
  TensorRef mul(TensorRef x, TensorRef y);
  TensorRef mul(TensorRef x, double y);
  TensorRef max(TensorRef x, TensorRef y);
  TensorRef max(TensorRef x, double y);

  // The graph computing `result`: only the nodes it depends on, renumbered in
  // topological order, checked to hold one contraction and verified (Graph::verify).
  // `out_pitch`: the output is a view into a larger buffer (the expression language's
  // out_pitch=): its row pitch in elements, as `input`'s pitch; rows of whole 16-byte units.
  Graph build(TensorRef result, const std::vector<int64_t>& out_pitch = {}) const;

  // Source column (1-based) recorded in Node::column of the nodes made next; the parser
  // sets it so later stages can point at the text. 0 means "not from text".
  void set_column(int column) { column_ = column; }

 private:
  const Node& node(TensorRef r, const std::string& op) const;
  void check_pitch(const std::string& name, const std::vector<Dim>& shape,
                   const std::vector<int64_t>& pitch) const;
  const Node& contraction_operand(TensorRef r, const std::string& op, const char* role) const;
  TensorRef contract(const std::string& op, const Node& a, const Node& b,
                     const std::string& a_text, const std::string& b_text,
                     std::optional<DType> out);
  TensorRef unary(const char* name, ScalarOp op, TensorRef x);
  TensorRef binary(const char* name, ScalarOp op, TensorRef x, TensorRef y,
                   const std::string& origin);
  TensorRef binary(const char* name, ScalarOp op, TensorRef x, double y);
  TensorRef push(Node n);

  std::vector<Node> nodes_;
  int column_ = 0;
};

}  // namespace loom
