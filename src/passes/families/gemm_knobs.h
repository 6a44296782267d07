// The knob declarations the GEMM families share (src/passes/families/).
#pragma once
#include <vector>

#include "passes/families/family.h"

namespace loom {

// What every GEMM kernel reads: the tiling, the atom and accumulator, the swap, split-K,
// the walk order, the staging ring and its layout, persistence and stream-K, and the
// kernel-generic knobs.
std::vector<KnobUse> gemm_common_knobs();

// `a` then `b`.
std::vector<KnobUse> concat(std::vector<KnobUse> a, const std::vector<KnobUse>& b);

}  // namespace loom
