#include "ir/graph.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>

#include "ir/error.h"
#include "ir/f32_constant.h"

namespace loom {
namespace {

std::string shape_str(const std::vector<Dim>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].str();
  return s + "]";
}

// Shortest text that reads back as the same double (0.5, not 0.500000).
std::string number_str(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum((unsigned char)c) || c == '_')) return false;
  }
  return true;
}

// numpy broadcasting of `from` onto `to` that never grows `to`.
bool broadcasts_to(const std::vector<Dim>& from, const std::vector<Dim>& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 1; i <= from.size(); ++i) {
    const Dim& f = from[from.size() - i];
    if (!(f == to[to.size() - i]) && (f.is_sym() || f.value != 1)) return false;
  }
  return true;
}

bool is_input_dtype(DType t) {
  return t == DType::F32 || t == DType::TF32 || t == DType::F16 || t == DType::BF16 ||
         t == DType::I32;  // i32: attention's block table and key lengths (indices)
}

}  // namespace

std::optional<Expr> attention_kv_group(const Dim& hq, const Dim& hkv) {
  if (hq == hkv) return Expr(1);
  if (!hq.is_sym() && !hkv.is_sym()) {
    if (hq.value % hkv.value != 0) return std::nullopt;
    return Expr(hq.value / hkv.value);
  }
  if (!hkv.is_sym() && hkv.value == 1) return hq.expr();
  return std::nullopt;
}

const char* causal_name(Causal c) {
  switch (c) {
    case Causal::None: return "false";
    case Causal::BottomRight: return "true";
    case Causal::TopLeft: return "top_left";
  }
  return "?";
}

const Node* Graph::attention() const {
  for (const Node& n : nodes)
    if (n.kind == OpKind::Attention) return &n;
  return nullptr;
}

std::vector<Dim> Node::storage_shape() const {
  std::vector<Dim> s = shape;
  if (transposed && s.size() >= 2) std::swap(s[s.size() - 2], s.back());
  return s;
}

namespace {

// The strides of every dim of `s` but the innermost, from a suffix of them (`pitch`): the
// outer ones not given are dense over the inner ones.
std::vector<Expr> strides_of(const std::vector<Dim>& s, const std::vector<int64_t>& pitch) {
  if (pitch.empty()) return {};
  std::vector<Expr> out(s.size() - 1, Expr(0));
  const size_t given = pitch.size();
  for (size_t i = out.size(); i-- > 0;) {
    const size_t from_end = out.size() - 1 - i;
    out[i] = from_end < given ? Expr(pitch[given - 1 - from_end])
                              : s[i + 1].expr() * out[i + 1];  // dense over the inner ones
  }
  return out;
}

}  // namespace

std::vector<Expr> Node::storage_strides() const { return strides_of(storage_shape(), pitch); }

std::vector<Expr> Graph::out_strides() const {
  return nodes.empty() ? std::vector<Expr>{} : strides_of(nodes.back().shape, out_pitch);
}

Dim Node::stride_unit() const {
  if (pitch.empty()) return storage_shape().back();
  int64_t g = 0;
  for (int64_t p : pitch) g = std::gcd(g, p);
  return Dim{g, {}};
}

std::vector<std::string> Graph::symbols() const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const Node& n : nodes) {
    // Inputs in storage order: the order in which the user wrote the dimensions.
    for (const Dim& d : n.kind == OpKind::Input ? n.storage_shape() : n.shape) {
      if (d.is_sym() && seen.insert(d.sym).second) out.push_back(d.sym);
    }
  }
  return out;
}

void Graph::rename_symbol(const std::string& from, const std::string& to) {
  for (Node& n : nodes)
    for (Dim& d : n.shape)
      if (d.sym == from) d.sym = to;
}

std::string Graph::str() const {
  std::string s;
  for (const Node& n : nodes) {
    s += "%" + std::to_string(n.id) + " = ";
    if (n.kind == OpKind::Input) {
      s += "input " + n.name + ": " + dtype_name(n.dtype) + shape_str(n.storage_shape());
      if (!n.pitch.empty()) {
        s.pop_back();  // the shape's ']': the pitch is written inside, A[M, K|1056]
        for (size_t i = 0; i < n.pitch.size(); ++i)
          s += (i ? ", " : "|") + std::to_string(n.pitch[i]);
        s += "]";
      }
      if (n.transposed) s += " .T  (logical " + shape_str(n.shape) + ")";
    } else {
      s += n.name + "(";
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        s += (i ? ", %" : "%") + std::to_string(n.inputs[i]);
      }
      if (n.scalar) s += ", " + number_str(*n.scalar);
      if (n.kind == OpKind::Attention) {
        s += std::string(", causal=") + causal_name(n.attention.causal) +
             ", scale=" + number_str(n.attention.scale) + (n.attention.lse ? ", lse=true" : "") +
             (n.attention.max_seqlen_q > 0
                  ? ", max_seqlen_q=" + std::to_string(n.attention.max_seqlen_q) : "");
      }
      s += std::string("): ") + dtype_name(n.dtype) + shape_str(n.shape);
      if (n.kind == OpKind::Attention && n.attention.lse) {
        std::vector<Dim> rows(n.shape.begin(), n.shape.end() - 1);
        s += " + lse: f32" + shape_str(rows);
      }
      if (!n.origin.empty() && n.origin != n.name) s += "  (from " + n.origin + ")";
    }
    s += "\n";
  }
  if (!out_pitch.empty()) {
    s += "output pitch |";
    for (size_t i = 0; i < out_pitch.size(); ++i) s += (i ? ", " : "") + std::to_string(out_pitch[i]);
    s += " (a view into a larger buffer)\n";
  }
  for (const auto& [spelled, user] : symbol_names)
    s += "symbol " + spelled + " is the user's " + user + " (spelled apart from a generated name)\n";
  return s;
}

