#include "passes/families/attention_knobs.h"

#include <algorithm>

namespace loom {

std::vector<KnobUse> attention_honours(const std::vector<KnobUse>& reads,
                                       const std::vector<std::string>& refused) {
  std::vector<KnobUse> out = {{"SWAP_AB", {"0"}},   {"SPLITK", {"1"}},          {"PAD_SMEM", {"0"}},
                              {"PAD_KOUTER", {"0"}}, {"WARP_SPECIALIZE", {"0"}}, {"CLUSTER_M", {"1"}},
                              {"CLUSTER_N", {"1"}},  {"CLUSTER_K", {"1"}},       {"PERSISTENT", {"0"}},
                              {"STREAM_K", {"0"}},   {"GEMM_FORM", {"default"}}};
  for (const auto& g : generic_knobs())
    if (std::none_of(reads.begin(), reads.end(), [&](const KnobUse& u) { return u.name == g.name; }) &&
        std::find(refused.begin(), refused.end(), g.name) == refused.end())
      out.push_back(g);
  return out;
}

}  // namespace loom
