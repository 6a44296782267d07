#include "frontend/sizes.h"

#include <cstdio>

#include "ir/dtype.h"
#include "ir/error.h"

namespace loom {
namespace {

std::string shape_text(const std::vector<Dim>& shape, const std::map<std::string, int64_t>& sizes) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += i ? "," : "";
    const Dim& d = shape[i];
    auto it = d.is_sym() ? sizes.find(d.sym) : sizes.end();
    s += it == sizes.end() ? d.str() : d.sym + "=" + std::to_string(it->second);
  }
  return s + "]";
}

std::string tensor_text(const Node& n, const std::map<std::string, int64_t>& sizes) {
  if (n.kind == OpKind::Input) return "tensor " + n.name + shape_text(n.storage_shape(), sizes);
  return "the result of " + (n.origin.empty() ? n.name : n.origin) + " " +
         shape_text(n.shape, sizes);
}

}  // namespace

void check_tensor_sizes(const Graph& g, const std::map<std::string, int64_t>& sizes) {
  for (const Node& n : g.nodes) {
    // The byte count, multiplied up extent by extent and stopped at the first product
    // past the limit, so the check itself cannot overflow.
    // An unbound symbol counts as 1, its least value: the known extents alone may
    // already be too many.
    int64_t bytes = dtype_bytes(n.dtype);
    double approx = double(bytes);
    bool over = false;
    for (const Dim& d : n.shape) {
      int64_t e = d.value;
      if (d.is_sym()) {
        auto it = sizes.find(d.sym);
        e = it == sizes.end() ? 1 : it->second;
      }
      approx *= double(e);
      if (e > 0 && bytes > kMaxTensorBytes / e) over = true;
      if (!over) bytes *= e;
    }
    // A view reaches its footprint, not its element count: one past its last element,
    // in double so that a huge stride cannot overflow the check.
    const std::vector<int64_t>& pitch =
        n.kind == OpKind::Input ? n.pitch : (n.id == g.result() ? g.out_pitch : n.pitch);
    if (!pitch.empty()) {
      const std::vector<Dim> shape = n.kind == OpKind::Input ? n.storage_shape() : n.shape;
      std::vector<double> extent(shape.size());
      for (size_t i = 0; i < shape.size(); ++i) {
        const Dim& d = shape[i];
        extent[i] = double(d.is_sym() ? (sizes.count(d.sym) ? sizes.at(d.sym) : 1) : d.value);
      }
      const size_t r = shape.size();
      double stride = 1, last = extent[r - 1] - 1;
      for (size_t i = r - 1; i-- > 0;) {
        const size_t from_end = r - 2 - i;
        stride = from_end < pitch.size() ? double(pitch[pitch.size() - 1 - from_end])
                                         : extent[i + 1] * stride;
        last += (extent[i] - 1) * stride;
      }
      const double footprint = (last + 1) * dtype_bytes(n.dtype);
      if (footprint > double(kMaxTensorBytes)) {
        over = true;
        approx = footprint;
      }
    }
    if (over) {
      char text[32];
      std::snprintf(text, sizeof text, "%.3g", approx);
      throw Error(tensor_text(n, sizes) + " is too large: " + text + " bytes of " +
                  dtype_name(n.dtype) + ", over Loom's limit of 2^48 = " +
                  std::to_string(kMaxTensorBytes) + " bytes per tensor (which keeps every "
                  "index and byte count in int64); split the problem");
    }
  }
}

}  // namespace loom
