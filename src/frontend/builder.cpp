#include "loom/builder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>

#include "frontend/sizes.h"
#include "ir/error.h"
#include "ir/f32_constant.h"

namespace loom {
namespace {

std::string shape_text(const std::vector<Dim>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + shape[i].str();
  return s + "]";
}

// A storage shape with its pitch, as the expression language writes it: [M,K|1056].
std::string shape_text(const std::vector<Dim>& shape, const std::vector<int64_t>& pitch) {
  std::string s = shape_text(shape);
  if (pitch.empty()) return s;
  s.pop_back();
  for (size_t i = 0; i < pitch.size(); ++i) s += (i ? "," : "|") + std::to_string(pitch[i]);
  return s + "]";
}

// An operand as the user wrote it: B[N,K].T for an input, "the result of relu" otherwise.
std::string operand_text(const Node& n) {
  if (n.kind == OpKind::Input) {
    return n.name + shape_text(n.storage_shape(), n.pitch) + (n.transposed ? ".T" : "");
  }
  return "the result of " + n.origin + " " + shape_text(n.shape);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum((unsigned char)c) || c == '_')) return false;
  }
  return true;
}

// The online-softmax kernel writes O once, from its final rescale; an epilogue on it
// has no lowering yet, so refuse it here rather than mis-lower it later.
void no_epilogue_on_attention(const Node& n, const std::string& op) {
  if (n.kind == OpKind::Attention)
    throw Error(op + ": its operand is the result of attention; attention takes no "
                     "elementwise epilogue yet (compute it in a second expression)");
}

const char* const kOneContraction =
    "Loom lowers one contraction (matmul, bmm or linear) per expression, with "
    "elementwise ops applied to its result";

}  // namespace

TensorRef GraphBuilder::push(Node n) {
  n.id = int(nodes_.size());
  if (n.column == 0) n.column = column_;
  nodes_.push_back(std::move(n));
  return TensorRef{nodes_.back().id};
}

const Node& GraphBuilder::node(TensorRef r, const std::string& op) const {
  if (r.id < 0 || r.id >= int(nodes_.size())) {
    throw Error(op + ": invalid TensorRef " + std::to_string(r.id) +
                " (use values returned by this GraphBuilder)");
  }
  return nodes_[r.id];
}

