// Attention's second sm_90a lowering (k:013_lower_attention_wgmma, docs/attention.md "The
// wgmma kernel"): which product path a program takes (ATTN_MMA) and the wgmma kernel's
// tiling, from the knobs, checked. Kept apart from attention_tiles() (the mma.sync
// kernel's), whose register and fragment limits do not apply to warpgroup accumulators.
#pragma once
#include <string>

#include "passes/attention_loops.h"

namespace loom {

struct CompileState;

// setmaxnreg of the producer warpgroup: one thread issues TMA loads (FlashAttention-3's 24).
inline constexpr int64_t kProducerRegs = 24;

// ATTN_MMA: "wgmma" (t:012 + k:013; the default on sm_90a for head dims 64..256 in steps
// of 64) or "mma_sync" (t:012 + k:012; the default elsewhere). wgmma on a target other than
// sm_90a is an error naming the arch.
bool attention_uses_wgmma(CompileState& s);

// The wgmma kernel's tiling: ATTN_WG consumer warpgroups of 64 query rows each (BLOCK_M =
// 64 ATTN_WG), BLOCK_N keys per block, K/V rings of kv_stages buffers filled by TMA.
struct AttentionWgmmaTiles {
  int64_t warpgroups = 2;   // ATTN_WG
  int64_t block_m = 128;    // 64 * warpgroups
  int64_t block_n = 128;    // BLOCK_N: the N of S's wgmma, the K of O += P V's
  int64_t kv_stages = 2;        // KV_STAGES: 2 or 3 ring slots
  bool producer = false;        // ATTN_PRODUCER: a producer warpgroup issues the TMA loads
                                // (the default from D = 128 on)
  int64_t consumer_regs = 232;  // setmaxnreg of the consumer warpgroups (ATTN_PRODUCER=1)
  bool overlap = false;         // ATTN_OVERLAP: S of block kb issued before P V of kb - 1
  int64_t head_dim = 0;
  int64_t smem_bytes = 0;   // Q + kv_stages (K + V), 16-bit
  int64_t acc_regs = 0;     // f32 accumulator registers per thread: S (BLOCK_N/2, twice
                            // with ATTN_OVERLAP) + O (D/2)
};
AttentionWgmmaTiles attention_wgmma_tiles(CompileState& s, const AttentionLoops& a);

// The same tiling in t:012's terms (BLOCK_M rows, 4 warps per warpgroup, one m16 atom per
// warp), so the Tile IR level of a wgmma program is the partition its kernel implements.
AttentionTiles attention_wgmma_partition(CompileState& s, const AttentionLoops& a);

}  // namespace loom
