// The knob declarations the attention families share (src/passes/families/).
#pragma once
#include <vector>

#include "passes/families/family.h"

namespace loom {

// What an attention kernel honours without reading it: the GEMM organization knobs at
// their "off" values (no swap, no split-K, no padding, no producer, no cluster, no
// persistence, no stream-K), and the kernel-generic knobs `reads` leaves out, at any
// value (no attention kernel vectorizes copies or realigns rows: they pass unread), but
// those in `refused` (generic knobs that shape another attention kernel and that this one
// refuses: the wgmma kernel's fixed swizzle and TMA loads leave SWIZZLE and
// INTERLEAVE_LOADS nothing to choose).
std::vector<KnobUse> attention_honours(const std::vector<KnobUse>& reads,
                                       const std::vector<std::string>& refused = {});

}  // namespace loom