TensorRef GraphBuilder::input(std::string name, std::vector<Dim> storage_shape, DType dtype,
                              bool transposed, std::vector<int64_t> pitch) {
  if (!is_identifier(name)) {
    throw Error("tensor name '" + name + "' is not an identifier (letters, digits, _)");
  }
  // The generated CUDA spells tensors and symbols as loom_t_<name> and loom_d_<name>
  // (codegen/cuda.h): a user name starting with loom_ could meet one of those.
  auto reserved = [&](const std::string& n, const char* what) {
    if (n.rfind("loom_", 0) == 0)
      throw Error(std::string(what) + " name '" + n + "' starts with loom_, which the generated "
                  "CUDA reserves for its own names; rename it");
  };
  reserved(name, "tensor");
  for (const Dim& d : storage_shape)
    if (d.is_sym()) reserved(d.sym, "symbol");
  if (name == "out" || name == "lse") {
    throw Error("tensor name '" + name + "' is reserved for the program's result (" +
                (name == "out" ? "matmul's out= sets its dtype" : "attention's lse=true") +
                "); rename the input");
  }
  if (storage_shape.empty()) throw Error("tensor " + name + " needs at least one dimension");
  for (const Dim& d : storage_shape) {
    if (d.is_sym() && !is_identifier(d.sym)) {
      throw Error("dimension '" + d.sym + "' of " + name +
                  " is neither a positive integer nor a symbol (an identifier such as M)");
    }
    if (d.sym == name) {
      throw Error(name + " names both the tensor " + name + shape_text(storage_shape) +
                  " and one of its dimensions; rename one (both become parameters of the "
                  "generated kernel)");
    }
    if (!d.is_sym() && d.value <= 0) {
      throw Error("dimension of " + name + " must be a positive integer, found " +
                  std::to_string(d.value));
    }
  }
  if (dtype != DType::F32 && dtype != DType::TF32 && dtype != DType::F16 &&
      dtype != DType::BF16 && dtype != DType::I32) {
    throw Error(std::string("tensor ") + name + " has dtype " + dtype_name(dtype) +
                "; input dtypes are f32, tf32, f16 and bf16 (and i32 for attention's "
                "block_table= and seqlens_k=)");
  }
  if (transposed && storage_shape.size() < 2) {
    throw Error(".T swaps the last two dimensions, but " + name + shape_text(storage_shape) +
                " has rank " + std::to_string(storage_shape.size()));
  }
  for (const Node& other : nodes_) {
    if (other.kind != OpKind::Input) continue;
    for (const Dim& d : other.shape) {
      if (d.sym == name) {
        throw Error(name + " names both a tensor and a dimension of " + operand_text(other) +
                    "; rename one (both become parameters of the generated kernel)");
      }
    }
    for (const Dim& d : storage_shape) {
      if (d.sym == other.name) {
        throw Error(other.name + " names both a tensor and a dimension of " + name +
                    shape_text(storage_shape) +
                    "; rename one (both become parameters of the generated kernel)");
      }
    }
  }
  check_pitch(name, storage_shape, pitch);
  Node n;
  n.kind = OpKind::Input;
  n.name = std::move(name);
  n.dtype = dtype;
  n.transposed = transposed;
  n.pitch = std::move(pitch);
  n.shape = std::move(storage_shape);
  if (transposed) std::swap(n.shape[n.shape.size() - 2], n.shape.back());

  for (const Node& other : nodes_) {
    if (other.kind != OpKind::Input || other.name != n.name) continue;
    if (other.storage_shape() != n.storage_shape() || other.dtype != n.dtype ||
        other.pitch != n.pitch) {
      throw Error("tensor " + n.name + " is used twice with different storage: " +
                  operand_text(other) + ":" + dtype_name(other.dtype) + " and " +
                  operand_text(n) + ":" + dtype_name(n.dtype) +
                  "; one name must refer to one tensor (rename one of them)");
    }
    if (other.transposed == n.transposed) return TensorRef{other.id};
  }
  return push(std::move(n));
}

void GraphBuilder::check_pitch(const std::string& name, const std::vector<Dim>& shape,
                               const std::vector<int64_t>& pitch) const {
  if (pitch.empty()) return;
  const std::string text = name + shape_text(shape, pitch);
  if (pitch.size() >= shape.size())
    throw Error("tensor " + text + " gives " + std::to_string(pitch.size()) +
                " strides for rank " + std::to_string(shape.size()) + "; after '|' come the "
                "strides of the dimensions outside the innermost (whose stride is 1): the row "
                "pitch last, batch strides before it, at most " +
                std::to_string(shape.size() - 1));
  for (int64_t p : pitch)
    if (p <= 0)
      throw Error("tensor " + text + ": a stride must be a positive number of elements, found " +
                  std::to_string(p));
  // Non-overlap, where the sizes are numbers (symbolic ones are checked when bound): each
  // stride at least the extent of one entry of the dimensions inside it.
  // Sizes and strides as numbers, -1 where a symbol leaves them unknown until bound.
  const size_t r = shape.size();
  auto known = [&](size_t d) -> int64_t { return shape[d].is_sym() ? -1 : shape[d].value; };
  std::vector<int64_t> stride(r, -1);
  stride[r - 1] = 1;
  for (size_t i = r - 1; i-- > 0;) {
    const size_t from_end = r - 2 - i;
    if (from_end < pitch.size()) stride[i] = pitch[pitch.size() - 1 - from_end];
    else if (stride[i + 1] >= 0 && known(i + 1) >= 0) stride[i] = known(i + 1) * stride[i + 1];
  }
  int64_t extent = known(r - 1);  // elements one entry of dims i+1.. spans
  for (size_t i = r - 1; i-- > 0;) {
    if (stride[i] >= 0 && extent >= 0 && stride[i] < extent) {
      const bool row = i + 2 == r;
      throw Error("tensor " + text + ": its " +
                  (row ? std::string("row pitch") : "stride of dimension " + std::to_string(i)) +
                  " " + std::to_string(stride[i]) + " is below the " + std::to_string(extent) +
                  (row ? " elements of a row" : " elements one entry of the dimensions inside "
                                                "it spans") +
                  ", so elements would overlap; give at least " + std::to_string(extent) +
                  " (the buffer's real " + (row ? "row length" : "stride") + ")");
    }
    extent = stride[i] >= 0 && extent >= 0 && known(i) >= 0 ? (known(i) - 1) * stride[i] + extent
                                                            : -1;
  }
}

