// Shape-class default candidates of the wgmma family (src/passes/families/wgmma.cpp):
// knob sets declared beside the defaults they would replace, each behind a constexpr
// switch there that stays off until the GPU has measured the candidate against the
// default. The knob GEMM_FORM puts one in place of the defaults for a compile (that is
// how the GPU measures them); the tests compile and run them before anyone flips a switch.
#pragma once
#include <string>

#include "passes/families/gemm_shape.h"
#include "passes/knobs.h"

namespace loom {

// One row of tiles (65..128 rows) as 2-CTA clusters along M of 64-row CTAs sharing the
// weight slab by multicast (cuBLAS's pairing for these linears), one wave wide.
bool wgmma_one_row_pairs_apply(const GemmShape& s, const Target& t);
Knobs wgmma_one_row_pairs(const GemmShape& s, const Target& t);

// More rows of tiles with a long K (K >= 8192) where 128 x 256 tiles split in two still
// fill at most one wave: 128 x 256 tiles, SPLITK=2 (the reduce kernel), 2-CTA clusters
// along M, direct stores.
bool wgmma_medium_wide_split_apply(const GemmShape& s, const Target& t);
Knobs wgmma_medium_wide_split(const GemmShape& s, const Target& t);

// GEMM_FORM=`form` ("one_row_pairs", "wide_split"): the candidate's knob set with its ATOM;
// throws loom::Error naming the candidate's reach and the fix where it does not take `s`.
Knobs wgmma_gemm_form(const std::string& form, const GemmShape& s, const Target& t);

}  // namespace loom
