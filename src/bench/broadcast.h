// numpy broadcasting for the fp64 reference: shapes aligned at the right, a dimension
// of 1 (or a missing one) stretches to the other operand's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loom {

// Broadcast shape of a and b; throws loom::Error naming both shapes when incompatible.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b);

// Row-major strides for reading a tensor of shape `in` at the coordinates of `out`
// (one entry per dim of `out`): 0 where `in` is broadcast, its own stride elsewhere.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out);

// For each row-major flat position of `out`, the flat offset it reads in `in`.
std::vector<int64_t> broadcast_offsets(const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out);

int64_t shape_numel(const std::vector<int64_t>& shape);
std::string shape_str(const std::vector<int64_t>& shape);  // "[2,3]"

}  // namespace loom
