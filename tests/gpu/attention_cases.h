// The attention cases of tests/gpu/test_attention.cpp: odd lengths (1, 17, 1000, 4097),
// Sq != Sk both ways, GQA 32/8 and MQA, bf16 and f16, causal (bottom-right), top-left and
// none, head dims 64, 128 and 256, with and without LSE, default and non-default block
// shapes. Shared with tests/cpu/driver/test_attention_compile.cpp, which compiles every
// case's kernel with NVRTC for sm_80 and sm_90a and checks ptxas spilled nothing, so only
// the numerics are left to the GPU.
#pragma once
#include <cctype>
#include <ostream>
#include <string>
#include <vector>

namespace loom::attention_test {

struct Case {
  std::string expr;
  std::string knobs;
};

// gtest prints a case by this (found by ADL in the case's namespace) instead of its bytes.
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs; }

inline std::string expr(int b, int hq, int hkv, int sq, int sk, int d, const std::string& causal,
                        const std::string& dtype, bool lse) {
  auto t = [&](const char* n, int h, int s) {
    return std::string(n) + "[" + std::to_string(b) + "," + std::to_string(h) + "," +
           std::to_string(s) + "," + std::to_string(d) + "]:" + dtype;
  };
  return "attention(" + t("Q", hq, sq) + ", " + t("K", hkv, sk) + ", " + t("V", hkv, sk) +
         ", causal=" + causal + (lse ? ", lse=true" : "") + ")";
}

// A test name gtest accepts (letters, digits, underscores) that says what the case is:
// index, Q's [B,Hq,Sq,D], K's heads and length, dtype, mask, LSE, knobs — e.g.
// "7_q2x4x17x64_k4x1000_bf16_causal_true_lse" or "40_..._lse_KV_STAGES_1".
inline std::string name(const Case& c, size_t index) {
  auto dims = [&](char tensor) {
    const size_t open = c.expr.find(std::string(1, tensor) + "[") + 2;
    return c.expr.substr(open, c.expr.find(']', open) - open);
  };
  std::string q = dims('Q'), k = dims('K');
  // K's [B,Hkv,Sk,D] -> Hkv,Sk; dims joined by x.
  const size_t k1 = k.find(',') + 1, k3 = k.rfind(',');
  k = k.substr(k1, k3 - k1);
  for (std::string* d : {&q, &k})
    for (char& ch : *d)
      if (ch == ',') ch = 'x';
  const size_t dt = c.expr.find("]:") + 2;
  const size_t causal = c.expr.find("causal=") + 7;
  std::string out = std::to_string(index) + "_q" + q + "_k" + k + "_" +
                    c.expr.substr(dt, c.expr.find(',', dt) - dt) + "_causal_" +
                    c.expr.substr(causal, c.expr.find_first_of(",)", causal) - causal);
  if (c.expr.find("lse=true") != std::string::npos) out += "_lse";
  if (!c.knobs.empty()) out += "_" + c.knobs;
  for (char& ch : out)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return out;
}

// The cases pin k:012's mma.sync kernel: on sm_90a the default is the wgmma kernel
// (attention_wgmma_cases.h runs the same matrix through it).
inline std::string mma_sync(const std::string& knobs) {
  return "ATTN_MMA=mma_sync" + (knobs.empty() ? std::string() : "," + knobs);
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
        // The ladder's knobs off their defaults on every mask, dtype and head dim.
        v.push_back({expr(2, 4, 2, 1000, 777, d, causal, dt, true),
                     "FRAG_BUFFERS=2,SOFTMAX=exp,ZERO_INIT=init,STAGE_OUTPUT=1"});
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
    // The articles' ladder as knobs: the whole key block's fragments first, SMEM->RF double
    // buffering (with Q re-read and two row atoms too), the plain exp softmax, S zeroed by
    // register moves, O staged through Q_s (STAGE_OUTPUT=0 is the default: predicted a
    // wash, docs/attention.md), and the base kernel with every step off.
    v.push_back({expr(2, 8, 2, 1000, 1000, 128, causal, "bf16", true), "INTERLEAVE_LOADS=0,BLOCK_N=32"});
    v.push_back({expr(2, 8, 1, 4097, 1000, 64, causal, "f16", true), "INTERLEAVE_LOADS=0"});
    v.push_back({expr(2, 8, 2, 1000, 1000, 128, causal, "bf16", true), "FRAG_BUFFERS=2"});
    v.push_back({expr(2, 8, 2, 1000, 777, 64, causal, "f16", true),
                 "FRAG_BUFFERS=2,Q_IN_REGS=0,BLOCK_M=128,WARPS=4"});
    v.push_back({expr(2, 8, 2, 1000, 1000, 128, causal, "bf16", true), "SOFTMAX=exp"});
    v.push_back({expr(2, 4, 4, 17, 1000, 64, causal, "f16", true), "SOFTMAX=exp"});
    v.push_back({expr(2, 8, 2, 1000, 777, 128, causal, "bf16", true), "ZERO_INIT=init,STAGE_OUTPUT=1"});
    v.push_back({expr(1, 32, 8, 4097, 4097, 128, causal, "bf16", true), "STAGE_OUTPUT=1"});
    v.push_back({expr(2, 8, 2, 1000, 1000, 128, causal, "bf16", true),
                 "SWIZZLE=none,KV_STAGES=1,INTERLEAVE_LOADS=0,BLOCK_N=32,SOFTMAX=exp,ZERO_INIT=init,"
                 "STAGE_OUTPUT=0"});
    // Head dim 256 (BLOCK_N = 16 by default: the registers O and Q take).
    v.push_back({expr(1, 4, 2, 1000, 777, 256, causal, "bf16", true), ""});
  }
  return v;
}

}  // namespace loom::attention_test
