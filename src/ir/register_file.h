// The register file a kernel's threads share, and what setmaxnreg can move within it:
// hardware facts the passes size their register splits by and the Kernel IR verifier checks.
#pragma once

#include <algorithm>
#include <cstdint>

namespace loom {

// 32-bit registers an SM has (sm_80 and sm_90 alike).
inline constexpr int64_t kSmRegisters = 65536;

// Registers a thread may hold under __launch_bounds__(threads, min_blocks): the SM's file
// over min_blocks resident blocks (at least one), in 8s (the allocation unit), at most 255
// (the tuner's pruning and cost model take the same cap).
inline int64_t launch_regs_per_thread(int64_t threads, int64_t min_blocks) {
  return std::min<int64_t>(255, kSmRegisters / (std::max<int64_t>(1, min_blocks) * threads) / 8 * 8);
}

// The registers setmaxnreg moves between a block's warpgroups: what the block was given at
// launch (ptxas takes the bound above as the entry count of a kernel that reallocates; at
// 255, below the 256 a thread a warp's allocation rounds to, so the pool errs low).
// An increase waits until the block's own free registers cover it, so a split past this
// pool never completes: 2 x 128 x 240 + 128 x 32 = 65536 asked of the 64512 that 384
// threads at 168 hold hung an H200 (bench/NOTES.md, 2026-11-29, "paged prefill on the
// persistent walk").
inline int64_t setmaxnreg_pool(int64_t threads, int64_t min_blocks) {
  return launch_regs_per_thread(threads, min_blocks) * threads;
}

}  // namespace loom