void Graph::verify() const {
  if (nodes.empty()) throw Error("graph: no nodes (a graph needs at least its result)");
  if (out_pitch.size() >= nodes.back().shape.size() && !out_pitch.empty())
    throw Error("graph: the output pitch gives more than rank - 1 strides");
  std::set<std::string> tensor_names, symbol_names;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    std::string at = "graph: %" + std::to_string(i) + " (" + n.name + "): ";
    auto fail = [&](const std::string& what) { throw Error(at + what); };

    if (n.id != int(i)) fail("has id " + std::to_string(n.id) + "; ids must equal positions");
    for (int in : n.inputs) {
      if (in < 0 || in >= int(i)) {
        fail("reads %" + std::to_string(in) +
             ", which is not defined before it (nodes must be in topological order)");
      }
    }
    if (n.shape.empty()) fail("has an empty shape");
    for (const Dim& d : n.shape) {
      if (d.is_sym() ? !is_identifier(d.sym) : d.value <= 0) {
        fail("dimension '" + d.str() + "' is neither a positive integer nor an identifier");
      }
      if (d.is_sym()) symbol_names.insert(d.sym);
    }
    auto operand = [&](size_t k) -> const Node& { return nodes[n.inputs[k]]; };

    switch (n.kind) {
      case OpKind::Input: {
        if (!n.inputs.empty() || n.scalar) fail("an input has no operands");
        if (!is_identifier(n.name)) fail("tensor name '" + n.name + "' is not an identifier");
        if (n.name == "out" || n.name == "lse")
          fail("tensor name '" + n.name + "' is reserved: the program's result" +
               (n.name == "lse" ? "s are out and lse" : " is out") + "; rename the input");
        if (!is_input_dtype(n.dtype)) {
          fail(std::string("dtype ") + dtype_name(n.dtype) + " is not an input dtype");
        }
        if (n.transposed && n.shape.size() < 2) fail(".T needs rank >= 2");
        if (n.pitch.size() >= n.shape.size()) fail("a pitch gives at most rank - 1 strides");
        for (int64_t p : n.pitch)
          if (p <= 0) fail("a pitch is a positive number of elements");
        for (size_t j = 0; j < i; ++j) {
          const Node& o = nodes[j];
          if (o.kind == OpKind::Input && o.name == n.name &&
              (o.storage_shape() != n.storage_shape() || o.dtype != n.dtype ||
               o.pitch != n.pitch)) {
            fail("tensor " + n.name + " is also %" + std::to_string(j) +
                 " with a different storage shape, pitch or dtype");
          }
        }
        tensor_names.insert(n.name);
        break;
      }
      case OpKind::Matmul: {
        if (n.inputs.size() != 2 || n.scalar) fail("a matmul takes two operands");
        const Node& a = operand(0);
        const Node& b = operand(1);
        const size_t ra = a.shape.size(), rb = b.shape.size();
        if (ra < 2 || ra > 4 || rb < 2 || rb > 4) {
          fail("operands " + shape_str(a.shape) + " and " + shape_str(b.shape) +
               " are not of rank 2 to 4");
        }
        if (a.dtype != b.dtype) fail("operand dtypes differ");
        if (!(a.shape[ra - 1] == b.shape[rb - 2])) fail("inner dimensions differ");
        // An operand has all of the result's batch dims or none (shared by every entry).
        if (ra != rb && std::min(ra, rb) != 2) fail("one operand has some batch dims, not all");
        for (size_t i = 0; i + 2 < std::min(ra, rb); ++i)
          if (!(a.shape[ra - 3 - i] == b.shape[rb - 3 - i])) fail("batch dimensions differ");
        const std::vector<Dim>& lead = ra >= rb ? a.shape : b.shape;
        std::vector<Dim> expect(lead.begin(), lead.end() - 2);
        expect.push_back(a.shape[ra - 2]);
        expect.push_back(b.shape.back());
        if (n.shape != expect) {
          fail("shape " + shape_str(n.shape) + " should be " + shape_str(expect));
        }
        if (n.dtype != DType::F32 && n.dtype != DType::F16 && n.dtype != DType::BF16) {
          fail(std::string("output dtype ") + dtype_name(n.dtype) +
               " is not one of f32, f16, bf16");
        }
        break;
      }
      case OpKind::Attention: {
        if ((n.inputs.size() != 3 && n.inputs.size() != 5) || n.scalar)
          fail("attention takes three operands (Q, K, V) or five (Q, Kc, Vc, BT, L: paged; Q, K, "
               "V, CQ, CK: varlen)");
        const Node& q = operand(0);
        const Node& k = operand(1);
        const Node& v = operand(2);
        const bool paged = n.paged_attention();
        if (paged) {
          const Node& bt = operand(3);
          const Node& len = operand(4);
          if (bt.dtype != DType::I32 || len.dtype != DType::I32)
            fail("the block table and key lengths must be i32");
          if (bt.shape.size() != 2 || len.shape.size() != 1) fail("BT must be [B,maxp], L [B]");
          if (!(bt.shape[0] == q.shape[0]) || !(len.shape[0] == q.shape[0]))
            fail("BT's and L's batch sizes differ from Q's");
          const Dim& page = k.shape.size() == 4 ? k.shape[2] : Dim{};
          if (page.is_sym() || page.value < kMinPage || page.value > kMaxPage ||
              (page.value & (page.value - 1)) != 0)
            fail("the page size " + page.str() + " is not a power of two from 16 to 256");
        }
        const bool varlen = n.varlen_attention();
        const size_t rank = varlen ? 3 : 4;
        if (varlen) {
          const Node& cq = operand(3);
          const Node& ck = operand(4);
          if (cq.dtype != DType::I32 || ck.dtype != DType::I32)
            fail("the cumulative lengths must be i32");
          if (cq.shape.size() != 1 || !(cq.shape == ck.shape) || cq.shape[0].is_sym() ||
              cq.shape[0].value < 2)
            fail("CQ and CK must be [B+1] with the same numeric B + 1 >= 2");
        }
        if (q.shape.size() != rank || k.shape.size() != rank || v.shape.size() != rank)
          fail(varlen ? "operands must be rank 3 [T,H,D] (varlen)" : "operands must be rank 4 [B,H,S,D]");
        if (q.dtype != k.dtype || q.dtype != v.dtype) fail("operand dtypes differ");
        if (q.dtype != DType::F16 && q.dtype != DType::BF16)
          fail(std::string("operand dtype ") + dtype_name(q.dtype) + " is not f16 or bf16");
        if (!(k.shape == v.shape)) fail("K " + shape_str(k.shape) + " and V " +
                                        shape_str(v.shape) + " differ");
        if (!paged && !varlen && !(q.shape[0] == k.shape[0]))
          fail("Q and K have different batch sizes");
        if (!(q.shape[rank - 1] == k.shape[rank - 1])) fail("Q and K have different head dims");
        if (!attention_kv_group(q.shape[1], k.shape[1]))
          fail("Q's heads " + q.shape[1].str() + " are not a known multiple of K's " +
               k.shape[1].str());
        if (n.shape != q.shape) fail("shape " + shape_str(n.shape) + " should be Q's " +
                                     shape_str(q.shape));
        if (n.dtype != q.dtype) fail("output dtype differs from Q's");
        if (!(n.attention.scale > 0.0) || !std::isfinite(n.attention.scale))
          fail("scale " + number_str(n.attention.scale) + " is not a positive finite number");
        if (const std::string why = attention_scale_problem(n.attention.scale); !why.empty())
          fail("scale " + number_str(n.attention.scale) + " " + why);
        if (n.id != result()) fail("attention must be the graph's result (no epilogue yet)");
        break;
      }
      case OpKind::Unary:
      case OpKind::Binary: {
        bool unary = n.kind == OpKind::Unary;
        bool unary_op = n.op == ScalarOp::Relu || n.op == ScalarOp::Gelu || n.op == ScalarOp::GeluTanh ||
                        n.op == ScalarOp::Silu || n.op == ScalarOp::Neg;
        if (unary != unary_op) fail("op does not match the node kind");
        size_t want = unary ? 1 : (n.scalar ? 1 : 2);
        if (n.inputs.size() != want || (unary && n.scalar)) {
          fail("expects " + std::to_string(want) + " tensor operand(s), has " +
               std::to_string(n.inputs.size()));
        }
        const Node& x = operand(0);
        if (n.shape != x.shape) {
          fail("shape " + shape_str(n.shape) + " differs from its first operand's " +
               shape_str(x.shape));
        }
        if (n.dtype != x.dtype) fail("dtype differs from its first operand's");
        if (n.scalar)
          if (const std::string why = f32_constant_problem(*n.scalar); !why.empty())
            fail("number " + number_str(*n.scalar) + " " + why);
        if (n.inputs.size() == 2 && !broadcasts_to(operand(1).shape, n.shape)) {
          fail("operand " + shape_str(operand(1).shape) + " does not broadcast to " +
               shape_str(n.shape));
        }
        break;
      }
    }
  }
  for (const std::string& s : symbol_names) {
    if (tensor_names.count(s)) {
      throw Error("graph: " + s + " names both a tensor and a dimension symbol; rename one "
                  "(they become parameters of the same kernel)");
    }
  }
}

}  // namespace loom
