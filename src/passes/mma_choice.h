// The ATOM and ACC knobs: which compute atom a contraction's tiles are built from. `fma`
// (the default) is the SIMT path; `mma_f16`, `mma_bf16` and `mma_tf32` pick an mma.sync
// entry of the atom table (src/atoms) by its operand type and, through ACC, its
// accumulator type. Its shape (AM x AN x AK) is what t:010, t:030, t:040 and k:025 tile
// by, and its fragment layouts (C/D included) are what k:025 lowers to.
#pragma once
#include <string>

#include "atoms/atoms.h"
#include "passes/pass.h"

namespace loom {

// The mma atom ATOM and ACC name (ACC=f32 unless set), or nullptr for ATOM=fma: the atom's
// kernel family picks it (KernelFamily::atom_def, src/passes/families/). Throws
// loom::Error, naming the limit and the fix, for an ACC no such atom has (ACC=f16 is
// m16n8k16 .f16.f16.f16.f16 only: PTX's bf16 and tf32 mma accumulate in f32, and the
// SIMT FMA path in f32). Reads the knobs through s.knobs and records them in
// s.used_knobs (ACC for mma kernels only).
const AtomDef* chosen_mma(CompileState& s);

// ATOM=wgmma_f16 | wgmma_bf16 | wgmma_tf32 (sm_90a): the warpgroup atom m64nNk16 (k8 for
// tf32) with N the columns one warpgroup covers in one atom, N = BN / (WN * FN) (BN
// defaults to 128, WN and FN to 1: wgmma's N runs up to 256, so one atom per warpgroup
// along n is the natural tiling). chosen_mma returns it too; this names the rules.
bool is_wgmma(const AtomDef* a);

}  // namespace loom
