// The attention cases of tests/gpu/test_attention.cpp: odd lengths (1, 17, 1000, 4097),
// Sq != Sk both ways, GQA 32/8 and MQA, bf16 and f16, causal (bottom-right), top-left and
// none, head dims 64, 128 and 256, with and without LSE, default and non-default block
// shapes. Shared with tests/cpu/driver/test_attention_compile.cpp, which compiles every
// case's kernel with NVRTC for sm_80 and sm_90a and checks ptxas spilled nothing, so only
// the numerics are left to the GPU.
#pragma once
#include <string>
#include <vector>

namespace loom::attention_test {

struct Case {
  std::string expr;
  std::string knobs;
};

inline std::string expr(int b, int hq, int hkv, int sq, int sk, int d, const std::string& causal,
                        const std::string& dtype, bool lse) {
  auto t = [&](const char* n, int h, int s) {
    return std::string(n) + "[" + std::to_string(b) + "," + std::to_string(h) + "," +
           std::to_string(s) + "," + std::to_string(d) + "]:" + dtype;
  };
  return "attention(" + t("Q", hq, sq) + ", " + t("K", hkv, sk) + ", " + t("V", hkv, sk) +
         ", causal=" + causal + (lse ? ", lse=true" : "") + ")";
}

inline std::vector<Case> cases() {
  std::vector<Case> v;
  for (const char* dt : {"bf16", "f16"})
    for (int d : {64, 128})
      for (const char* causal : {"true", "false", "top_left"}) {
        // Odd lengths, Sq = Sk.
        for (int s : {1, 17, 1000})
          v.push_back({expr(1, 4, 2, s, s, d, causal, dt, true), ""});
        // Sq != Sk both ways (bottom-right with Sq > Sk empties the first rows).
        v.push_back({expr(2, 4, 4, 17, 1000, d, causal, dt, true), ""});
        v.push_back({expr(2, 4, 4, 1000, 17, d, causal, dt, true), ""});
      }
  // Longer rows, GQA 32/8 and MQA, no LSE, other block shapes (two m16 atoms per warp;
  // one warp per 16 rows with 8 warps).
  for (const char* causal : {"true", "false"}) {
    v.push_back({expr(1, 32, 8, 4097, 4097, 128, causal, "bf16", true), ""});
    v.push_back({expr(2, 8, 1, 1000, 1000, 64, causal, "f16", false), ""});
    v.push_back({expr(2, 8, 2, 1000, 1000, 128, causal, "bf16", true), "BLOCK_M=128,WARPS=8"});
    v.push_back({expr(2, 8, 2, 1000, 1000, 64, causal, "bf16", true),
                 "BLOCK_M=128,BLOCK_N=32,WARPS=4"});
    v.push_back({expr(2, 8, 2, 1000, 777, 128, causal, "f16", true), "BLOCK_M=64,BLOCK_N=32"});
    // The single-buffered K/V of KV_STAGES=1 (the default is 2, eager loads).
    v.push_back({expr(2, 8, 2, 1000, 1000, 128, causal, "bf16", true), "KV_STAGES=1"});
    v.push_back({expr(2, 8, 1, 4097, 1000, 64, causal, "f16", true), "KV_STAGES=1,BLOCK_N=32"});
    // Two m16 atoms per warp with Q's fragments re-read from shared memory.
    v.push_back({expr(2, 8, 2, 1000, 1000, 128, causal, "bf16", true),
                 "Q_IN_REGS=0,BLOCK_M=128,WARPS=4,BLOCK_N=32"});
    v.push_back({expr(2, 8, 2, 1000, 777, 64, causal, "f16", true), "Q_IN_REGS=0,BLOCK_M=128,WARPS=4"});
    // Head dim 256 (BLOCK_N = 16 by default: the registers O and Q take).
    v.push_back({expr(1, 4, 2, 1000, 777, 256, causal, "bf16", true), ""});
  }
  return v;
}

}  // namespace loom::attention_test
