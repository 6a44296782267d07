#include "passes/mma_choice.h"

#include "passes/families/family.h"

namespace loom {

bool is_wgmma(const AtomDef* a) { return a && a->threads == 128; }

// The atom's GEMM family picks its entry and checks ACC and the tiling it needs
// (src/passes/families/simt.cpp, mma_sync.cpp, wgmma.cpp).
const AtomDef* chosen_mma(CompileState& s) {
  const std::string v = s.knobs.get_str("ATOM", "fma");
  s.used_knobs["ATOM"] = v;
  return gemm_family_of_atom(v).atom_def(s, v);
}

}  // namespace loom
