#include "passes/families/gemm_knobs.h"

namespace loom {

std::vector<KnobUse> gemm_common_knobs() {
  return concat({{"BM"},          {"BN"},         {"FM"},          {"FN"},         {"WM"},
                 {"WN"},          {"BK"},         {"ATOM"},        {"ACC"},        {"SWAP_AB"},
                 {"SPLITK"},      {"SPLITK_MODE"}, {"GROUP_M"},    {"STAGE"},      {"SLAB_KOUTER"},
                 {"SLAB_A"},      {"SLAB_B"},     {"STAGES"},      {"PIPELINE"},   {"PAD_SMEM"},
                 {"PAD_KOUTER"},  {"PERSISTENT"}, {"PERSISTENT_CTAS"}, {"STREAM_K"}},
                generic_knobs());
}

std::vector<KnobUse> concat(std::vector<KnobUse> a, const std::vector<KnobUse>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace loom