const Node& GraphBuilder::contraction_operand(TensorRef r, const std::string& op,
                                              const char* role) const {
  const Node& n = node(r, op);
  if (n.kind != OpKind::Input) {
    throw Error(op + ": operand " + role + " is " + operand_text(n) +
                ", but the operands of a contraction must be input tensors; " +
                kOneContraction);
  }
  return n;
}

TensorRef GraphBuilder::contract(const std::string& op, const Node& a, const Node& b,
                                 const std::string& a_text, const std::string& b_text,
                                 std::optional<DType> out) {
  if (a.dtype != b.dtype) {
    throw Error(op + ": dtype mismatch: " + a.name + " is " + dtype_name(a.dtype) + " but " +
                b.name + " is " + dtype_name(b.dtype) +
                " (both operands must have the same dtype)");
  }
  const size_t ra = a.shape.size(), rb = b.shape.size();
  // Batch dims: the longer operand's lead; the other's, if any, must be its trailing ones
  // (numpy's alignment) — an operand without them is shared by every batch entry.
  const std::vector<Dim>& lead = ra >= rb ? a.shape : b.shape;
  const size_t nb = std::max(ra, rb) - 2, shorter = std::min(ra, rb) - 2;
  if (shorter != 0 && shorter != nb) {
    // [B,H,M,K] x [H,K,N]: the shared operand would repeat every H entries, a batch
    // stride that is neither one matrix per entry nor zero.
    throw Error(op + ": " + a_text + " has " + std::to_string(ra - 2) + " batch dims and " +
                b_text + " " + std::to_string(rb - 2) + "; an operand has all of the result's "
                "batch dims or none (shared by every batch entry): give both the same batch "
                "dims, or one none");
  }
  for (size_t i = 0; i < shorter; ++i) {
    const Dim& da = a.shape[ra - 3 - i];
    const Dim& db = b.shape[rb - 3 - i];
    if (!(da == db)) {
      throw Error(op + ": batch dimensions differ: " + a_text + " has batch " + da.str() +
                  " but " + b_text + " has batch " + db.str() +
                  " (batch dims must be equal; an operand shared by every batch entry leaves "
                  "them out, e.g. [B,M,K] x [K,N])");
    }
  }
  if (!(a.shape[ra - 1] == b.shape[rb - 2])) {
    throw Error(op + ": inner dimensions differ: " + a_text + " has K=" +
                a.shape[ra - 1].str() + " but " + b_text + " has K=" + b.shape[rb - 2].str());
  }
  DType dtype = (a.dtype == DType::F32 || a.dtype == DType::TF32) ? DType::F32 : a.dtype;
  if (out) {
    if (*out == DType::TF32) {
      throw Error(op + ": out=tf32 is not allowed: tf32 is an input-only type (its values "
                       "are stored as f32); use out=f32");
    }
    if (*out != DType::F32 && *out != DType::F16 && *out != DType::BF16) {
      throw Error(op + ": out=" + dtype_name(*out) + " is not supported; out= may be f32, "
                       "f16 or bf16");
    }
    dtype = *out;
  }
  Node n;
  n.kind = OpKind::Matmul;
  n.name = "matmul";
  n.origin = op;
  n.dtype = dtype;
  n.inputs = {a.id, b.id};
  n.shape.assign(lead.begin(), lead.begin() + long(nb));
  n.shape.push_back(a.shape[ra - 2]);
  n.shape.push_back(b.shape.back());
  return push(std::move(n));
}

