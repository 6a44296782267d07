// The decode attention cases (SPLIT_KV, GQA_PACK; docs/attention.md, "Decode"): Sq in
// {1, 4, 7} against long and odd key lengths, GQA 32/8 and 32/32 and MQA, the three masks
// (bottom-right causal with Sq > Sk empties rows), with and without LSE, bf16 and f16,
// D 64 and 128, the decode defaults and the knobs off them (no split, no packing, a split
// count that does not divide the key blocks, more splits than blocks, KV_STAGES=1, and
// the deeper rings KV_STAGES=3, 4).
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
  }
  // Head dim 256 (BLOCK_N = 16: O and Q's fragments leave few registers) and 64.
  v.push_back({expr(1, 16, 4, 4, 4097, 256, "true", "bf16", true), ""});
  v.push_back({expr(2, 32, 8, 1, 8192, 64, "false", "bf16", true), ""});
  v.push_back({expr(1, 32, 8, 1, 32768, 128, "false", "bf16", true), ""});
  v.push_back({expr(1, 32, 8, 4, 32768, 128, "true", "bf16", true), ""});
  v.push_back({expr(1, 16, 4, 4, 4097, 256, "true", "bf16", true), "KV_STAGES=4"});
  v.push_back({expr(1, 32, 8, 1, 32768, 128, "false", "bf16", true), "KV_STAGES=4"});
  return v;
}

}  // namespace loom::attention_test
