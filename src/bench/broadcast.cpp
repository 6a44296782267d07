#include "bench/broadcast.h"

#include <algorithm>

#include "ir/error.h"

namespace loom {

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error("shapes " + shape_str(a) + " and " + shape_str(b) +
                  " do not broadcast (numpy rules: aligned at the right, each dim equal or 1)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out) {
  LOOM_CHECK(in.size() <= out.size(), "broadcast to a lower rank");
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    size_t i = in.size() - 1 - k, o = out.size() - 1 - k;
    LOOM_CHECK(in[i] == out[o] || in[i] == 1, "broadcast of incompatible shapes");
    strides[o] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return strides;
}

std::vector<int64_t> broadcast_offsets(const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out) {
  const std::vector<int64_t> strides = broadcast_strides(in, out);
  std::vector<int64_t> offsets(size_t(shape_numel(out)));
  std::vector<int64_t> coord(out.size(), 0);
  int64_t off = 0;
  for (size_t flat = 0; flat < offsets.size(); ++flat) {
    offsets[flat] = off;
    // Odometer increment: bump the last coordinate, carry into earlier ones.
    for (size_t d = out.size(); d-- > 0;) {
      if (++coord[d] < out[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (out[d] - 1);
      coord[d] = 0;
    }
  }
  return offsets;
}

}  // namespace loom