TensorRef GraphBuilder::matmul(TensorRef a, TensorRef b, std::optional<DType> out) {
  const Node& na = contraction_operand(a, "matmul", "A");
  const Node& nb = contraction_operand(b, "matmul", "B");
  size_t ra = na.shape.size(), rb = nb.shape.size();
  if (ra < 2 || ra > 4 || rb < 2 || rb > 4) {
    throw Error("matmul: operands must be of rank 2 to 4 ([M,K] x [K,N] under up to two batch "
                "dims, e.g. [B,H,M,K] x [B,H,K,N] or [B,M,K] x [K,N]); got " + operand_text(na) +
                " of rank " + std::to_string(ra) + " and " + operand_text(nb) + " of rank " +
                std::to_string(rb));
  }
  return contract("matmul", Node(na), Node(nb), operand_text(na), operand_text(nb), out);
}

TensorRef GraphBuilder::bmm(TensorRef a, TensorRef b, std::optional<DType> out) {
  const Node& na = contraction_operand(a, "bmm", "A");
  const Node& nb = contraction_operand(b, "bmm", "B");
  if (na.shape.size() != 3 || nb.shape.size() != 3) {
    throw Error("bmm: operands must both be rank 3 ([B,M,K] x [B,K,N]; use matmul for "
                "rank 2); got " + operand_text(na) + " of rank " +
                std::to_string(na.shape.size()) + " and " + operand_text(nb) + " of rank " +
                std::to_string(nb.shape.size()));
  }
  return contract("bmm", Node(na), Node(nb), operand_text(na), operand_text(nb), out);
}

TensorRef GraphBuilder::linear(TensorRef x, TensorRef w, std::optional<TensorRef> bias,
                               std::optional<DType> out) {
  Node nx = contraction_operand(x, "linear", "X");
  Node nw = contraction_operand(w, "linear", "W");
  // X [..., K] under up to two leading dims (torch's F.linear on [B,S,K]): a matmul whose
  // W is shared by every batch entry.
  if (nx.shape.size() < 2 || nx.shape.size() > 4 || nw.shape.size() != 2) {
    throw Error("linear: X must be [M,K], [B,S,K] or [B,H,S,K] and W rank 2 [N,K]; got " +
                operand_text(nx) +
                " of rank " + std::to_string(nx.shape.size()) + " and " + operand_text(nw) +
                " of rank " + std::to_string(nw.shape.size()));
  }
  if (bias) node(*bias, "linear");
  // linear multiplies by Wᵀ: the same storage read with the other orientation.
  size_t before = nodes_.size();
  TensorRef wt = input(nw.name, nw.storage_shape(), nw.dtype, !nw.transposed, nw.pitch);
  if (size_t(wt.id) >= before) nodes_[wt.id].column = nw.column;
  TensorRef y = contract("linear", nx, Node(nodes_[wt.id]), operand_text(nx),
                         operand_text(nw), out);
  if (bias) y = binary("add", ScalarOp::Add, y, *bias, "linear");
  return y;
}

