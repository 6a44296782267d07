// The ATOM knob: which compute atom a contraction's tiles are built from. `fma` (the
// default) is the SIMT path; `mma_f16`, `mma_bf16` and `mma_tf32` pick an mma.sync entry
// of the atom table (src/atoms), whose shape (AM x AN x AK) t:010, t:030, t:040 and
// k:025 tile by and whose fragment layouts k:025 lowers to.
#pragma once
#include <string>

#include "atoms/atoms.h"
#include "passes/pass.h"

namespace loom {

// The mma atom the ATOM knob names (f32 accumulate), or nullptr for ATOM=fma. Reads the
// knob through s.knobs and records it in s.used_knobs.
const AtomDef* chosen_mma(CompileState& s);

}  // namespace loom
