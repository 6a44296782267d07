// How large a tensor Loom compiles. Generated kernels and the driver compute element
// offsets, loop bounds and byte counts in int64; a product of extents that overflows
// turns into a negative loop bound or a wrapped allocation, a silent wrong answer. So
// every tensor of a graph (inputs and every op's result) is held to kMaxTensorBytes:
// 2^48 bytes (256 TiB, about a thousand times an H200's memory), which leaves a factor of
// 2^15 of int64 headroom for the index math on top (row * ld + column, tile offsets past
// the edge, split-K and rotation copies). Extents and element counts are bounded by it
// too, since every element takes at least one byte.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "ir/graph.h"

namespace loom {

constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;
// The largest single extent (--dims values, `loom ladder --shape`): a larger one puts
// any tensor with it over kMaxTensorBytes, since every element takes at least one byte.
constexpr int64_t kMaxExtent = kMaxTensorBytes;

// Throws loom::Error when a tensor of `g` (an input, or an op's result) holds more than
// kMaxTensorBytes, naming the tensor, its shape, its size and the limit. Symbolic dims
// take their values from `sizes`; an unbound one counts as 1, its least value, so the
// known extents are checked now and the rest once bound (bind_sizes, compile_graph with
// CompileOptions::sizes).
void check_tensor_sizes(const Graph& g, const std::map<std::string, int64_t>& sizes = {});

}  // namespace loom