TensorRef GraphBuilder::attention(TensorRef q, TensorRef k, TensorRef v,
                                  const AttentionOptions& opt) {
  const char* op = "attention";
  const Node* n[3] = {&node(q, op), &node(k, op), &node(v, op)};
  const char* role[3] = {"Q", "K", "V"};
  const bool varlen = opt.cu_seqlens_q || opt.cu_seqlens_k || opt.max_seqlen_q;
  if (varlen && !(opt.cu_seqlens_q && opt.cu_seqlens_k && opt.max_seqlen_q))
    throw Error("attention: varlen takes cu_seqlens_q=CQ[B+1]:i32, cu_seqlens_k=CK[B+1]:i32 and "
                "max_seqlen_q=<number> together; missing " +
                std::string(!opt.cu_seqlens_q ? "cu_seqlens_q=" : !opt.cu_seqlens_k ? "cu_seqlens_k="
                                                                                 : "max_seqlen_q="));
  if (varlen && (opt.block_table || opt.seqlens_k))
    throw Error("attention: varlen (cu_seqlens_q=) with paged KV (block_table=) is not built: "
                "use one form");
  for (int i = 0; i < 3; ++i) {
    if (n[i]->kind != OpKind::Input)
      throw Error(std::string("attention: operand ") + role[i] + " is " + operand_text(*n[i]) +
                  ", but the operands of attention must be input tensors");
    if (!n[i]->pitch.empty())
      throw Error(std::string("attention: ") + role[i] + " is " + operand_text(*n[i]) +
                  ", a pitched view; attention reads dense Q, K and V (pitches are for "
                  "matmul, bmm and linear): drop the '|' strides and pass a contiguous tensor");
    if (n[i]->transposed)
      throw Error(std::string("attention: ") + role[i] + " is " + operand_text(*n[i]) +
                  "; attention reads Q, K and V as stored, [B,H,S,D] row-major (drop .T)");
    if (n[i]->shape.size() != (varlen ? 3u : 4u))
      throw Error(std::string("attention: ") + role[i] +
                  (varlen ? " must be rank 3 [T,H,D] with cu_seqlens (packed sequences), got "
                          : " must be rank 4 [B,H,S,D], got ") +
                  operand_text(*n[i]) + " of rank " + std::to_string(n[i]->shape.size()));
  }
  const Node &nq = *n[0], &nk = *n[1], &nv = *n[2];
  const bool paged = opt.block_table.has_value();
  if (opt.block_table.has_value() != opt.seqlens_k.has_value())
    throw Error(std::string("attention: ") +
                (paged ? "block_table= needs seqlens_k=" : "seqlens_k= needs block_table=") +
                " too: paged KV takes the block table BT[B,maxp]:i32 and the key lengths "
                "L[B]:i32 together (for dense K and V give neither)");
  for (const Node* o : {&nk, &nv}) {
    if (o->dtype != nq.dtype)
      throw Error("attention: dtype mismatch: " + nq.name + " is " + dtype_name(nq.dtype) +
                  " but " + o->name + " is " + dtype_name(o->dtype) +
                  " (Q, K and V must have the same dtype)");
  }
  if (nq.dtype != DType::F16 && nq.dtype != DType::BF16)
    throw Error(std::string("attention: Q, K and V are ") + dtype_name(nq.dtype) +
                "; attention takes f16 or bf16 (it multiplies with 16-bit tensor-core "
                "atoms and accumulates in f32)");
  auto differ = [&](const Node& a, const Node& b, int d, const char* what) {
    if (a.shape[d] == b.shape[d]) return;
    throw Error(std::string("attention: ") + what + " differ: " + operand_text(a) + " has " +
                a.shape[d].str() + " but " + operand_text(b) + " has " + b.shape[d].str());
  };
  std::vector<int> inputs = {q.id, k.id, v.id};
  if (varlen) {
    const Node& cq = node(*opt.cu_seqlens_q, op);
    const Node& ck = node(*opt.cu_seqlens_k, op);
    for (const auto& [x, what] : {std::pair{&cq, "cu_seqlens_q"}, std::pair{&ck, "cu_seqlens_k"}}) {
      if (x->kind != OpKind::Input || x->transposed)
        throw Error(std::string("attention: ") + what + "= must be an input tensor [B+1]:i32, got " +
                    operand_text(*x));
      if (x->dtype != DType::I32)
        throw Error(std::string("attention: ") + what + "= is " + operand_text(*x) + " of dtype " +
                    dtype_name(x->dtype) + "; it holds cumulative sequence lengths (0, len0, "
                    "len0 + len1, ...): write it as [B+1]:i32");
      if (x->shape.size() != 1 || x->shape[0].is_sym() || x->shape[0].value < 2)
        throw Error(std::string("attention: ") + what + "= must be [B+1]:i32 with a numeric B+1 "
                    ">= 2 (B sequences' cumulative lengths, starting at 0), got " + operand_text(*x));
    }
    differ(cq, ck, 0, "sequence counts (B+1 of cu_seqlens_q vs cu_seqlens_k)");
    if (*opt.max_seqlen_q < 1)
      throw Error("attention: max_seqlen_q=" + std::to_string(*opt.max_seqlen_q) + " must be at "
                  "least 1 (the longest sequence's query count: the kernel's grid is sized by it)");
    if (!nq.shape[0].is_sym() && *opt.max_seqlen_q > nq.shape[0].value)
      throw Error("attention: max_seqlen_q=" + std::to_string(*opt.max_seqlen_q) + " exceeds the "
                  "packed queries of " + operand_text(nq) + " (" + nq.shape[0].str() + " tokens)");
    inputs.push_back(opt.cu_seqlens_q->id);
    inputs.push_back(opt.cu_seqlens_k->id);
  } else if (paged) {
    const Node& bt = node(*opt.block_table, op);
    const Node& len = node(*opt.seqlens_k, op);
    for (const auto& [x, what, shape] :
         {std::tuple{&bt, "block_table", "BT[B,maxp]:i32"}, std::tuple{&len, "seqlens_k", "L[B]:i32"}}) {
      if (x->kind != OpKind::Input || x->transposed)
        throw Error(std::string("attention: ") + what + "= must be an input tensor " + shape +
                    ", got " + operand_text(*x));
      if (x->dtype != DType::I32)
        throw Error(std::string("attention: ") + what + "= is " + operand_text(*x) + " of dtype " +
                    dtype_name(x->dtype) + "; it holds " +
                    (x == &bt ? "page numbers" : "key counts") + ": write it as " + shape);
    }
    if (bt.shape.size() != 2)
      throw Error("attention: block_table= must be rank 2 [B,maxp] (row b lists sequence b's "
                  "pages in key order), got " + operand_text(bt));
    if (len.shape.size() != 1)
      throw Error("attention: seqlens_k= must be rank 1 [B] (sequence b's key count), got " +
                  operand_text(len));
    differ(nq, bt, 0, "batch sizes (B of Q vs block_table)");
    differ(nq, len, 0, "batch sizes (B of Q vs seqlens_k)");
    const Dim& page = nk.shape[2];
    if (page.is_sym() || page.value < kMinPage || page.value > kMaxPage ||
        (page.value & (page.value - 1)) != 0)
      throw Error("attention: with block_table= K and V are page pools [P,Hkv,page,D]; the "
                  "page size (dim 2 of " + operand_text(nk) + ") is " + page.str() +
                  ", but it must be a power of two from " + std::to_string(kMinPage) + " to " +
                  std::to_string(kMaxPage) + " (a key block lies within one page)");
    inputs.push_back(opt.block_table->id);
    inputs.push_back(opt.seqlens_k->id);
  } else {
    differ(nq, nk, 0, "batch sizes (B of Q vs K)");
  }
  const int hd = varlen ? 1 : 2;  // varlen: [T,H,D]; else [B,H,S,D]
  differ(nq, nk, hd + 1, "head dims (D of Q vs K)");
  differ(nk, nv, 1, "key/value heads (Hkv of K vs V)");
  if (varlen) differ(nk, nv, 0, "packed key counts (Tk of K vs V)");
  else differ(nk, nv, 2, paged ? "page sizes (dim 2 of K vs V)" : "key lengths (Sk of K vs V)");
  if (paged) differ(nk, nv, 0, "page counts (P of K vs V)");
  differ(nk, nv, hd + 1, "head dims (D of K vs V)");
  if (!attention_kv_group(nq.shape[1], nk.shape[1]))
    throw Error("attention: Q's heads Hq=" + nq.shape[1].str() + " (" + operand_text(nq) +
                ") are not a multiple of K's Hkv=" + nk.shape[1].str() + " (" +
                operand_text(nk) + "); GQA needs Hq = g * Hkv, with numbers, equal symbols "
                "or Hkv = 1");
  AttentionAttrs attrs;
  attrs.causal = opt.causal;
  attrs.lse = opt.lse;
  if (varlen) attrs.max_seqlen_q = *opt.max_seqlen_q;
  if (opt.scale) {
    if (!std::isfinite(*opt.scale) || *opt.scale <= 0.0)
      throw Error("attention: scale must be a positive finite number, got " +
                  std::to_string(*opt.scale));
    if (const std::string why = attention_scale_problem(*opt.scale); !why.empty())
      throw Error("attention: scale=" + shortest_text(*opt.scale) + " " + why);
    attrs.scale = *opt.scale;
  } else {
    const Dim& d = nq.shape.back();
    if (d.is_sym())
      throw Error("attention: the default scale is 1/sqrt(D), but D is the symbol " + d.sym +
                  "; give the head dim as a number or pass scale=");
    attrs.scale = 1.0 / std::sqrt(double(d.value));
  }
  Node out;
  out.kind = OpKind::Attention;
  out.name = out.origin = op;
  out.dtype = nq.dtype;
  out.shape = nq.shape;
  out.inputs = std::move(inputs);
  out.attention = attrs;
  return push(std::move(out));
}

