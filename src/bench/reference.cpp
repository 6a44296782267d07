#include "bench/reference.h"

#include <utility>

#include "bench/broadcast.h"
#include "bench/reference_attention.h"
#include "bench/reference_matmul.h"
#include "ir/error.h"

namespace loom {
namespace {

// A node's value. Inputs keep their storage layout (`transposed` as stored) so that a
// matmul reads a transposed operand in place; elementwise ops see the logical layout.
struct Value {
  std::vector<int64_t> shape;  // logical
  std::vector<double> data;
  bool transposed = false;     // data holds the last two logical dims swapped
};

using Symbols = std::map<std::string, int64_t>;

std::string dims_str(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + dims[i].str();
  return s + "]";
}

// Binds the symbols of an input's storage shape from the tensor given for it.
void bind_input(const Node& n, const HostTensor& t, Symbols& syms) {
  const std::vector<Dim> dims = n.storage_shape();
  const std::string where = "reference: input '" + n.name + "' is declared with storage shape " +
                            dims_str(dims) + " but was given " + shape_str(t.shape);
  if (dims.size() != t.shape.size()) throw Error(where + " (rank differs); pass its storage layout");
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!dims[i].is_sym()) {
      if (dims[i].value != t.shape[i]) throw Error(where + "; pass a tensor of the declared shape");
      continue;
    }
    auto [it, fresh] = syms.emplace(dims[i].sym, t.shape[i]);
    if (!fresh && it->second != t.shape[i])
      throw Error(where + "; symbol " + dims[i].sym + " is already " + std::to_string(it->second) +
                  " from an earlier input, so the sizes disagree");
  }
  if (int64_t(t.data.size()) != shape_numel(t.shape))
    throw Error("reference: input '" + n.name + "' has " + std::to_string(t.data.size()) +
                " values for shape " + shape_str(t.shape) + "; fill every element");
}

std::vector<int64_t> resolve(const std::vector<Dim>& dims, const Symbols& syms) {
  std::vector<int64_t> out;
  for (const Dim& d : dims) {
    if (!d.is_sym()) {
      out.push_back(d.value);
      continue;
    }
    auto it = syms.find(d.sym);
    if (it == syms.end())
      throw Error("reference: symbol " + d.sym + " is bound by no input; give it a size");
    out.push_back(it->second);
  }
  return out;
}

std::vector<int64_t> swap_last_two(std::vector<int64_t> s) {
  if (s.size() >= 2) std::swap(s[s.size() - 1], s[s.size() - 2]);
  return s;
}

// The logical row-major data of a value (undoing a transposed storage).
std::vector<double> logical_data(const Value& v) {
  if (!v.transposed) return v.data;
  const int64_t R = v.shape[v.shape.size() - 2], C = v.shape.back();
  std::vector<double> out(v.data.size());
  for (int64_t m = 0; m < int64_t(out.size()) / (R * C); ++m)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) out[(m * R + r) * C + c] = v.data[(m * C + c) * R + r];
  return out;
}

MatOperand mat_operand(const Value& v, const Node& n) {
  if (v.shape.size() < 2)
    throw Error("reference: matmul operand of node " + std::to_string(n.id) + " has shape " +
                shape_str(v.shape) + "; matmul needs at least 2 dims [..,rows,cols]");
  MatOperand m;
  m.data = v.data.data();
  m.batch.assign(v.shape.begin(), v.shape.end() - 2);
  m.rows = v.shape[v.shape.size() - 2];
  m.cols = v.shape.back();
  m.transposed = v.transposed;
  return m;
}

Value eval_matmul(const Node& n, const Value& a, const Value& b, bool use_gpu) {
  MatOperand ma = mat_operand(a, n), mb = mat_operand(b, n);
  if (ma.cols != mb.rows)
    throw Error("reference: matmul " + shape_str(a.shape) + " x " + shape_str(b.shape) +
                " has reduction lengths " + std::to_string(ma.cols) + " and " +
                std::to_string(mb.rows) + "; they must be equal");
  Value out;
  out.shape = broadcast_shapes(ma.batch, mb.batch);
  out.data = matmul_f64(ma, mb, out.shape, use_gpu);
  out.shape.push_back(ma.rows);
  out.shape.push_back(mb.cols);
  return out;
}

