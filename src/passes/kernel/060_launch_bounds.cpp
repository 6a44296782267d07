// k:060_launch_bounds — ask ptxas for an occupancy (MIN_BLOCKS).
//
// `__launch_bounds__(threads, n)` caps registers so n blocks fit on one SM (65536 / (n *
// threads) per thread). A big register tile wants many registers; two resident blocks
// hide barrier and memory latency. Which wins is shape- and GPU-specific: a knob.
//
// MIN_BLOCKS=0 (the default) leaves ptxas its own choice, except in kernels that sum
// partial tiles from global memory (split-K's reduce kernel, the fused fixup of
// SPLITK_MODE=partials): an unrolled reduction loop over global loads. There, without a
// minimum, ptxas aims at full occupancy (32 registers at 256 threads) and sinks the
// loads to fit: 6 of the 11 LDG.128 of a 64x32 tile's sum in flight, the rest one at a
// time behind the adds, ~7 L2 round trips instead of one (SASS, 2026-11-23). Those
// kernels get `__launch_bounds__(threads, 1)`, which lets ptxas keep every load in flight
// (52 registers). Not in a warp-specialized kernel (its consumers already hold up to 232
// registers by setmaxnreg, or up to 255 with one consumer warpgroup), where the same
// minimum made ptxas spill the fused sum of 2x4 clusters' partials (NVRTC, 2026-11-23).
#include "passes/passes.h"

namespace loom {
namespace {

bool warp_specialized(const Block& b) {
  bool found = false;
  walk(b, [&](const Stmt& s) { found |= s.kind == StmtKind::Specialize; });
  return found;
}

bool sums_global_loads(const Block& b, const KernelProgram& p, bool in_sum) {
  for (const Stmt& s : b) {
    if (in_sum && s.kind == StmtKind::Load &&
        p.tensor(s.tensor).role != TensorRole::Shared)
      return true;
    const bool sum = in_sum || (s.kind == StmtKind::For && s.loop_kind == LoopKind::Reduce &&
                                s.unroll && s.extent.is_const());
    if (sums_global_loads(s.body, p, sum)) return true;
  }
  return false;
}

}  // namespace

Pass pass_launch_bounds() {
  return Pass{"k:060_launch_bounds", Level::Kernel, Level::Kernel,
              "kernels carry MIN_BLOCKS resident blocks per SM in __launch_bounds__ (0: none, "
              "but 1 for kernels summing partial tiles, so ptxas keeps their loads in flight)",
              {"MIN_BLOCKS"},
              [](CompileState& s) {
                int64_t n = s.knob("MIN_BLOCKS", 0);
                for (auto& k : s.kernel.kernels)
                  k.min_blocks_per_sm =
                      n > 0 ? int(n)
                      : !warp_specialized(k.body) && sums_global_loads(k.body, s.kernel, false)
                          ? 1
                          : 0;
              }};
}

}  // namespace loom
