// Attention on mma.sync (k:012): FlashAttention-2's kernel, warps of m16n8k16 atoms over
// BLOCK_M query rows, K/V tiles of BLOCK_N rows through a cp.async ring; sm_80 and newer,
// and sm_90a where the wgmma kernel does not take the head dim.
#include "passes/families/attention_knobs.h"

namespace loom {

KernelFamily attention_mma_sync_family() {
  KernelFamily f;
  f.name = "attention_mma_sync";
  f.summary = "attention on mma.sync (k:012): warps of m16n8k16 atoms over BLOCK_M query rows, "
              "K/V through a cp.async ring (or TMA boxes, KV_COPY=tma, sm_90); sm_80 and newer";
  f.op = FamilyOp::attention;
  f.chosen_by = "ATTN_MMA=mma_sync (the default off sm_90a and for head dims wgmma does "
                "not take)";
  f.reads = {{"BLOCK_M"},   {"BLOCK_N"},   {"WARPS"},      {"KV_STAGES"},        {"Q_IN_REGS"},
             {"KV_COPY"},
             {"SOFTMAX"},   {"ZERO_INIT"}, {"STAGE_OUTPUT"}, {"ATTN_MMA", {"mma_sync"}},
             {"SPLIT_KV"},  {"GQA_PACK"},  {"FRAG_BUFFERS"}, {"SWIZZLE"},       {"INTERLEAVE_LOADS"},
             {"UNROLL_K"},  {"MIN_BLOCKS"}, {"SPLIT_WARPS"}};
  f.honours = attention_honours(f.reads);
  // tune/attention_space.cpp: the tiles of bench/NOTES.md's D = 128 A/B (64x64 default,
  // FA2's 128x64 with 4 warps, 128x32 with Q re-read).
  f.tuner_min_cc = 80;
  f.tuner_space = {{"ATTN_MMA", {"mma_sync"}},   {"BLOCK_M", {"64", "128"}},
                   {"BLOCK_N", {"64", "32", "48"}}, {"WARPS", {"4", "8"}},
                   {"Q_IN_REGS", {"1", "0"}},     {"KV_STAGES", {"2", "1"}},
                   {"SOFTMAX", {"exp2", "exp"}}};
  return f;
}

}  // namespace loom
