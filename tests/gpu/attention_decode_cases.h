// The decode attention cases (SPLIT_KV, GQA_PACK; docs/attention.md, "Decode"): Sq in
// {1, 4, 7} against long and odd key lengths, GQA 32/8 and 32/32 and MQA, the three masks
// (bottom-right causal with Sq > Sk empties rows), with and without LSE, bf16 and f16,
// D 64 and 128, the decode defaults and the knobs off them (no split, no packing, a split
// count that does not divide the key blocks, more splits than blocks, KV_STAGES=1, and
// the deeper rings KV_STAGES=3, 4), SPLIT_WARPS 2 and 4, COMBINE=last_cta (with them), and
// KV_COPY=tma (TMA boxes into the rings).
// tests/gpu/test_attention_decode.cpp runs them against the fp64 reference;
// tests/cpu/driver/test_attention_decode_compile.cpp compiles every kernel with NVRTC for
// sm_80 and sm_90a (no spills).
#pragma once
#include <string>
#include <vector>

#include "attention_cases.h"

namespace loom::attention_test {

inline std::vector<Case> decode_cases() {
  std::vector<Case> v;
  for (const char* causal : {"true", "false", "top_left"}) {
    // The decode defaults (split count from the grid, packing on with GQA).
    v.push_back({expr(1, 32, 8, 1, 8191, 128, causal, "bf16", true), ""});
    v.push_back({expr(2, 32, 8, 4, 8192, 128, causal, "bf16", true), ""});
    v.push_back({expr(2, 32, 32, 1, 8192, 128, causal, "bf16", false), ""});
    v.push_back({expr(1, 8, 1, 7, 4097, 64, causal, "f16", true), ""});
    // Sq > Sk: rows with no key (bottom-right), splits holding no key of a row.
    v.push_back({expr(1, 32, 8, 7, 5, 128, causal, "bf16", true), "SPLIT_KV=2,BLOCK_N=16"});
    v.push_back({expr(2, 8, 2, 7, 100, 64, causal, "bf16", true), "SPLIT_KV=3,BLOCK_N=16"});
    // Off the defaults: no split, no packing, an uneven split, clamped splits, one stage.
    v.push_back({expr(1, 32, 8, 4, 8191, 128, causal, "bf16", true), "SPLIT_KV=1"});
    v.push_back({expr(1, 32, 8, 4, 8191, 128, causal, "bf16", true), "GQA_PACK=0"});
    v.push_back({expr(1, 32, 8, 4, 8191, 128, causal, "f16", true), "SPLIT_KV=7"});
    v.push_back({expr(1, 32, 8, 1, 1000, 128, causal, "bf16", true), "SPLIT_KV=64"});
    v.push_back({expr(2, 32, 8, 4, 3000, 128, causal, "bf16", true), "KV_STAGES=1"});
    // Deeper rings (two and three blocks in flight): with the default split, with splits
    // shorter than the ring (94 blocks in 32 splits of 3), and unsplit.
    v.push_back({expr(1, 32, 8, 1, 8191, 128, causal, "bf16", true), "KV_STAGES=3"});
    v.push_back({expr(2, 32, 8, 4, 8192, 128, causal, "bf16", true), "KV_STAGES=4"});
    v.push_back({expr(1, 32, 32, 1, 3001, 128, causal, "f16", false), "KV_STAGES=4,SPLIT_KV=40"});
    v.push_back({expr(1, 8, 1, 7, 4097, 64, causal, "bf16", true), "KV_STAGES=3,SPLIT_KV=1"});
    // SPLIT_WARPS (warp groups sharing the rows, meeting in shared memory) and
    // COMBINE=last_cta (the split kernel's last CTA per row set combines; one launch),
    // alone and together, with the default split and with rows and splits holding no key
    // (SPLIT_WARPS=4 on rings of 2: four rings of 3 at D = 128 are 197 KB, past sm_80's
    // 163 KB a block).
    v.push_back({expr(1, 32, 8, 1, 8191, 128, causal, "bf16", true), "SPLIT_WARPS=4,KV_STAGES=2"});
    v.push_back({expr(2, 32, 8, 4, 8192, 128, causal, "bf16", true), "COMBINE=last_cta"});
    v.push_back({expr(1, 32, 8, 1, 8191, 128, causal, "bf16", true),
                 "COMBINE=last_cta,SPLIT_WARPS=4,KV_STAGES=2"});
    v.push_back({expr(2, 8, 2, 7, 100, 64, causal, "bf16", true),
                 "SPLIT_KV=3,BLOCK_N=16,SPLIT_WARPS=2,COMBINE=last_cta"});
  }
  // Head dim 256 (BLOCK_N = 16: O and Q's fragments leave few registers) and 64.
  v.push_back({expr(1, 16, 4, 4, 4097, 256, "true", "bf16", true), ""});
  v.push_back({expr(2, 32, 8, 1, 8192, 64, "false", "bf16", true), ""});
  v.push_back({expr(1, 32, 8, 1, 32768, 128, "false", "bf16", true), ""});
  v.push_back({expr(1, 32, 8, 4, 32768, 128, "true", "bf16", true), ""});
  v.push_back({expr(1, 16, 4, 4, 4097, 256, "true", "bf16", true), "KV_STAGES=4"});
  v.push_back({expr(1, 32, 8, 1, 32768, 128, "false", "bf16", true), "KV_STAGES=4"});
  v.push_back({expr(1, 32, 8, 1, 32768, 128, "false", "bf16", true), "SPLIT_WARPS=2"});
  v.push_back({expr(1, 32, 32, 1, 3001, 128, "false", "f16", false),
               "COMBINE=last_cta,SPLIT_KV=40"});
  v.push_back({expr(1, 8, 1, 7, 4097, 64, "true", "f16", true), "SPLIT_WARPS=4,KV_STAGES=2"});
  v.push_back({expr(1, 16, 4, 4, 4097, 256, "true", "bf16", true), "SPLIT_WARPS=2"});
  // KV_COPY=tma (sm_90 only; the compile test skips it for sm_80): TMA boxes into the
  // rings, one mbarrier per slot. The decode defaults around it (four groups, rings of 3,
  // the last-CTA combine), odd Sk, Sq 1/4/7, GQA packed and not, MQA, D 64/128/256, deeper
  // rings (6 and 8: past cp.async's 4), one group with the combine kernel, 64-key blocks, B 8.
  for (const char* causal : {"true", "false", "top_left"}) {
    v.push_back({expr(1, 32, 8, 1, 8191, 128, causal, "bf16", true), "KV_COPY=tma"});
    v.push_back({expr(2, 32, 8, 4, 8192, 128, causal, "bf16", true), "KV_COPY=tma,KV_STAGES=4"});
    v.push_back({expr(1, 8, 1, 7, 4097, 64, causal, "f16", true), "KV_COPY=tma"});
  }
  v.push_back({expr(1, 32, 32, 1, 3001, 128, "false", "f16", false),
               "KV_COPY=tma,SPLIT_WARPS=1,KV_STAGES=4,SPLIT_KV=40"});
  v.push_back({expr(1, 32, 8, 4, 8191, 128, "true", "bf16", true), "KV_COPY=tma,GQA_PACK=0"});
  v.push_back({expr(1, 16, 4, 4, 4097, 256, "true", "bf16", true), "KV_COPY=tma"});
  v.push_back({expr(1, 32, 8, 1, 32768, 128, "false", "bf16", true), "KV_COPY=tma,BLOCK_N=64"});
  v.push_back({expr(8, 32, 8, 1, 8191, 128, "false", "bf16", true), "KV_COPY=tma"});
  v.push_back({expr(1, 32, 8, 1, 1000, 128, "true", "bf16", true), "KV_COPY=tma,SPLIT_KV=64"});
  // Rings past cp.async's 4: two groups of 6 slots, one group of 8 (phases wrap).
  v.push_back({expr(1, 32, 8, 1, 32768, 128, "false", "bf16", true),
               "KV_COPY=tma,SPLIT_WARPS=2,KV_STAGES=6"});
  v.push_back({expr(1, 32, 8, 4, 8191, 128, "true", "bf16", true),
               "KV_COPY=tma,SPLIT_WARPS=1,KV_STAGES=8,SPLIT_KV=4"});
  return v;
}

}  // namespace loom::attention_test