TensorRef GraphBuilder::unary(const char* name, ScalarOp op, TensorRef x) {
  const Node& nx = node(x, name);
  no_epilogue_on_attention(nx, name);
  if (nx.kind == OpKind::Input) {
    throw Error(std::string(name) + ": its operand " + operand_text(nx) +
                " is an input tensor, not computed by a contraction; " + kOneContraction);
  }
  Node n;
  n.kind = OpKind::Unary;
  n.name = n.origin = name;
  n.op = op;
  n.dtype = nx.dtype;
  n.shape = nx.shape;
  n.inputs = {x.id};
  return push(std::move(n));
}

TensorRef GraphBuilder::binary(const char* name, ScalarOp op, TensorRef x, TensorRef y,
                               const std::string& origin) {
  std::string label = origin == name ? std::string(name) : origin;
  const Node* nx = &node(x, label);
  const Node* ny = &node(y, label);
  no_epilogue_on_attention(*nx, label);
  no_epilogue_on_attention(*ny, label);
  bool x_chain = nx->kind != OpKind::Input, y_chain = ny->kind != OpKind::Input;
  if (x_chain && y_chain) {
    throw Error(label + ": both operands are computed by a contraction (" + operand_text(*nx) +
                " and " + operand_text(*ny) + "); " + kOneContraction +
                " — split it into two expressions");
  }
  if (!x_chain && !y_chain) {
    throw Error(label + ": neither operand (" + operand_text(*nx) + ", " + operand_text(*ny) +
                ") is computed by a contraction; " + kOneContraction);
  }
  if (y_chain) {
    if (op == ScalarOp::Sub) {
      throw Error("sub: the contraction's result must be the first operand; for " +
                  operand_text(*nx) + " minus it, write add(mul(x, -1), " + nx->name + ")");
    }
    std::swap(nx, ny);
    std::swap(x, y);
  }
  // numpy broadcasting, restricted so that the result keeps the contraction's shape:
  // the epilogue writes exactly one element per accumulator element.
  const std::vector<Dim>& to = nx->shape;
  const std::vector<Dim>& from = ny->shape;
  bool ok = from.size() <= to.size();
  for (size_t i = 0; ok && i < from.size(); ++i) {
    const Dim& f = from[from.size() - 1 - i];
    const Dim& t = to[to.size() - 1 - i];
    ok = f == t || (!f.is_sym() && f.value == 1);
  }
  if (!ok) {
    throw Error(label + ": " + operand_text(*ny) + " does not broadcast to " + shape_text(to) +
                ", the shape of " + operand_text(*nx) +
                " (an elementwise operand may drop leading dimensions or have size-1 "
                "dimensions, numpy-style, but must not grow the result)");
  }
  Node n;
  n.kind = OpKind::Binary;
  n.name = name;
  n.origin = origin;
  n.op = op;
  n.dtype = nx->dtype;
  n.shape = nx->shape;
  n.inputs = {x.id, y.id};
  return push(std::move(n));
}

