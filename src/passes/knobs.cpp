#include "passes/knobs.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "ir/error.h"

namespace loom {

const std::vector<KnobDef>& knob_registry() {
  // Order here is the order knobs print in. Each knob names the pass that reads it.
  // `.searched` lists what the tuner tries (src/tune/space.cpp; docs/tuning.md): ranges
  // around the shipped defaults and the measured alternatives of bench/NOTES.md. Where an
  // "other" knob lists several values, the first is the base the others vary around.
  static const std::vector<KnobDef> defs = {
      KnobDef{"BM", "rows of C per thread block (block tile height)", "t:010_partition_loops",
              1, 1024}
          .searched(SearchGroup::tiling, {{"fma", {"64", "128", "256"}}}),
      KnobDef{"BN", "columns of C per thread block (block tile width)", "t:010_partition_loops",
              1, 1024}
          .searched(SearchGroup::tiling,
                    {{"fma", {"64", "128", "256"}},
                     {"wgmma", {"128", "256", "64", "32", "16", "8"}, 90}}),
      KnobDef{"FM", "rows of C per thread (register tile height)", "t:010_partition_loops", 1, 64}
          .searched(SearchGroup::tiling, {{"fma", {"4", "8", "16"}},
                                          {"mma", {"2", "4", "8"}},
                                          {"wgmma", {"1"}, 90}}),
      KnobDef{"FN", "columns of C per thread (register tile width)", "t:010_partition_loops", 1, 64}
          .searched(SearchGroup::tiling, {{"fma", {"4", "8", "16"}},
                                          {"mma", {"2", "4", "8"}},
                                          {"wgmma", {"1"}, 90}}),
      {"ATOM", "compute atom of the contraction: fma (SIMT), mma.sync m16n8k16 f16/bf16, "
       "m16n8k8 tf32 (accumulator type: ACC; FM/FN then count atoms per warp), or wgmma "
       "m64nNk16 f16/bf16, m64nNk8 tf32 (sm_90a; WM/WN count warpgroups, FM/FN atoms per "
       "warpgroup, N = BN/(WN*FN))",
       "t:010_partition_loops", 0, 0, false,
       {"fma", "mma_f16", "mma_bf16", "mma_tf32", "wgmma_f16", "wgmma_bf16", "wgmma_tf32"}},
      KnobDef{"WGMMA_A", "where wgmma reads its A operand: smem (a matrix descriptor on the staged "
       "slab) or regs (each warpgroup loads A fragments from the slab with ldmatrix or "
       "ld.shared, then issues the register-A form; tf32 with an M-major A needs it)",
       "k:026_lower_wgmma", 0, 0, false, {"smem", "regs"}}
          .searched(SearchGroup::other, {{"wgmma", {"smem", "regs"}, 90}}),
      // Searched only where WGMMA_A=regs (src/tune/space.cpp: dependent knobs): the two
      // differ in numerics (bench/NOTES.md, "TF32 register fills") and in a cvt per value.
      KnobDef{"TF32_ROUND", "how a tf32 A operand wgmma reads from registers (WGMMA_A=regs) is "
       "filled: none (the raw f32 bits, whose top 19 the tensor core reads: truncation, as for "
       "a shared tf32 operand, without a cvt per value; default) or rna (each value rounded "
       "to nearest, ties away: cvt.rna.tf32.f32)",
       "k:026_lower_wgmma", 0, 0, false, {"rna", "none"}}
          .searched(SearchGroup::other, {{"wgmma_tf32", {"none", "rna"}, 90}}),
      {"WGMMA_FILLS", "when wgmma kernels with A from registers (WGMMA_A=regs) fill it: step "
       "(each atom step waits for the group that read its fragment, fills it, fences and issues "
       "its wgmma as a group of its own; default) or slab (the slab's fragments, double-buffered "
       "by slab parity, filled while the previous slab's wgmmas run, then one fence and the "
       "slab's wgmmas as one group, as the shared-A kernels issue them)",
       "k:026_lower_wgmma", 0, 0, false, {"step", "slab"}},
      {"WGMMA_ZERO", "how wgmma kernels zero a tile's accumulators: scale_d (the tile's first "
       "k-step issues wgmma with scale-d 0, D = A*B, so no zeroing instructions run between "
       "tiles; default) or explicit (a zeroing loop before the k loop)",
       "k:026_lower_wgmma", 0, 0, false, {"scale_d", "explicit"}},
      {"ACC", "accumulator type of the mma atoms: f32, or f16 (ATOM=mma_f16 only: "
       "m16n8k16 .f16 accumulate, half the accumulator registers, each mma's sums rounded "
       "to f16)",
       "k:025_lower_mma", 0, 0, false, {"f32", "f16"}},
      KnobDef{"SWAP_AB", "compute C^T = B^T A^T (0/1): the tile knobs then describe the swapped GEMM "
       "(BM, WM, FM and wgmma's M tile N; BN tiles M), so a small M becomes wgmma's N "
       "(decode shapes on sm_90a)",
       "l:015_swap_operands", 0, 1}
          .searched(SearchGroup::tiling, {{"wgmma", {"0", "1"}, 90}}),
      KnobDef{"SPLITK", "CTAs sharing one output tile's K reduction (1 = no split)",
              "l:020_split_k", 1, 256}
          .searched(SearchGroup::split_k,
                    {{"fma", {"1", "2", "4", "8", "16", "32", "64", "128"}},
                     {"wgmma", {"1", "4", "16", "64"}, 90}}),
      KnobDef{"SPLITK_MODE", "how split-K partial sums combine: reduce (a second kernel sums "
       "the partial tiles), atomic (f32 adds into the output), fixup (f32 adds into a "
       "workspace, the last CTA of a tile finishes it) or partials (plain partial-tile stores, "
       "the last CTA of a tile sums them; one launch, no atomics, composes with clusters)",
       "l:020_split_k", 0, 0, false, {"reduce", "atomic", "fixup", "partials"}}
          .searched(SearchGroup::split_k,
                    {{"fma", {"reduce", "atomic"}}, {"wgmma", {"reduce", "partials"}, 90}}),
      KnobDef{"GROUP_M", "M tiles a CTA group walks before stepping along N (1 = row-major)",
       "t:025_rasterize", 1, 64}
          .searched(SearchGroup::other, {{"", {"8", "1"}}}),
      KnobDef{"WM", "warps along m per block (0 = threads laid out without a warp tier)",
       "t:010_partition_loops", 0, 32}
          .searched(SearchGroup::tiling, {{"mma", {"1", "2", "4"}}, {"wgmma", {"2", "1"}, 90}}),
      KnobDef{"WN", "warps along n per block (0 = threads laid out without a warp tier)",
       "t:010_partition_loops", 0, 32}
          .searched(SearchGroup::tiling, {{"mma", {"1", "2", "4"}}, {"wgmma", {"1"}, 90}}),
      KnobDef{"BK", "reduction depth of one staged slab", "t:040_stage_inputs", 1, 256}
          .searched(SearchGroup::staging, {{"fma", {"8", "16", "32"}},
                                           {"mma", {"32", "64"}},
                                           {"wgmma_f16", {"64", "128"}, 90},
                                           {"wgmma_bf16", {"64", "128"}, 90},
                                           {"wgmma_tf32", {"32"}, 90}}),
      KnobDef{"STAGE", "how operand slabs reach shared memory", "t:040_stage_inputs", 0, 0,
              false, {"direct", "sync", "cp_async", "tma"}}
          .searched(SearchGroup::staging,
                    {{"fma", {"sync", "cp_async"}},
                     {"fma", {"tma"}, 90},
                     {"mma", {"cp_async"}},
                     {"wgmma", {"tma", "cp_async"}, 90}}),
      {"SLAB_KOUTER", "staged slabs keep the reduction dimension outermost, [BK][BM] for A: "
       "the transposed-A layout of SIMT kernels (default 1 for STAGE=sync, 0 for cp_async "
       "and tma; with cp_async the transposing copy moves 4-byte elements)",
       "t:040_stage_inputs", 0, 1},
      {"SLAB_A", "layout of A's staged slab, overriding SLAB_KOUTER for it: kinner = "
       "[BM][BK] (K contiguous, what tf32 ldmatrix reads; an A given transposed is "
       "transposed by the copy), kouter = [BK][BM]", "t:040_stage_inputs", 0, 0, false,
       {"kinner", "kouter"}},
      {"SLAB_B", "layout of B's staged slab, overriding SLAB_KOUTER for it: kinner = "
       "[BN][BK] (K contiguous: the transposed B that tf32 ldmatrix reads; a row-major B "
       "is transposed by 4-byte cp.async copies, or through registers with STAGE=sync), "
       "kouter = [BK][BN]", "t:040_stage_inputs", 0, 0, false, {"kinner", "kouter"}},
      KnobDef{"STAGES", "shared buffers per staged slab (a ring; up to 16 where shared memory "
              "allows: small tiles stream a decode weight through deep rings)",
              "t:050_multibuffer", 1, 16}
          .searched(SearchGroup::staging, {{"fma", {"2", "3", "4"}},
                                           {"mma", {"2", "3", "4"}},
                                           {"wgmma", {"3", "4", "5", "6", "8", "12", "16"}, 90}}),
      {"PIPELINE", "issue the next slab's copy before the current slab's math (0/1)",
       "k:050_pipeline", 0, 1},
      KnobDef{"PAD_SMEM", "elements of padding per shared-tile row (0 = none; breaks "
              "power-of-two row strides that put a column in one bank)", "t:045_pad_smem", 0, 32}
          .searched(SearchGroup::staging, {{"fma", {"0", "4"}},
                                           {"mma_f16", {"0", "8"}},
                                           {"mma_bf16", {"0", "8"}},
                                           {"mma_tf32", {"0", "4"}}}),
      KnobDef{"PAD_KOUTER", "elements of padding per row of the slabs whose reduction dimension "
       "is outer (M or N contiguous: [BK][BN], [BK][BM]), taken instead of PAD_SMEM and "
       "SWIZZLE there (tf32 mma default 8 with PAD_SMEM=4: conflict-free 32-bit fragment "
       "reads of both layouts)", "t:045_pad_smem", 0, 32}
          .searched(SearchGroup::staging, {{"mma_tf32", {"8"}}}),
      KnobDef{"SWIZZLE", "XOR swizzle of shared tiles: a TMA pattern, or xor = Swizzle<B,M,S> "
       "derived from each tile's row length (excludes PAD_SMEM)",
       "t:046_swizzle_smem", 0, 0, false, {"none", "32B", "64B", "128B", "xor"}}
          .searched(SearchGroup::staging, {{"mma", {"none", "xor"}}, {"wgmma", {"128B"}, 90}}),
      KnobDef{"INTERLEAVE_LOADS", "issue each fragment load right before its first FMA, as "
       "handwritten SGEMMs do (0/1; 0 = all loads of a k step, then all FMAs); attention "
       "(k:012): K/V fragments per k-step right before their mmas (1) or the whole key "
       "block's first (0)",
       "k:052_interleave_loads", 0, 1}
          .searched(SearchGroup::other, {{"fma", {"0", "1"}}}),
      {"LDMATRIX", "load mma fragments from shared memory with ldmatrix (0/1; default 1: "
       "used where legal, element-wise loads elsewhere; tf32 needs K contiguous in the "
       "slab: A [BM][BK], B [BN][BK])",
       "k:025_lower_mma", 0, 1},
      KnobDef{"FRAG_BUFFERS", "mma fragment register sets per slab: 2 loads the next atom "
       "step's fragments before the current step's mmas (1 = load, then multiply); attention "
       "(k:012) likewise for K/V's k-steps (2 needs INTERLEAVE_LOADS=1)",
       "k:027_frag_buffers", 1, 2}
          .searched(SearchGroup::other, {{"mma", {"1", "2"}}}),
      KnobDef{"EPILOGUE", "how the accumulator tile reaches global memory: direct (each thread "
       "stores its own cells), smem (staged through a shared tile that reuses the "
       "mainloop's bytes, then row-contiguous stores of up to 16 bytes; k:054; a "
       "warp-specialized wgmma kernel stages in k:053's strips per consumer warpgroup, which "
       "its threads copy out: the default for rows TMA cannot address) or tma_store "
       "(wgmma kernels: a swizzled shared tile per consumer warpgroup, stored by TMA while "
       "the next tile's mainloop runs; k:053)",
       "k:054_stage_epilogue", 0, 0, false, {"direct", "smem", "tma_store"}}
          .searched(SearchGroup::other,
                    {{"mma", {"smem", "direct"}},
                     {"fma", {"direct", "smem"}},
                     {"wgmma", {"tma_store", "direct", "smem"}, 90}}),
      // Searched only where EPILOGUE=tma_store or smem (src/tune/space.cpp: dependent knobs).
      KnobDef{"EPI_BUFFERS", "EPILOGUE=tma_store (or smem on a warp-specialized wgmma kernel, "
       "whose threads then copy each strip out): 0 keeps the whole output tile in shared memory; "
       "N > 0 streams it through N strip buffers per consumer warpgroup (64 columns of a "
       "16-bit output, 32 of f32; 2 x 16 KB for a 128x256 tile, so STAGES=4 still fits), "
       "each strip stored by TMA while the next is written; in a persistent tile loop a "
       "multiple N >= 2 x the tile's strips makes a ring across tiles, so a tile's stores "
       "stream on under the next tile's mainloop and epilogue (k:053)",
       "k:053_tma_store_epilogue", 0, 8}
          .searched(SearchGroup::other, {{"wgmma", {"2", "0"}, 90}}),
      {"STMATRIX", "EPILOGUE=tma_store (or k:053's smem) with EPI_BUFFERS > 0: write 16-bit output strips with "
       "stmatrix.x4 (8 values per lane per instruction) where the fragment allows (0/1; "
       "default 1)", "k:053_tma_store_epilogue", 0, 1},
      {"EPI_SYNC", "EPILOGUE=tma_store (or k:053's smem) with EPI_BUFFERS >= 2 dividing the strips: named "
       "barriers per strip, 1 (default: the storing thread's wait for the buffer moves in "
       "front of the barrier that hands the strip to TMA) or 2 (a barrier before the strip's "
       "writes as well)", "k:053_tma_store_epilogue", 1, 2},
      {"EPI_LOAD", "how a wgmma kernel's epilogue reads an operand of the output's shape (a "
       "residual R[M, N], a SwiGLU gate E[M, N]): direct (global loads after the mainloop) or "
       "tma (WARP_SPECIALIZE=1: the producer loads its tile by TMA into swizzled shared strips "
       "right after the tile's last K slab, and the epilogue reads them there; k:056). Default: "
       "tma for one 16-bit operand in the persistent TMA-store schedules where it fits beside "
       "the ring (BN = 256: with STAGES=3 and 2 strip buffers, up to K = 4096), else direct", "k:056_tma_epilogue_operands", 0, 0, false, {"direct", "tma"}},
      {"EPI_LOAD_BUFFERS", "EPI_LOAD=tma: strip buffers per operand (64 columns of a 16-bit "
       "operand, 32 of f32, by the tile's rows; 16 KB for 128 rows of bf16), strip j in buffer "
       "j % N, refilled once every consumer warpgroup read it; 0 (default): the whole tile",
       "k:056_tma_epilogue_operands", 0, 8},
      {"UNROLL_K", "fully unroll constant reductions up to this many steps (0 = none)",
       "k:055_unroll_registers", 0, 256},
      KnobDef{"MIN_BLOCKS", "resident blocks per SM requested via __launch_bounds__ (0 = none)",
       "k:060_launch_bounds", 0, 32}
          .searched(SearchGroup::tiling, {{"fma", {"0", "2"}}}),
      {"DEPENDENT_LAUNCH", "programs of several kernels (split-K reduce, zero-fill): each later "
       "kernel is launched as the previous one's programmatic dependent and waits for it with "
       "griddepcontrol.wait, so its launch overlaps the previous grid's tail (0/1; default 1; "
       "sm_90+)", "k:065_dependent_launch", 0, 1},
      KnobDef{"WARP_SPECIALIZE", "a producer warpgroup fills the ring (TMA boxes, or with "
       "STAGE=cp_async its own copies) while the consumer warpgroups only compute, handing "
       "slots over through full/empty mbarriers (0/1; ATOM=wgmma_*)",
       "k:030_warp_specialize", 0, 1}
          .searched(SearchGroup::other, {{"wgmma", {"1", "0"}, 90}}),
      {"PRODUCER_REGS", "registers per thread the producer warpgroup keeps (setmaxnreg.dec; "
       "WARP_SPECIALIZE=1 with two or more consumer warpgroups)", "k:030_warp_specialize", 24, 256},
      {"CONSUMER_REGS", "registers per thread the consumer warpgroups take (setmaxnreg.inc; 0 = "
       "no register reallocation; two or more consumer warpgroups)", "k:030_warp_specialize", 0, 256},
      KnobDef{"CLUSTER_M", "CTAs per thread-block cluster along M: they share each B slab, every "
       "CTA's producer loading 1/CLUSTER_M of it for all by TMA multicast (1, 2 or 4; "
       "ATOM=wgmma_*, WARP_SPECIALIZE=1)", "t:010_partition_loops", 1, 4}
          .searched(SearchGroup::other, {{"wgmma", {"2", "1"}, 90}}),
      KnobDef{"CLUSTER_N", "CTAs per thread-block cluster along N: they share each A slab, every "
       "CTA's producer loading 1/CLUSTER_N of it for all by TMA multicast (1, 2, 4 or 8; with "
       "CLUSTER_M a 2-D cluster of CLUSTER_M x CLUSTER_N CTAs, at most 8, A multicast along "
       "N and B along M; after SWAP_AB, N is the original M; ATOM=wgmma_*, WARP_SPECIALIZE=1)",
       "t:010_partition_loops", 1, 8}
          .searched(SearchGroup::other, {{"wgmma", {"1", "2", "4"}, 90}}),
      KnobDef{"CLUSTER_K", "CTAs of a thread-block cluster splitting one output tile's K: each "
       "reduces 1/CLUSTER_K of it, then they add their f32 partial tiles through distributed "
       "shared memory, each finishing 1/CLUSTER_K of the rows (1 = no split; 2..8; "
       "ATOM=wgmma_*, PERSISTENT=0, CLUSTER_M=1; composes with SPLITK)",
       "l:022_cluster_k", 1, 16}
          .searched(SearchGroup::split_k, {{"wgmma", {"1", "2", "4", "8"}, 90}}),
      KnobDef{"CONSUMERS", "how the WM=2 consumer warpgroups of a warp-specialized persistent kernel "
       "share the work: cooperative (both split each tile, BM = WM*FM*64) or pingpong (each "
       "owns whole tiles of BM = FM*64 rows, alternately, their mainloops in turn so one's "
       "epilogue runs under the other's math; WARP_SPECIALIZE=1, PERSISTENT=1, WN=1)",
       "k:030_warp_specialize", 0, 0, false, {"cooperative", "pingpong"}}
          .searched(SearchGroup::other, {{"wgmma", {"cooperative", "pingpong"}, 90}}),
      KnobDef{"PERSISTENT", "min(tiles, SMs) CTAs each loop over output tiles (of every batch "
       "entry) instead of one CTA per tile (0/1; constant shapes)", "t:027_persistent", 0, 1}
          .searched(SearchGroup::other, {{"wgmma", {"1", "0"}, 90}}),
      {"PERSISTENT_CTAS", "CTAs of a persistent grid (0 = the SM count; a multiple of "
       "CLUSTER_M)", "t:027_persistent", 0, 1024},
      // Not searched: slower on every shape measured (bench/NOTES.md, 2026-11-23, stream-K), and each
      // searched value doubles the tuner's wgmma candidates in its group.
      KnobDef{"STREAM_K", "a persistent kernel's last one to two waves of tiles split by K "
       "iterations evenly over its CTAs, split tiles finished by the second part to arrive "
       "(0/1; PERSISTENT=1, WARP_SPECIALIZE=1, cooperative consumers; no effect when the "
       "tiles fill whole waves)", "t:048_stream_k", 0, 1},
      {"GEMM_FORM", "a declared default candidate of the wgmma GEMM in place of its shape class's "
       "default knob set (explicit knobs still override it; families/wgmma_candidates.h): default "
       "(the class's), one_row_pairs (65-128 rows as 64-row CTAs in 2-CTA clusters along M "
       "sharing W's slab, one wave wide, a deep ring; the default of such linears on fast-DRAM "
       "cards where BN >= 128); refused where the candidate does not take the shape",
       "driver: the defaults", 0, 0, false,
       {"default", "one_row_pairs"}},
      KnobDef{"VECTORIZE", "widest vector access in elements (1 = scalar; 16 bytes at most)",
       "k:015_lower_stages", 1, 8, true}
          .searched(SearchGroup::other, {{"fma", {"4"}}, {"mma", {"8"}}}),
      KnobDef{"REALIGN", "rows of 16-bit elements that start only 2-byte aligned (an odd "
       "row length, which TMA and 16-byte cp.async cannot address) are copied as aligned "
       "16-byte chunks shifted into place (1; with VECTORIZE=8), or one 2-byte element at a "
       "time (0)",
       "k:015_lower_stages", 0, 1}
          .searched(SearchGroup::other, {{"mma", {"1", "0"}}, {"wgmma", {"1", "0"}, 90}}),
      {"BLOCK_M", "attention: query rows per block of the online softmax (a CTA's rows; "
       "the causal key bound is per query block)", "l:005_online_softmax", 1, 256},
      {"BLOCK_N", "attention: keys per block of the online softmax (one rescale of the "
       "running max, sum and output per block)", "l:005_online_softmax", 1, 256},
      {"WARPS", "attention: warps per CTA, each owning BLOCK_M/WARPS query rows (a multiple "
       "of 16; default BLOCK_M/16, at most 8)", "t:012_partition_attention", 1, 16},
      {"KV_STAGES", "attention: K/V buffers in shared memory (1: K and V of one key block, "
       "loaded per block; 2: a ring, the next block's K and V issued eagerly under this "
       "block's math; 3, 4: rings with two or three blocks in flight (4: mma.sync only); "
       "5 to 8: deeper rings of the mma.sync kernel with KV_COPY=tma)",
       "k:012_lower_attention", 1, 8},
      {"Q_IN_REGS", "attention: Q's mma fragments loaded once and kept in registers (1), or "
       "re-read from shared memory at every k-step (0: D/4 registers per row atom freed, "
       "e.g. for BLOCK_M = 32 WARPS)", "k:012_lower_attention", 0, 1},
      {"SOFTMAX", "attention: exp2 (scores unscaled, scale·log2(e) folded into one FFMA "
       "before ex2) or exp (the plain form: scores scaled by one FMUL each, then expf)",
       "k:012_lower_attention", 0, 0, false, {"exp2", "exp"}},
      {"ZERO_INIT", "attention: S's accumulators zeroed through the first k-step's mma (mma: a "
       "zero C operand; the default) or by a loop of register moves before it (init; the "
       "default above D = 128 and with Q_IN_REGS=0, where mma's peeled k-step spilled)",
       "k:012_lower_attention", 0, 0, false, {"mma", "init"}},
      {"ATTN_MMA", "attention: the products' instructions: mma_sync (FlashAttention-2's "
       "kernel, k:012; sm_80+) or wgmma (TMA tiles and warpgroup MMAs, P from registers, "
       "k:013; sm_90a only; the default there for every D that is a multiple of 8 up to 256)",
       "k:013_lower_attention_wgmma", 0, 0, false, {"mma_sync", "wgmma"}},
      {"ATTN_WG", "attention with ATTN_MMA=wgmma: consumer warpgroups per CTA, 64 query rows "
       "each (BLOCK_M = 64 ATTN_WG; default 2, 3 for D = 72..128 with BLOCK_N 144 up to D = 96, "
       "128 to D = 112, 112 at D = 128: FlashAttention-3's tile; 2 by 128 keys there when "
       "dense Sq, Sk <= 1536)", "k:013_lower_attention_wgmma", 1, 3},
      {"ATTN_PRODUCER", "attention with ATTN_MMA=wgmma: 1 = a producer warpgroup (setmaxnreg "
       "24) issues the TMA loads and the consumers hand each K/V slot back through an empty "
       "mbarrier (FlashAttention-3; the default for D > 64 with 1-2 warpgroups); 0 = thread 0 "
       "issues them and a block barrier at the top of each key block frees the slot (the "
       "default up to D = 64)", "k:013_lower_attention_wgmma", 0, 1},
      {"ATTN_OVERLAP", "attention with ATTN_MMA=wgmma and ATTN_PRODUCER=1: 1 = S of key block "
       "kb issued before O += P V of block kb-1, the softmax running while that product is in "
       "flight (FlashAttention-3's intra-warpgroup overlap; P in a 16-bit register array; the "
       "default for dense attention at D = 113..128 and 232..256 past one 128-key block, under "
       "the causal walk only from 512 constant keys at D = 113..128 and from 1024 at 232..256, "
       "and for varlen at D = 113..128); 0 = "
       "each block's products in turn", "k:013_lower_attention_wgmma", 0, 1},
      {"ATTN_O_UNDER_S", "attention with ATTN_OVERLAP=1: 1 = O rescaled by a key "
       "block's alpha right after the next block's S is issued, under that wgmma "
       "(FlashAttention-3's placement; the default with the overlap); 0 = after P V of the "
       "block before retired, with the tensor cores idle", "k:013_lower_attention_wgmma", 0, 1},
      {"ATTN_PEEL_MASK", "attention with ATTN_MMA=wgmma: 1 = the key blocks that some row "
       "masks (past Sk, or on the causal diagonal) run as a loop of their own after the "
       "unmasked ones (FlashAttention-3's masking steps), so the main key loop has no mask "
       "code (the default causal at D = 113..128 with Sq and Sk constants up to 1536 or with the "
       "overlap under the walk, causal at D = 232..256 with the overlap under the walk, and "
       "varlen under the walk); 0 = one key loop, the mask under a per-block test (the "
       "default elsewhere)",
       "k:013_lower_attention_wgmma", 0, 1},
      {"ATTN_PACK_P", "attention with ATTN_MMA=wgmma: 1 = P converted once, after the softmax, "
       "into a 16-bit register array that O += P V reads as it is (FlashAttention-3's tOrP; "
       "always with ATTN_OVERLAP=1; the default at D = 113..128 past one key block); 0 = P "
       "packed from S's f32 "
       "accumulators at each P V wgmma (the default elsewhere)", "k:013_lower_attention_wgmma",
       0, 1},
      {"ATTN_PINGPONG", "attention with ATTN_MMA=wgmma, ATTN_PRODUCER=1 and 2-3 consumer "
       "warpgroups: 1 = the warpgroups take turns issuing their wgmmas (named barriers, "
       "bar.sync before a turn and bar.arrive for the next warpgroup after it), so one "
       "warpgroup's softmax runs under another's products (FlashAttention-3's ping-pong; the "
       "default at D = 113..128 with dense Sq, Sk <= 1536 or the overlap); 0 = each issues when ready",
       "k:013_lower_attention_wgmma", 0, 1},
      {"ATTN_PERSISTENT", "attention with ATTN_MMA=wgmma and ATTN_PRODUCER=1: 1 = a "
       "persistent grid (ATTN_CTAS CTAs) walks the work units (query "
       "block, head, batch; causal longest first; varlen without a mask sequence by sequence, "
       "query blocks fastest; varlen: each unit binds its "
       "sequence's lengths, units past a sequence's rows skipped; paged KV: each unit its "
       "sequence's key count), the producer loading the "
       "next unit while the consumers finish the current one (the default with the producer "
       "warpgroup, dense; causal with ATTN_OVERLAP=1 where the overlap under the walk is the "
       "default; varlen at D = 113..128 in the overlap tile, without a mask in the packed "
       "order, or in the 3 x 112 tile; paged prefill at D = 113..128 in the overlap tile); "
       "0 = one CTA per query block (with thread 0 issuing, and the serving forms in other tiles)",
       "k:013_lower_attention_wgmma", 0, 1},
      {"ATTN_CTAS", "attention with ATTN_PERSISTENT=1: CTAs of the persistent grid (0 = the "
       "SM count)", "k:013_lower_attention_wgmma", 0, 65536},
      {"ATTN_SCHEDULE", "attention with ATTN_PERSISTENT=1: how the CTAs take the work units: "
       "static (CTA c takes units c, c + P, ..; causal longest first within L2-sized sections, "
       "the rounds alternating direction) or dynamic (the first unit blockIdx.x, then the next "
       "of a global work counter, fetched by the producer and handed to the consumers through "
       "shared memory: the SM that frees first takes the longest unit left; the default "
       "causal and varlen, static without a mask and for causal paged KV of 4 or more pages a "
       "key block, where the static walk's ATTN_LOAD_WARPS=4 wins)",
       "k:013_lower_attention_wgmma", 0, 0, false, {"static", "dynamic"}},
      {"ATTN_LOAD_WARPS", "attention with ATTN_MMA=wgmma and ATTN_PRODUCER=1, one CTA per "
       "query block or the static walk (each warp walking the units itself, its own running "
       "block count; not the dynamic schedule nor varlen's walk): lane 0 of this many producer "
       "warps issues the K/V TMA boxes, each its "
       "share of a block's (paged KV: its pages' boxes and table reads) after waiting for the "
       "slot, the first arming the barrier and handing the unit over (default 4 for paged KV "
       "with 4 or more pages a key block, 1 otherwise)", "k:013_lower_attention_wgmma", 1, 4},
      {"ATTN_TMA_STORE", "attention with ATTN_MMA=wgmma (not varlen): 1 = O (1/l) written to "
       "shared memory (a buffer of its own, or Q's slot where that does not fit) and stored "
       "by TMA, 64 rows per warpgroup, clipped at Sq and D by the tensor map (the default "
       "with ATTN_PERSISTENT=1, and at D <= 64 without it unless paged); 0 = 4-byte stores "
       "from the fragments", "k:013_lower_attention_wgmma", 0, 1},
      {"ATTN_STMATRIX", "attention with ATTN_MMA=wgmma: O's 16-bit values written to a shared "
       "buffer by stmatrix.x4, 8 per lane per instruction and one swizzled row address per 16 "
       "columns, then stored by TMA (ATTN_TMA_STORE=1) or, without it, copied out by each "
       "warpgroup's threads in 16-byte row chunks under the row test (default 1 with the TMA "
       "store and for varlen); 0 = a 4-byte store per pair of values (to the TMA store's "
       "buffer, or to global memory)",
       "k:013_lower_attention_wgmma", 0, 1},
      {"SPLIT_KV", "attention (mma.sync kernel): the key blocks of each query block split "
       "over this many CTAs, each writing a partial O and LSE (f32) that a second kernel "
       "combines (1 = no split; default for Sq <= 64: at most one wave of CTAs and one split "
       "per key block; clamped to the key blocks)", "l:005_online_softmax", 1, 1024},
      {"GQA_PACK", "attention (mma.sync kernel): the Hq/Hkv query heads of a KV head packed "
       "into one CTA's rows (Sq x group rows), so K and V are read once per group (0/1; "
       "default 1 for Sq <= 64 with Hq > Hkv)", "l:005_online_softmax", 0, 1},
      {"COMBINE_GROUPS", "attention with SPLIT_KV > 1: groups of D threads per row in the "
       "combine kernel, group g folding splits g, g + G, .. before the groups meet in shared "
       "memory (default ceil(SPLIT_KV / 8), at most 1024 / D)", "k:012_lower_attention", 1, 16},
      {"SPLIT_WARPS", "attention (mma.sync kernel): warp groups that share a CTA's rows, "
       "group k walking key blocks k, k + W, .. with its own K/V ring and (m, l, O), the "
       "groups meeting in shared memory at the end (1 = one group; decode's default on sm_90: "
       "4 where the one-group split has splits of 2+ blocks and the row sets leave 2+ "
       "splits in a wave, else 1)",
       "k:012_lower_attention", 1, 8, true},
      {"COMBINE", "attention with SPLIT_KV > 1: the partials combined by a second kernel "
       "(kernel, k_attention_combine) or by the split kernel's CTA that arrives last on "
       "its row set's counter (last_cta: one launch; the default with SPLIT_WARPS >= 4 "
       "where it folds its row set in one pass, and for paged KV under 8 splits)",
       "k:012_lower_attention", 0, 0, false, {"kernel", "last_cta"}},
      {"KV_COPY", "attention (mma.sync kernel, sm_90): K and V blocks copied by 16-byte "
       "cp.async from every thread (cp_async, the default) or by TMA boxes of 64 columns x "
       "BLOCK_N rows issued by one thread per warp group, each ring slot completing on its "
       "own mbarrier (tma: a whole block in flight per instruction, no copy addresses in "
       "registers; needs KV_STAGES >= 2, D a multiple of 64, not paged or varlen)",
       "k:012_lower_attention", 0, 0, false, {"cp_async", "tma"}},
      {"STAGE_OUTPUT", "attention: O·(1/l) goes through Q's shared tile, then 16-byte "
       "row-contiguous stores (1), or straight from the fragments as 4-byte stores (0, the "
       "default)",
       "k:012_lower_attention", 0, 1},
  };
  return defs;
}

bool KnobSearch::applies(const std::string& atom, int cc) const {
  if (cc < min_cc) return false;
  if (atoms.empty() || atoms == atom) return true;
  return (atoms == "mma" && atom.rfind("mma_", 0) == 0) ||
         (atoms == "wgmma" && atom.rfind("wgmma_", 0) == 0);
}

KnobDef KnobDef::searched(SearchGroup g, std::vector<KnobSearch> s) const {
  KnobDef d = *this;
  d.group = g;
  d.search = std::move(s);
  return d;
}

std::vector<std::string> KnobDef::search_values(const std::string& atom, int cc) const {
  std::vector<std::string> out;
  for (const auto& e : search)
    if (e.applies(atom, cc))
      for (const auto& v : e.values)
        if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return out;
}

const KnobDef* find_knob(const std::string& name) {
  for (const auto& d : knob_registry())
    if (d.name == name) return &d;
  return nullptr;
}

static std::string known_knob_list() {
  std::string s;
  for (const auto& d : knob_registry()) s += (s.empty() ? "" : ", ") + d.name;
  return s;
}

void Knobs::set(const std::string& name, const std::string& value) {
  const KnobDef* def = find_knob(name);
  if (!def)
    throw Error("unknown knob '" + name + "'; known knobs: " + known_knob_list() +
                "; the matmul article's names TMA, ASYNC_COPY, STAGE=11|00, PIPELINE_STAGES, "
                "BUFFER_COUNT, ATOM_KIND and ATOMIC_FREE_SPLITK are read too (see docs/knobs.md)");
  if (!def->choices.empty()) {
    for (const auto& c : def->choices)
      if (c == value) {
        values_[name] = value;
        return;
      }
    std::string list;
    for (const auto& c : def->choices) list += (list.empty() ? "" : ", ") + c;
    throw Error("knob " + name + "=" + value + " is not one of: " + list);
  }
  char* end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0')
    throw Error("knob " + name + "=" + value + " is not an integer (" + def->doc + ")");
  if (v < def->min || v > def->max)
    throw Error("knob " + name + "=" + value + " is outside its range [" +
                std::to_string(def->min) + ", " + std::to_string(def->max) + "] (" +
                def->doc + ")");
  if (def->power_of_two && (v & (v - 1)) != 0)
    throw Error("knob " + name + "=" + value + " must be a power of two");
  values_[name] = std::to_string(v);
}

const std::vector<KnobAlias>& knob_aliases() {
  static const std::vector<KnobAlias> aliases = {
      {"STAGE", "STAGE", "STAGE=11 stages both operands through shared memory (the transport "
       "from TMA and ASYNC_COPY, else the shape's default), STAGE=00 neither (STAGE=direct); "
       "Loom stages both or neither, so 01 and 10 are errors"},
      {"TMA", "STAGE", "1: STAGE=tma; 0: not TMA (STAGE=cp_async, or sync with ASYNC_COPY=0)"},
      {"ASYNC_COPY", "STAGE", "1: STAGE=cp_async (unless TMA=1); 0: STAGE=sync"},
      {"PIPELINE_STAGES", "PIPELINE", "0/1: PIPELINE=0/1 (the ring's depth is BUFFER_COUNT)"},
      {"BUFFER_COUNT", "STAGES", "N: STAGES=N, shared buffers per staged slab"},
      {"ATOM_KIND", "ATOM", "fma, mma_m16n8k16_f16, mma_m16n8k16_bf16, mma_m16n8k8_tf32: "
       "ATOM=fma, mma_f16, mma_bf16, mma_tf32 (Loom's own ATOM values are taken as they are)"},
      {"ATOMIC_FREE_SPLITK", "SPLITK_MODE", "1: SPLITK_MODE=reduce (partials, then a reduce "
       "kernel); 0: SPLITK_MODE=atomic"},
  };
  return aliases;
}

namespace {

struct KnobItem {
  std::string name, value;
};

bool is_article_stage(const KnobItem& it) {
  return it.name == "STAGE" && it.value.size() == 2 && (it.value[0] == '0' || it.value[0] == '1') &&
         (it.value[1] == '0' || it.value[1] == '1');
}

bool is_alias(const KnobItem& it) {
  if (it.name == "STAGE") return is_article_stage(it);
  for (const auto& a : knob_aliases())
    if (a.name == it.name) return true;
  return false;
}

bool article_switch(const KnobItem& it) {
  if (it.value != "0" && it.value != "1")
    throw Error("knob " + it.name + "=" + it.value + " is not 0 or 1 (the article's switch, read "
                "as Loom's " + [&] {
                  for (const auto& a : knob_aliases())
                    if (a.name == it.name) return a.loom + ": " + a.doc;
                  return std::string();
                }() + ")");
  return it.value == "1";
}

std::string joined(const std::vector<KnobItem>& items) {
  std::string s;
  for (const auto& it : items) s += (s.empty() ? "" : ",") + it.name + "=" + it.value;
  return s;
}

// A list that uses the article's names (knob_aliases()), translated to Loom's knobs;
// `note` gets "<aliases> -> <Loom knobs>". A list without them comes back as it is.
std::vector<KnobItem> translate_aliases(const std::vector<KnobItem>& in, std::string& note) {
  std::vector<KnobItem> aliases;
  for (const auto& it : in)
    if (is_alias(it)) aliases.push_back(it);
  if (aliases.empty()) return in;
  const std::string article = joined(aliases);
  auto value_of = [&](const std::string& name) -> const KnobItem* {
    for (const auto& it : in)
      if (it.name == name && !is_alias(it)) return &it;
    return nullptr;
  };
  std::vector<KnobItem> out, made;
  std::optional<bool> staged, tma, async;
  std::string atom_kind;
  for (const auto& it : in) {
    if (!is_alias(it)) {
      out.push_back(it);
      continue;
    }
    if (it.name == "STAGE") {
      if (it.value == "01" || it.value == "10")
        throw Error("knob STAGE=" + it.value + " stages one operand (the article's STAGE has a "
                    "digit per operand); Loom stages both operands or neither: STAGE=11 or "
                    "STAGE=00 (Loom's STAGE=sync|cp_async|tma or direct)");
      staged = it.value == "11";
    } else if (it.name == "TMA") {
      tma = article_switch(it);
    } else if (it.name == "ASYNC_COPY") {
      async = article_switch(it);
    } else if (it.name == "PIPELINE_STAGES") {
      made.push_back({"PIPELINE", article_switch(it) ? "1" : "0"});
    } else if (it.name == "BUFFER_COUNT") {
      made.push_back({"STAGES", it.value});
    } else if (it.name == "ATOMIC_FREE_SPLITK") {
      made.push_back({"SPLITK_MODE", article_switch(it) ? "reduce" : "atomic"});
    } else if (it.name == "ATOM_KIND") {
      static const std::map<std::string, std::string> atoms = {
          {"fma", "fma"}, {"mma_m16n8k16_f16", "mma_f16"}, {"mma_m16n8k16_bf16", "mma_bf16"},
          {"mma_m16n8k8_tf32", "mma_tf32"}};
      auto a = atoms.find(it.value);
      std::string atom = a != atoms.end() ? a->second : it.value;
      const KnobDef* def = find_knob("ATOM");
      if (std::find(def->choices.begin(), def->choices.end(), atom) == def->choices.end())
        throw Error("knob ATOM_KIND=" + it.value + " is not an atom Loom has: ATOM_KIND takes "
                    "fma, mma_m16n8k16_f16, mma_m16n8k16_bf16 or mma_m16n8k8_tf32 (or Loom's "
                    "ATOM values: fma, mma_f16, mma_bf16, mma_tf32, wgmma_f16, wgmma_bf16, "
                    "wgmma_tf32)");
      atom_kind = it.value;
      made.push_back({"ATOM", atom});
    }
  }
  if (staged || tma || async) {
    std::optional<std::string> stage;
    if (staged == false) {
      if (tma == true || async == true)
        throw Error("knob STAGE=00 stages nothing, so " + std::string(tma == true ? "TMA=1" : "ASYNC_COPY=1") +
                    " has nothing to copy: drop it, or stage with STAGE=11");
      stage = "direct";
    } else if (tma == true) {
      stage = "tma";
    } else if (async == false) {
      stage = "sync";
    } else if (async == true || tma == false) {
      stage = "cp_async";
    }
    // STAGE=11 alone: staged, by the transport the shape's defaults pick.
    if (stage) made.push_back({"STAGE", *stage});
  }
  for (const auto& m : made)
    if (const KnobItem* own = value_of(m.name))
      throw Error("knob " + own->name + "=" + own->value + " and the article's " + article +
                  " both set " + m.name + " (the article's names read as " + joined(made) +
                  "): give " + m.name + " once");
  // The names the article gives another meaning: refused, with the whole list in Loom's
  // names (a Loom value next to the article's names would be read the article's way again).
  std::vector<KnobItem> loom = out;
  loom.insert(loom.end(), made.begin(), made.end());
  std::string tiles, depth_why;  // the refused names, and why
  for (auto& it : loom) {
    char* end = nullptr;
    const long long n = std::strtoll(it.value.c_str(), &end, 10);
    // A product is shown only for values a knob could hold (no overflow from BM=1e19).
    const bool number = *end == '\0' && !it.value.empty() && n >= 1 && n <= (1 << 20);
    if (it.name == "BM" || it.name == "BN") {
      const std::string cells = it.name == "BM" ? "FM" : "FN";
      const KnobItem* per_thread = value_of(cells);
      // One cell per thread: threads and rows are the same count.
      if (per_thread && per_thread->value == "1") continue;
      tiles += (tiles.empty() ? "" : " and ") + it.name;
      const long long f = per_thread ? std::strtoll(per_thread->value.c_str(), &end, 10) : 0;
      const bool f_number = per_thread && *end == '\0' && f >= 1 && f <= (1 << 20);
      it.value = number && f_number ? std::to_string(n * f) : "<" + it.value + " x " + cells + ">";
    } else if (it.name == "BK" && atom_kind.rfind("mma_", 0) == 0) {
      const int depth = atom_kind.find("k8") != std::string::npos ? 8 : 16;
      depth_why = "with ATOM_KIND=" + atom_kind + " its BK counts k-atoms (" +
                  std::to_string(depth) + " deep) and Loom's counts elements of K";
      it.value = number ? std::to_string(n * depth) : "<" + it.value + " x " + std::to_string(depth) + ">";
    }
  }
  if (!tiles.empty() || !depth_why.empty()) {
    std::string why;
    if (!tiles.empty())
      why = "there " + tiles + (tiles.size() > 2 ? " count" : " counts") + " threads, and Loom's " +
            "BM and BN count rows and columns of C per thread block (threads x FM, threads x FN)";
    if (!depth_why.empty()) why += (why.empty() ? "" : "; ") + depth_why;
    throw Error("knobs " + joined(in) + " use the article's names (" + article + "): " + why +
                ". In Loom's names the list reads " + joined(loom));
  }
  const std::string kept = "STAGE=11 alone keeps the shape's default staging";
  note = article + " -> " +
         (made.empty() ? "no Loom knob (" + kept + ")"
                       : joined(made) + (staged == true && !tma && !async ? " (" + kept + ")" : ""));
  return loom;
}

}  // namespace

Knobs Knobs::parse(const std::string& text) {
  Knobs k;
  std::vector<KnobItem> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto trim = [](std::string s) {
      size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
      return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
    };
    item = trim(item);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw Error("malformed knob '" + item + "': expected NAME=VALUE, e.g. BM=64");
    const std::string name = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    // Within one list a knob appears once: "BM=64,BM=128" silently meaning BM=128 hides a
    // typo (across lists, --knobs over LOOM_KNOBS is the documented precedence).
    for (const auto& seen : items)
      if (seen.name == name)
        throw Error("knob " + name + " is given twice (" + name + "=" + seen.value + " and " +
                    name + "=" + value + "): give each knob once");
    items.push_back({name, value});
  }
  std::string note;
  for (const auto& it : translate_aliases(items, note)) k.set(it.name, it.value);
  if (!note.empty()) k.alias_notes_.push_back(note);
  return k;
}

Knobs Knobs::from_env_and_cli(const std::string& cli) {
  Knobs k;
  if (const char* env = std::getenv("LOOM_KNOBS")) {
    try {
      k = parse(env);
    } catch (const Error& e) {
      throw Error(std::string("in LOOM_KNOBS: ") + e.what());
    }
  }
  try {
    k.merge(parse(cli));
  } catch (const Error& e) {
    throw Error(std::string("in --knobs: ") + e.what());
  }
  return k;
}

void Knobs::merge(const Knobs& over) {
  for (const auto& [n, v] : over.values_) values_[n] = v;
  alias_notes_.insert(alias_notes_.end(), over.alias_notes_.begin(), over.alias_notes_.end());
}

int64_t Knobs::get_int(const std::string& name, int64_t fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : std::stoll(it->second);
}

std::string Knobs::get_str(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::string Knobs::str() const {
  std::string s;
  for (const auto& d : knob_registry()) {
    auto it = values_.find(d.name);
    if (it != values_.end()) s += (s.empty() ? "" : ",") + d.name + "=" + it->second;
  }
  return s;
}

}  // namespace loom
