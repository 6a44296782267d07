// Decode attention (l:005's split-KV form on the mma.sync kernel): a few query rows
// against a long KV cache, the KV split SPLIT_KV ways across CTAs (GQA_PACK stacks the
// query heads of a KV head into one tile; SPLIT_WARPS warp groups share a CTA's rows,
// each walking every W-th key block), the partial results combined by a second kernel
// launched as the split kernel's programmatic dependent, or (COMBINE=last_cta) by the
// split kernel's CTA that finishes a row set last.
#include "passes/families/attention_knobs.h"

namespace loom {

KernelFamily attention_decode_family() {
  KernelFamily f;
  f.name = "attention_decode";
  f.summary = "decode attention: the mma.sync kernel over a KV split SPLIT_KV ways, query "
              "heads packed per KV head (GQA_PACK), a combine kernel; sm_80 and newer";
  f.op = FamilyOp::attention;
  f.chosen_by = "a few query rows against a long KV (attention_decode.h's split rule), or "
                "an explicit SPLIT_KV > 1";
  f.reads = {{"BLOCK_M"},      {"BLOCK_N"},   {"WARPS"},        {"KV_STAGES"}, {"KV_COPY"},
             {"Q_IN_REGS"},    {"SOFTMAX"},   {"ZERO_INIT"},    {"STAGE_OUTPUT"},
             {"ATTN_MMA", {"mma_sync"}},      {"SPLIT_KV"},     {"GQA_PACK"},
             {"COMBINE_GROUPS"}, {"SPLIT_WARPS"}, {"COMBINE"},
             {"FRAG_BUFFERS"}, {"SWIZZLE"}, {"INTERLEAVE_LOADS"},
             {"UNROLL_K"},     {"MIN_BLOCKS"}, {"DEPENDENT_LAUNCH"}};
  f.honours = attention_honours(f.reads);
  return f;
}

}  // namespace loom