TensorRef GraphBuilder::binary(const char* name, ScalarOp op, TensorRef x, double y) {
  const Node& nx = node(x, name);
  no_epilogue_on_attention(nx, name);
  if (nx.kind == OpKind::Input) {
    throw Error(std::string(name) + ": its operand " + operand_text(nx) +
                " is an input tensor, not computed by a contraction; " + kOneContraction);
  }
  if (!std::isfinite(y)) {
    throw Error(std::string(name) + ": the number operand must be finite");
  }
  if (const std::string why = f32_constant_problem(y); !why.empty()) {
    throw Error(std::string(name) + ": the number operand " + shortest_text(y) + " " + why +
                "; the epilogue computes in f32");
  }
  Node n;
  n.kind = OpKind::Binary;
  n.name = n.origin = name;
  n.op = op;
  n.dtype = nx.dtype;
  n.shape = nx.shape;
  n.inputs = {x.id};
  n.scalar = y;
  return push(std::move(n));
}

TensorRef GraphBuilder::relu(TensorRef x) { return unary("relu", ScalarOp::Relu, x); }
TensorRef GraphBuilder::gelu(TensorRef x) { return unary("gelu", ScalarOp::Gelu, x); }
TensorRef GraphBuilder::gelu_tanh(TensorRef x) { return unary("gelu_tanh", ScalarOp::GeluTanh, x); }
TensorRef GraphBuilder::silu(TensorRef x) { return unary("silu", ScalarOp::Silu, x); }
TensorRef GraphBuilder::add(TensorRef x, TensorRef y) {
  return binary("add", ScalarOp::Add, x, y, "add");
}
TensorRef GraphBuilder::add(TensorRef x, double y) { return binary("add", ScalarOp::Add, x, y); }
TensorRef GraphBuilder::sub(TensorRef x, TensorRef y) {
  return binary("sub", ScalarOp::Sub, x, y, "sub");
}
TensorRef GraphBuilder::sub(TensorRef x, double y) { return binary("sub", ScalarOp::Sub, x, y); }
TensorRef GraphBuilder::mul(TensorRef x, TensorRef y) {
  return binary("mul", ScalarOp::Mul, x, y, "mul");
}
TensorRef GraphBuilder::mul(TensorRef x, double y) { return binary("mul", ScalarOp::Mul, x, y); }
TensorRef GraphBuilder::max(TensorRef x, TensorRef y) {
  return binary("max", ScalarOp::Max, x, y, "max");
}
TensorRef GraphBuilder::max(TensorRef x, double y) { return binary("max", ScalarOp::Max, x, y); }

