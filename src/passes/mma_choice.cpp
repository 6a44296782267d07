#include "passes/mma_choice.h"

namespace loom {

const AtomDef* chosen_mma(CompileState& s) {
  const std::string v = s.knobs.get_str("ATOM", "fma");
  s.used_knobs["ATOM"] = v;
  // f32 accumulate for every input type: f16 accumulate (mma_m16n8k16_f16_f16) rounds
  // every partial sum and waits for an ACC knob.
  if (v == "mma_f16") return &atom("mma_m16n8k16_f32_f16");
  if (v == "mma_bf16") return &atom("mma_m16n8k16_f32_bf16");
  if (v == "mma_tf32") return &atom("mma_m16n8k8_f32_tf32");
  return nullptr;
}

}  // namespace loom
