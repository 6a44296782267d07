#include "tune/tuning_key.h"

#include <tuple>

#include "ir/error.h"

namespace loom::tune {
namespace {

// Role names of the contraction's output dims: [batch,] M, N.
std::vector<std::string> result_roles(const Node& mm) {
  std::vector<std::string> r;
  for (size_t i = 0; i + 2 < mm.shape.size(); ++i) r.push_back(i ? "batch" + std::to_string(i) : "batch");
  r.push_back("M");
  r.push_back("N");
  return r;
}

std::string dims_text(std::vector<std::string> logical, bool transposed) {
  if (transposed && logical.size() >= 2) std::swap(logical[logical.size() - 2], logical.back());
  std::string s = "[";
  for (size_t i = 0; i < logical.size(); ++i) s += (i ? "," : "") + logical[i];
  return s + "]";
}

struct Signer {
  const Graph& g;
  std::vector<std::string> out_roles;  // roles of the contraction's (and the result's) dims

  std::string input(const Node& n, const std::vector<std::string>& logical_roles) const {
    return std::string(dtype_name(n.dtype)) + dims_text(logical_roles, n.transposed) +
           (n.transposed ? ".T" : "");
  }

  // An elementwise operand broadcasts against the result from the right (numpy): each of
  // its dims is the result's dim at that place, or a broadcast 1.
  std::string broadcast_operand(const Node& n, const Node& against) const {
    std::vector<std::string> roles(n.shape.size());
    size_t off = against.shape.size() - n.shape.size();
    for (size_t i = 0; i < n.shape.size(); ++i)
      roles[i] = n.shape[i] == against.shape[off + i] ? out_roles[off + i] : "1";
    return input(n, roles);
  }

  std::string node(const Node& n) const {
    const std::string dt = std::string(":") + dtype_name(n.dtype);
    switch (n.kind) {
      case OpKind::Input:
        return input(n, out_roles);
      case OpKind::Matmul: {
        std::vector<std::string> a(out_roles.begin(), out_roles.end() - 1);
        a.push_back("K");
        std::vector<std::string> b(out_roles.begin(), out_roles.end() - 2);
        b.push_back("K");
        b.push_back("N");
        return "matmul(" + input(g.node(n.inputs[0]), a) + ", " + input(g.node(n.inputs[1]), b) +
               ")" + dt;
      }
      case OpKind::Unary:
        return n.name + "(" + node(g.node(n.inputs[0])) + ")" + dt;
      case OpKind::Binary: {
        std::string rhs = n.inputs.size() > 1 ? broadcast_operand(g.node(n.inputs[1]), n) : "scalar";
        return n.name + "(" + node(g.node(n.inputs[0])) + ", " + rhs + ")" + dt;
      }
      case OpKind::Attention:
        break;  // never reached: contraction() refuses a graph without a matmul first
    }
    LOOM_CHECK(false, "unknown op kind");
  }
};

// Attention's signature: the operands' dtype and roles, the mask and whether LSE is a
// result. The scale is left out, like an elementwise immediate: it is one multiply
// folded into the softmax and does not change the schedule.
std::string attention_signature(const Graph& g, const Node& a) {
  const std::string q = dtype_name(g.node(a.inputs[0]).dtype);
  const std::string kv = dtype_name(g.node(a.inputs[1]).dtype);
  return "attention(" + q + "[B,Hq,Sq,D], " + kv + "[B,Hkv,Sk,D], " + kv + "[B,Hkv,Sk,D], causal=" +
         causal_name(a.attention.causal) + (a.attention.lse ? ", lse=true" : "") + "):" +
         dtype_name(a.dtype);
}

// B=..,Hq=..,Hkv=..,Sq=..,Sk=..,D=.. of a bound attention graph.
std::string attention_shape(const Graph& g, const Node& a) {
  const Node& q = g.node(a.inputs[0]);
  const Node& k = g.node(a.inputs[1]);
  auto v = [](const Dim& d) { return std::to_string(d.value); };
  return "B=" + v(q.shape[0]) + ",Hq=" + v(q.shape[1]) + ",Hkv=" + v(k.shape[1]) +
         ",Sq=" + v(q.shape[2]) + ",Sk=" + v(k.shape[2]) + ",D=" + v(q.shape[3]);
}

const Node& contraction(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.kind == OpKind::Matmul) return n;
  throw Error("the expression has no contraction (matmul, bmm or linear): nothing to tune");
}

}  // namespace

std::string TuningKey::str() const {
  return gpu + " (" + std::to_string(sm_count) + " SMs, CUDA " + cuda_version_text(cuda_runtime) +
         ", driver " + cuda_version_text(driver) + ") | " + op + " | " + shape;
}

bool TuningKey::same_problem(const TuningKey& o) const {
  return std::tie(gpu, sm_count, op, shape) == std::tie(o.gpu, o.sm_count, o.op, o.shape);
}

std::string op_signature(const Graph& g) {
  if (const Node* a = g.attention()) return attention_signature(g, *a);
  const Node& mm = contraction(g);
  Signer s{g, result_roles(mm)};
  return s.node(g.node(g.result()));
}

std::optional<TuningKey> key_for(const Graph& g, const DeviceInfo& dev, std::string* why_not) {
  for (const Node& n : g.nodes)
    for (const Dim& d : n.shape)
      if (d.is_sym()) {
        if (why_not)
          *why_not = "dimension " + d.sym + " has no value (bind it with --dims " + d.sym +
                     "=<size>): tuning records are per shape";
        return std::nullopt;
      }
  TuningKey k;
  k.gpu = dev.name;
  k.sm_count = dev.sm_count;
  k.cuda_runtime = dev.runtime_version;
  k.driver = dev.driver_version;
  if (const Node* a = g.attention()) {
    k.op = attention_signature(g, *a);
    k.shape = attention_shape(g, *a);
    return k;
  }
  const Node& mm = contraction(g);
  std::vector<std::string> roles = result_roles(mm);
  std::string shape;
  for (size_t i = 0; i < roles.size(); ++i)
    shape += (i ? "," : "") + roles[i] + "=" + std::to_string(mm.shape[i].value);
  shape += ",K=" + std::to_string(g.node(mm.inputs[0]).shape.back().value);

  k.op = op_signature(g);
  k.shape = shape;
  return k;
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace loom::tune