Value eval_elementwise(const Node& n, const std::vector<Value>& vals) {
  const Value& a = vals.at(n.inputs.at(0));
  const std::vector<double> ad = logical_data(a);
  Value out;
  if (n.kind == OpKind::Unary || (n.inputs.size() == 1 && n.scalar)) {
    const double s = n.kind == OpKind::Unary ? 0.0 : *n.scalar;
    out.shape = a.shape;
    out.data.resize(ad.size());
    for (size_t i = 0; i < ad.size(); ++i) out.data[i] = eval_scalar_op(n.op, ad[i], s);
    return out;
  }
  LOOM_CHECK(n.inputs.size() == 2, "binary node needs a second operand or a scalar");
  const Value& b = vals.at(n.inputs[1]);
  const std::vector<double> bd = logical_data(b);
  out.shape = broadcast_shapes(a.shape, b.shape);
  const std::vector<int64_t> ao = broadcast_offsets(a.shape, out.shape);
  const std::vector<int64_t> bo = broadcast_offsets(b.shape, out.shape);
  out.data.resize(ao.size());
  for (size_t i = 0; i < ao.size(); ++i) out.data[i] = eval_scalar_op(n.op, ad[ao[i]], bd[bo[i]]);
  return out;
}

Value eval_attention(const Node& n, const std::vector<Value>& vals) {
  if (n.paged_attention() || n.varlen_attention())
    throw Error("reference_eval: the serving forms of attention (paged, varlen) are evaluated "
                "by reference_attention_paged / reference_attention_varlen");
  const Value &q = vals.at(n.inputs.at(0)), &k = vals.at(n.inputs.at(1));
  AttentionShape sh{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3]};
  Value out;
  out.shape = q.shape;
  out.data = reference_attention(sh, n.attention, q.data, k.data,
                                 vals.at(n.inputs.at(2)).data).out;
  return out;
}

}  // namespace

HostTensor reference_eval(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                          bool use_gpu) {
  if (g.nodes.empty()) throw Error("reference: the graph is empty; nothing to evaluate");
  Symbols syms;
  for (const Node& n : g.nodes) {
    if (n.kind != OpKind::Input) continue;
    auto it = inputs.find(n.name);
    if (it == inputs.end())
      throw Error("reference: no data for input '" + n.name + "'; bind every input tensor");
    bind_input(n, it->second, syms);
  }

  std::vector<Value> vals(g.nodes.size());
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    switch (n.kind) {
      case OpKind::Input: {
        const HostTensor& t = inputs.at(n.name);
        vals[id].shape = n.transposed ? swap_last_two(t.shape) : t.shape;
        vals[id].data = t.data;
        vals[id].transposed = n.transposed && t.shape.size() >= 2;
        break;
      }
      case OpKind::Matmul:
        vals[id] = eval_matmul(n, vals.at(n.inputs.at(0)), vals.at(n.inputs.at(1)), use_gpu);
        break;
      case OpKind::Unary:
      case OpKind::Binary: vals[id] = eval_elementwise(n, vals); break;
      case OpKind::Attention: vals[id] = eval_attention(n, vals); break;
    }
    // The frontend's shape inference and this evaluation must agree.
    LOOM_CHECK(vals[id].shape == resolve(n.shape, syms),
               "node " + std::to_string(id) + " evaluates to " + shape_str(vals[id].shape) +
                   " but the graph declares " + dims_str(n.shape));
  }
  Value& r = vals.back();
  HostTensor out;
  out.dtype = DType::F64;
  out.shape = r.shape;
  out.data = r.transposed ? logical_data(r) : std::move(r.data);
  return out;
}

}  // namespace loom
