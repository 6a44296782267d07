// Attention on wgmma (k:013, sm_90a): FlashAttention-3's organization, ATTN_WG consumer
// warpgroups of 64 query rows each, a TMA producer warpgroup streaming K/V tiles of
// BLOCK_N rows, optional ping-pong consumers and softmax/GEMM overlap.
#include "passes/families/attention_knobs.h"

namespace loom {

KernelFamily attention_wgmma_family() {
  KernelFamily f;
  f.name = "attention_wgmma";
  f.summary = "attention on wgmma (k:013): ATTN_WG consumer warpgroups of 64 query rows, a TMA "
              "producer warpgroup streaming K/V; sm_90a";
  f.op = FamilyOp::attention;
  f.chosen_by = "ATTN_MMA=wgmma (the default on sm_90a for head dims that are multiples of 8 "
                "up to 256, dense, paged or packed; not decode's split forms)";
  // WARPS is read to be checked (4 per consumer warpgroup: a given WARPS must match ATTN_WG).
  // The other attention kernels' knobs that this one neither reads nor honours are refused
  // by attention_wgmma_tiles(), which takes them from those families' reads.
  f.reads = {{"BLOCK_M"},      {"BLOCK_N"},      {"WARPS"},       {"KV_STAGES"},   {"ATTN_MMA", {"wgmma"}},
             {"ATTN_WG"},      {"ATTN_PRODUCER"}, {"ATTN_OVERLAP"}, {"ATTN_PACK_P"}, {"ATTN_O_UNDER_S"}, {"ATTN_PEEL_MASK"},
             {"ATTN_PINGPONG"}, {"ATTN_PERSISTENT"}, {"ATTN_CTAS"}, {"ATTN_SCHEDULE"}, {"ATTN_LOAD_WARPS"}, {"ATTN_TMA_STORE"}, {"ATTN_STMATRIX"}, {"SPLIT_KV"},    {"GQA_PACK"},    {"UNROLL_K"},
             {"MIN_BLOCKS"}};
  f.honours = attention_honours(f.reads, {"SWIZZLE", "INTERLEAVE_LOADS"});
  // tune/attention_space.cpp. Values in search order; the first of each is where the
  // enumeration starts. BLOCK_N: 128 (k:013's default up to D = 128), FlashAttention-3's
  // 176 (D = 128), 144 (D = 96, with three consumer warpgroups), 112 (D = 192) and 80
  // (D = 256), 64 and 32 (k:013's defaults above D = 128, without and with ATTN_OVERLAP),
  // 256 for D = 64; the passes refuse those whose accumulators or K/V ring do not fit at
  // the head dim being tuned. ATTN_PINGPONG (the consumer warpgroups taking turns) is
  // searched where the producer warpgroup runs; the pass refuses it with one warpgroup.
  // ATTN_PACK_P both ways without the overlap (which needs it: 1 there). ATTN_PERSISTENT
  // (the grid walking the units) where the producer warpgroup runs (the pass refuses it
  // without), and
  // under it ATTN_SCHEDULE both ways (the stride or the work counter); with the producer,
  // on the plain grid or the static walk (whose schedule is pinned to its first value,
  // static, without the walk), ATTN_LOAD_WARPS 1 and 4 (the TMA issue spread over its warps;
  // the dynamic schedule's single fetching thread refuses it).
  // Not searched:
  // ATTN_TMA_STORE and ATTN_STMATRIX, how O leaves — their defaults won or tied at every
  // point measured (bench/NOTES.md, 2026-11-29, "O to shared memory by stmatrix"), and
  // their other values are there to measure that again, not to tune.
  f.tuner_min_cc = 90;
  f.tuner_needs_accelerated = true;
  f.tuner_space = {{"ATTN_MMA", {"wgmma"}},
                   {"ATTN_WG", {"2", "1", "3"}},
                   {"BLOCK_N", {"128", "64", "96", "176", "192", "32", "80", "256", "144", "112"}},
                   {"KV_STAGES", {"2", "3"}},
                   {"ATTN_PRODUCER", {"1", "0"}},
                   {"ATTN_OVERLAP", {"0", "1"}},
                   {"ATTN_PINGPONG", {"0", "1"}},
                   {"ATTN_PACK_P", {"1", "0"}},
                   {"ATTN_PERSISTENT", {"0", "1"}},
                   {"ATTN_SCHEDULE", {"static", "dynamic"}},
                   {"ATTN_LOAD_WARPS", {"1", "4"}}};
  f.tuner_rules = {{"ATTN_OVERLAP", "ATTN_PRODUCER", "1"},
                   {"ATTN_PERSISTENT", "ATTN_PRODUCER", "1"},
                   {"ATTN_SCHEDULE", "ATTN_PERSISTENT", "1"},
                   {"ATTN_PINGPONG", "ATTN_PRODUCER", "1"},
                   {"ATTN_PACK_P", "ATTN_OVERLAP", "0"},
                   {"ATTN_LOAD_WARPS", "ATTN_PRODUCER", "1"},
                   {"ATTN_LOAD_WARPS", "ATTN_SCHEDULE", "static"}};
  return f;
}

}  // namespace loom
