// Attention's second sm_90a lowering (k:013_lower_attention_wgmma, docs/attention.md "The
// wgmma kernel"): which product path a program takes (ATTN_MMA) and the wgmma kernel's
// tiling, from the knobs, checked. Kept apart from attention_tiles() (the mma.sync
// kernel's), whose register and fragment limits do not apply to warpgroup accumulators.
#pragma once
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "passes/attention_loops.h"

namespace loom {

struct CompileState;

// setmaxnreg of the producer warpgroup: one thread issues TMA loads (FlashAttention-3's 24).
inline constexpr int64_t kProducerRegs = 24;
// Paged KV under the causal or dynamic persistent walk: the producer binds each unit's key
// count and reads the table besides the walk's state, and at 24 registers ptxas spilled
// 12-28 B (the dynamic causal walk over 64-key pages, the static top-left one over
// 256-key pages, D = 128; NVRTC 13.0). 32 leaves two consumer warpgroups 232 (one and
// three: as with 24). Not without a mask on the static walk, which fit in 24.
inline constexpr int64_t kPagedWalkProducerRegs = 32;
// Query rows (and keys) up to which the wgmma kernel's default tile at D 80..128 is two
// warpgroups by 128 keys rather than three by 112-144 (attention_wgmma_tiles, "Short
// sequences").
inline constexpr int64_t kShortQueries = 1536;

// The head dims the wgmma kernel takes: multiples of 8 up to 256 (TMA rows of 16-byte
// multiples; wgmma's N and O's D/2 accumulator registers per thread up to 256).
bool attention_wgmma_head_dim(int64_t D);

// ATTN_MMA: "wgmma" (t:012 + k:013; the default on sm_90a for every head dim
// attention_wgmma_head_dim takes) or "mma_sync" (t:012 + k:012; the default elsewhere).
// wgmma on a target other than sm_90a is an error naming the arch.
bool attention_uses_wgmma(CompileState& s);

// One column span of Q, K and V in shared memory: the head dim, zero-padded to a multiple
// of 16 (QK^T's k16 steps), is stored as spans whose widths are swizzle spans: the 64-column
// multiples as one span of 128-byte-swizzled 64-column chunks, then at most one 32-column
// span (64-byte swizzle) and one 16-column span (32-byte swizzle). Each span is a shared
// tensor of its own with its own TMA box and descriptor swizzle mode, and O += P V is one
// wgmma per span (N = width). A D that is 8 mod 16 ends in a 16-column span of which the
// last 8 columns lie past the tensor: TMA's zero fill, so QK^T is unchanged and P V
// computes zero columns that are never stored. D = 96: 64 + 32; 80: 64 + 16; 112: 64 + 32
// + 16; 40: 32 + 16 (8 of them zero fill).
struct AttentionSpan {
  int64_t col = 0;    // first column (of D)
  int64_t width = 0;  // columns stored (a multiple of 16: 16, 32 or 64 k)
  int64_t real = 0;   // columns of the tensor among them (width, or width - 8 at the end)
  int64_t swizzle_bytes() const { return std::min<int64_t>(width, 64) * 2; }  // 16-bit
};
std::vector<AttentionSpan> attention_spans(int64_t D);

// Paged KV: the rows of one TMA box of K or V, gcd(BLOCK_N, page) — a key block is
// BLOCK_N / this many page pieces, each within one page (k:013's page_rows()).
inline int64_t attention_page_rows(const AttentionLoops& a, int64_t block_n) {
  return std::gcd(block_n, a.page);
}

// The wgmma kernel's tiling: ATTN_WG consumer warpgroups of 64 query rows each (BLOCK_M =
// 64 ATTN_WG), BLOCK_N keys per block, K/V rings of kv_stages buffers filled by TMA.
struct AttentionWgmmaTiles {
  int64_t warpgroups = 2;   // ATTN_WG
  int64_t block_m = 128;    // 64 * warpgroups
  int64_t block_n = 128;    // BLOCK_N: the N of S's wgmma, the K of O += P V's
  int64_t kv_stages = 2;        // KV_STAGES: 2 or 3 ring slots
  bool producer = false;        // ATTN_PRODUCER: a producer warpgroup issues the TMA loads
                                // (the default above 64 stored columns)
  int64_t consumer_regs = 232;  // setmaxnreg of the consumer warpgroups (ATTN_PRODUCER=1)
  int64_t producer_regs = kProducerRegs;  // and of the producer's
  bool overlap = false;         // ATTN_OVERLAP: S of block kb issued before P V of kb - 1
  bool rescale_under_s = false; // ATTN_O_UNDER_S (with the overlap): O rescaled while the
                                // next block's S is in flight, not after P V retired
  // ATTN_PEEL_MASK: the key blocks that some row of the warpgroup masks (past Sk, or
  // crossing the causal diagonal) run as a loop of their own after the unmasked ones
  // (FlashAttention-3's n_masking_steps), so the main key loop carries no mask code.
  bool peel_mask = false;
  bool pack_p = false;          // ATTN_PACK_P: P converted once into a 16-bit register
                                // array after the softmax (always with ATTN_OVERLAP)
  bool pingpong = false;        // ATTN_PINGPONG: the consumer warpgroups take turns issuing
                                // their wgmmas (named barriers 1..ATTN_WG, bar.sync/arrive)
  // ATTN_PERSISTENT: `ctas` CTAs (ATTN_CTAS, default the target's SM count: one CTA per
  // SM, the producer kernel's occupancy) walk the work units (query block, head, batch)
  // with a stride of the grid; causal in longest-first order (docs/attention.md,
  // "The persistent walk").
  bool persistent = false;
  int64_t ctas = 0;
  // ATTN_SCHEDULE=dynamic (with the walk): the units come from a global work counter
  // (first blockIdx.x, then fetched by the producer), longest first, so the SM that frees
  // first takes the longest unit left; static: CTA c takes units c, c + P, ..
  bool dynamic = false;
  // ATTN_LOAD_WARPS (with the producer, one CTA per query block): lane 0 of this many of the
  // producer warpgroup's warps issue a key block's TMA boxes, each its share (paged KV: its
  // pages' boxes and their table reads), and each waits for the slot; the first arms the
  // full barrier. One issuing thread is instruction-bound at many boxes a block (16-key
  // pages: 16 boxes of 2 KiB per half block at D = 128, ~15 dependent instructions each).
  int64_t load_warps = 1;
  // ATTN_TMA_STORE: O (1/l) leaves through shared memory by TMA store, each warpgroup its
  // 64 rows; into a buffer of its own where it fits beside Q and the ring, else into Q's
  // slot (o_in_q).
  bool tma_store = false;
  bool o_in_q = false;
  // ATTN_STMATRIX: O's 16-bit values go to shared memory by stmatrix.x4, 8 per lane per
  // instruction (16 rows x 16 columns per warp), so a warp computes one swizzled row
  // address per 16 columns instead of one per 4-byte store. With the TMA store they leave
  // by it; without, by the threads' copy-out: each warpgroup's 64 rows in 16-byte chunks,
  // consecutive threads along a row (whole 32-byte sectors), rows past the sequence skipped.
  bool stmatrix = false;
  // O passes through shared memory (O_s, or Q's slot: o_in_q) on its way out.
  bool o_in_shared() const { return tma_store || stmatrix; }
  int64_t head_dim = 0;
  int64_t padded_dim = 0;   // head_dim rounded up to 16: the columns the spans store
  std::vector<AttentionSpan> spans;
  int64_t smem_bytes = 0;   // Q + kv_stages (K + V) (+ O's buffer), 16-bit, padded_dim columns
  int64_t acc_regs = 0;     // accumulator registers per thread: S (BLOCK_N/2; with
                            // ATTN_OVERLAP P's 16-bit pairs, BLOCK_N/4, too) + O
                            // (padded_dim/2)
};
AttentionWgmmaTiles attention_wgmma_tiles(CompileState& s, const AttentionLoops& a);

// The same tiling in t:012's terms (BLOCK_M rows, 4 warps per warpgroup, one m16 atom per
// warp), so the Tile IR level of a wgmma program is the partition its kernel implements.
AttentionTiles attention_wgmma_partition(CompileState& s, const AttentionLoops& a);

}  // namespace loom
