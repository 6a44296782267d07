// Shape-class default candidates of the wgmma family (src/passes/families/wgmma.cpp):
// knob sets declared beside the defaults they replace where the GPU measured them ahead
// (wgmma_medium_defaults says where), and candidates elsewhere. The knob GEMM_FORM puts
// one in place of the defaults for a compile (that is how the GPU measures them where
// they are not the default); the tests compile and run them.
#pragma once
#include <string>

#include "passes/families/gemm_shape.h"
#include "passes/knobs.h"

namespace loom {

// One row of tiles (65..128 rows) as 2-CTA clusters along M of 64-row CTAs sharing the
// weight slab by multicast (cuBLAS's pairing for these linears), one wave wide: the
// default of those linears on fast-DRAM cards where BN >= 128.
bool wgmma_one_row_pairs_apply(const GemmShape& s, const Target& t);
Knobs wgmma_one_row_pairs(const GemmShape& s, const Target& t);

// GEMM_FORM=`form` ("one_row_pairs"): the candidate's knob set with its ATOM;
// throws loom::Error naming the candidate's reach and the fix where it does not take `s`.
Knobs wgmma_gemm_form(const std::string& form, const GemmShape& s, const Target& t);

}  // namespace loom
