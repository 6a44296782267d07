// k:060_launch_bounds — ask ptxas for an occupancy (MIN_BLOCKS).
//
// `__launch_bounds__(threads, n)` caps registers so n blocks fit on one SM (65536 / (n *
// threads) per thread). A big register tile wants many registers; two resident blocks
// hide barrier and memory latency. Which wins is shape- and GPU-specific: a knob.
#include "passes/passes.h"

namespace loom {

Pass pass_launch_bounds() {
  return Pass{"k:060_launch_bounds", Level::Kernel, Level::Kernel,
              "kernels carry MIN_BLOCKS resident blocks per SM in __launch_bounds__ (0: none)",
              {"MIN_BLOCKS"},
              [](CompileState& s) {
                int64_t n = s.knob("MIN_BLOCKS", 0);
                for (auto& k : s.kernel.kernels) k.min_blocks_per_sm = int(n);
              }};
}

}  // namespace loom
