// The graph of ops a user wrote: the frontend's output and the lowering's input.
//
// Ops are matmul-family contractions and elementwise ops. `linear(X, W, b)` is built as
// matmul(X, Wᵀ) followed by add(·, b) with b broadcast over rows, as torch computes it;
// `bmm` is a matmul with a leading batch dimension. Shapes follow numpy broadcasting
// for elementwise operands (a bias [N] against [M,N], a residual [M,N] against [M,N]).
// `attention(Q, K, V)` is one op (docs/attention.md): softmax(scale · Q Kᵀ, masked) V.
#pragma once
#include <map>
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

enum class OpKind { Input, Matmul, Unary, Binary, Attention };

// Which keys a query row of attention sees. For Sq = Sk both causal masks keep keys
// j <= i; they differ when Sq != Sk:
//   BottomRight (FlashAttention's causal=True): the last query row sees every key, so
//     row i keeps j <= i + Sk - Sq; with Sq > Sk the first Sq - Sk rows keep no key.
//   TopLeft (PyTorch's is_causal=True): row i keeps j <= i.
enum class Causal { None, BottomRight, TopLeft };
const char* causal_name(Causal c);  // "false", "true" (bottom-right), "top_left"

// Hq / Hkv as an index divisor (query head h reads key/value head h / group): 1 when
// the dims are equal, Hq when Hkv is 1 (MQA), the quotient of two constants. nullopt
// when it is not known to divide: two different symbols, or constants that do not.
std::optional<Expr> attention_kv_group(const Dim& hq, const Dim& hkv);

// Attention's attributes. Q [B,Hq,Sq,D], K and V [B,Hkv,Sk,D]; Hq is a multiple of Hkv
// and query head h reads key/value head h / (Hq / Hkv) (GQA; MQA is Hkv = 1). The
// output O [B,Hq,Sq,D] has Q's dtype. With `lse`, the op has a second result: the
// log-sum-exp of each row's scaled, masked scores, [B,Hq,Sq] f32 (what a backward pass
// or a split-KV combine needs). It is part of the same node, not a node of its own,
// because one kernel computes both from the same running max and sum; the programs
// name it `lse` beside `out`. A row that keeps no key has O = 0 and LSE = -inf.
//
// Paged KV (docs/attention.md, "Paged KV"): with five inputs {Q, Kc, Vc, BT, L} the keys
// and values live in a pool of pages, Kc and Vc [P, Hkv, page, D] (FlashInfer's "HND"
// layout: each page of a head is page x D contiguous rows), BT [B, maxp] i32 the block
// table (key j of sequence b is row j % page of page BT[b, j / page]) and L [B] i32 the
// key lengths (keys j >= L[b] do not exist; a causal mask is aligned to L[b]). The page
// size is a constant power of two from 16 to 256.
//
// Varlen (docs/attention.md, "Serving forms: varlen"): with five inputs {Q, K, V, CQ, CK}
// and max_seqlen_q > 0, B sequences are packed along the token axis: Q [Tq, Hq, D], K and
// V [Tk, Hkv, D], sequence b's queries the rows CQ[b] .. CQ[b+1] - 1 and its keys CK[b] ..
// CK[b+1] - 1 (CQ, CK [B+1] i32, cumulative lengths, nondecreasing from 0); at most
// max_seqlen_q queries per sequence (the grid is sized by it). O is [Tq, Hq, D] and LSE
// [Tq, Hq]; every mask is applied per sequence with its own lengths.
struct AttentionAttrs {
  Causal causal = Causal::None;
  double scale = 0.0;  // multiplies Q Kᵀ; the builder resolves the default 1/sqrt(D)
  bool lse = false;
  int64_t max_seqlen_q = 0;  // varlen: > 0
};
inline constexpr int64_t kMinPage = 16, kMaxPage = 256;

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
  // Input: a view into a larger buffer (`A[M,K|1056]`): the storage strides, in elements,
  // the user gave for the dimensions outside the innermost, the innermost-but-one last —
  // a suffix, so `X[B,S,K|1056]` gives the row pitch alone and the batch stride is dense
  // over it. Empty: dense row-major. storage_strides() resolves it for every dimension.
  std::vector<int64_t> pitch = {};
  std::vector<Expr> storage_strides() const;  // every dim but the innermost; {} when dense
  // The elements whose alignment decides which copies can move the rows (TMA needs every
  // stride 16-byte aligned, cp.async each row start): the row length when dense, else the
  // greatest common divisor of the given strides.
  Dim stride_unit() const;

  // Matmul: inputs[0] = A [..,M,K], inputs[1] = B [..,K,N] (logical shapes).
  // Attention: inputs = {Q, K, V}, or {Q, Kc, Vc, BT, L} paged; attributes in `attention`.
  // Unary: op in {Relu, Gelu, Silu}; Binary: op in {Add, Mul, Sub, Max, ...}, whose
  // second operand is either inputs[1] or the immediate `scalar`.
  ScalarOp op = ScalarOp::Add;
  std::vector<int> inputs;
  std::optional<double> scalar;
  AttentionAttrs attention;

  bool paged_attention() const {
    return kind == OpKind::Attention && inputs.size() == 5 && attention.max_seqlen_q == 0;
  }
  bool varlen_attention() const {
    return kind == OpKind::Attention && inputs.size() == 5 && attention.max_seqlen_q > 0;
  }

  std::string origin;  // the user's op, e.g. "linear" for the matmul and add it became
  int column = 0;      // column in the expression text (1-based), for error messages
};

struct Graph {
  std::vector<Node> nodes;  // topologically ordered; the last node is the result
  // Size symbols spelled apart from a name the passes generate (l:000,
  // src/passes/symbol_spelling.h): the IR spelling -> the name the user wrote. Empty
  // unless a symbol was renamed.
  std::map<std::string, std::string> symbol_names;
  // The output is a view into a larger buffer (out_pitch=): its row pitch, as Node::pitch
  // (a suffix of the strides of every dim but the innermost). Empty: dense.
  std::vector<int64_t> out_pitch = {};
  std::vector<Expr> out_strides() const;  // every dim but the innermost; {} when dense
  int result() const { return int(nodes.size()) - 1; }
  const Node& node(int id) const { return nodes.at(id); }
  std::vector<std::string> symbols() const;  // distinct dim symbols, first-use order
  // Every dimension `from` becomes `to` (a new spelling of the same size).
  void rename_symbol(const std::string& from, const std::string& to);
  // The attention node, or nullptr when the graph has none.
  const Node* attention() const;
  std::string str() const;                   // printer, one node per line
  void verify() const;                       // throws loom::Error on a broken invariant
};

}  // namespace loom