Graph GraphBuilder::build(TensorRef result, const std::vector<int64_t>& out_pitch) const {
  const Node& top = node(result, "build");
  if (top.kind == OpKind::Input) {
    throw Error("the expression has no contraction, only the tensor " + operand_text(top) +
                "; " + kOneContraction);
  }
  // Operands first, in operand order (post-order from the result): the numbering then
  // depends only on what the result computes, not on the order the caller made the
  // nodes in, so C++ and text give identical graphs. Nodes the result does not use are
  // left out.
  std::vector<int> new_id(nodes_.size(), -1);
  Graph g;
  int contractions = 0;
  std::function<void(int)> visit = [&](int old) {
    if (new_id[old] >= 0) return;
    for (int in : nodes_[old].inputs) visit(in);
    Node n = nodes_[old];
    // i32 tensors are indices (attention's block table, key lengths, cumulative
    // lengths), never values.
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Node& x = nodes_[n.inputs[i]];
      if (x.dtype == DType::I32 && !(n.kind == OpKind::Attention && i >= 3))
        throw Error(n.name + ": operand " + operand_text(x) + " is i32; i32 tensors are only "
                    "attention's block_table=, seqlens_k=, cu_seqlens_q= and cu_seqlens_k= "
                    "(page numbers and lengths); give values as f32, tf32, f16 or bf16");
    }
    n.id = int(g.nodes.size());
    for (int& in : n.inputs) in = new_id[in];
    new_id[old] = n.id;
    contractions += n.kind == OpKind::Matmul || n.kind == OpKind::Attention;
    g.nodes.push_back(std::move(n));
  };
  visit(result.id);
  // The elementwise ops refuse a second contraction as they are built, so only a bug
  // could break this.
  LOOM_CHECK(contractions == 1, "a built graph holds exactly one contraction or attention");
  if (!out_pitch.empty()) {
    const Node& r = g.nodes.back();
    if (r.kind == OpKind::Attention)
      throw Error("out_pitch=: attention writes a dense O (a pitched output is for matmul, bmm "
                  "and linear); drop out_pitch=");
    check_pitch("out", r.shape, out_pitch);
    // The epilogue stores 16-byte vectors and TMA boxes from the start of every row.
    for (int64_t p : out_pitch)
      if (p * dtype_bytes(r.dtype) % 16 != 0)
        throw Error("out_pitch=" + std::to_string(p) + ": the output's rows must start at "
                    "16-byte units (" + std::to_string(p) + " x " +
                    std::to_string(dtype_bytes(r.dtype)) + " B of " + dtype_name(r.dtype) +
                    " is not), for the epilogue's vector and TMA stores; give a multiple of " +
                    std::to_string(16 / dtype_bytes(r.dtype)));
    g.out_pitch = out_pitch;
  }
  g.verify();
  check_tensor_sizes(g);
  return g;
}

}  // namespace loom
