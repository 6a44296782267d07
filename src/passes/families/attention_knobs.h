// The knob declarations the attention families share (src/passes/families/).
#pragma once
#include <vector>

#include "passes/families/family.h"

namespace loom {

// What an attention kernel honours without reading it: the GEMM organization knobs at
// their "off" values (no swap, no split-K, no padding, no producer, no cluster, no
// persistence, no stream-K), and the kernel-generic knobs `reads` leaves out, at any
// value (no attention kernel vectorizes copies or realigns rows: they pass unread).
std::vector<KnobUse> attention_honours(const std::vector<KnobUse>& reads);

}  // namespace loom
