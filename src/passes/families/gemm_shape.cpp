#include "passes/families/gemm_shape.h"

namespace loom {

GemmShape gemm_shape_of(const Graph& g) {
  GemmShape s;
  for (const auto& n : g.nodes) {
    if (n.kind != OpKind::Matmul) continue;
    const Node& a = g.node(n.inputs[0]);
    size_t r = n.shape.size();
    s.f32_operands = a.dtype == DType::F32 || a.dtype == DType::TF32;
    s.known = true;
    for (const auto& d : n.shape) s.known &= !d.is_sym();
    s.known &= !a.shape.back().is_sym();
    if (!s.known) return s;
    for (size_t i = 0; i + 2 < r; ++i) s.batch *= n.shape[i].value;  // rank 4: B x H
    s.out_rank = r;
    s.M = n.shape[r - 2].value;
    s.N = n.shape[r - 1].value;
    s.K = a.shape.back().value;
    s.epilogue = g.result() != n.id;
    s.in = a.dtype;
    s.out = n.dtype;
    s.a_k_major = !a.transposed;
    s.b_k_major = g.node(n.inputs[1]).transposed;
    s.tma_rows = true;
    for (int in : n.inputs) {
      const Dim row = g.node(in).stride_unit();  // a view's strides, else its row length
      s.tma_rows &= !row.is_sym() && row.value * dtype_bytes(g.node(in).dtype) % 16 == 0;
      s.odd_rows |= row.is_sym() || row.value * dtype_bytes(g.node(in).dtype) % 4 != 0;
    }
    int operands = 0;
    bool loadable = true;
    for (const auto& e : g.nodes) {
      if (e.id <= n.id || e.kind != OpKind::Binary) continue;
      for (int in : e.inputs) {
        const Node& x = g.node(in);
        if (x.kind != OpKind::Input || x.shape.size() != 2 || r != 2 ||
            !(x.shape[0] == n.shape[0] && x.shape[1] == n.shape[1]))
          continue;
        const Dim row = x.stride_unit();
        ++operands;
        loadable &= !x.transposed && dtype_bytes(x.dtype) == 2 && !row.is_sym() &&
                    row.value * 2 % 16 == 0;
      }
    }
    s.mn_operand = operands == 1 && loadable;
  }
  return s;
}

Graph bound_as_if(const Graph& g, const std::map<std::string, int64_t>& values) {
  Graph bound = g;
  for (auto& n : bound.nodes)
    for (auto& d : n.shape)
      if (d.is_sym() && values.count(d.sym)) d = Dim{values.at(d.sym), ""};
  return bound;
}

bool tensor_core_operands(const GemmShape& s, const Target& t) {
  return (s.in == DType::F16 || s.in == DType::BF16) && t.compute_capability() >= 80;
}

std::string atom_16bit(const GemmShape& s, const std::string& kind) {
  return kind + (s.in == DType::F16 ? "_f16" : "_bf16");
}

}  // namespace loom
