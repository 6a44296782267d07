// The cases of tests/gpu/test_attention_wgmma.cpp: attention's wgmma kernel
// (ATTN_MMA=wgmma, k:013) over attention_cases.h's matrix — odd lengths (1, 17, 1000,
// 4097), Sq != Sk both ways, GQA 32/8 and MQA, bf16 and f16, the three masks, head dims
// 64, 128, 192 and 256, with and without LSE — and its knobs (ATTN_WG 1..3, BLOCK_N); the
// head dims between (column spans of 64, 32 and 16, the last half zero fill for D = 8 mod
// 16): 8, 16, 24, 32, 40, 72, 80, 96, 104, 112, 160, 200, 232 with the defaults, and knob variants at
// 40, 80, 96, 112, 160 (wgmma_head_dim_cases: the GPU test's HeadDims group). Shared
// with tests/cpu/driver/test_attention_wgmma_compile.cpp, which compiles every case for
// sm_90a with NVRTC and checks ptxas spilled nothing.
#pragma once
#include <vector>

#include "attention_cases.h"

namespace loom::attention_test {

// The head dims that are not multiples of 64.
inline std::vector<Case> wgmma_head_dim_cases() {
  std::vector<Case> v;
  const std::string wg = "ATTN_MMA=wgmma";
  for (const char* causal : {"true", "false"}) {
    for (int d : {32, 40, 72, 80, 96, 104, 112, 160, 200, 232})
      v.push_back({expr(1, 4, 2, 1000, 777, d, causal, "bf16", true), wg});
    v.push_back({expr(2, 4, 4, 17, 1000, 40, causal, "f16", true), wg + ",ATTN_WG=1"});
    v.push_back({expr(1, 8, 2, 4097, 1000, 80, causal, "bf16", false),
                 wg + ",ATTN_PRODUCER=1,ATTN_OVERLAP=1"});
    v.push_back({expr(1, 32, 8, 4097, 4097, 96, causal, "bf16", true), wg});
    v.push_back({expr(2, 8, 2, 1000, 1000, 96, causal, "bf16", true), wg + ",ATTN_PRODUCER=0"});
    v.push_back({expr(2, 8, 2, 1000, 777, 96, causal, "f16", true),
                 wg + ",ATTN_WG=3,BLOCK_N=144,ATTN_PRODUCER=1"});
    v.push_back({expr(2, 8, 1, 1000, 777, 112, causal, "f16", true), wg + ",KV_STAGES=3"});
    v.push_back({expr(1, 4, 2, 1000, 777, 160, causal, "bf16", true), wg + ",BLOCK_N=128"});
  }
  v.push_back({expr(2, 4, 4, 1000, 17, 72, "top_left", "bf16", true), wg});
  // Below 32: one 16-column span (D = 16), and D = 8 / 24 whose last span is half zero fill
  // (D = 8: the box is wider than the tensor's rows).
  for (int d : {8, 16, 24}) v.push_back({expr(1, 4, 2, 1000, 777, d, "true", "bf16", true), wg});
  v.push_back({expr(2, 4, 4, 17, 1000, 232, "top_left", "f16", true), wg});
  return v;
}

// ATTN_PINGPONG=1 (the consumer warpgroups take turns issuing wgmmas through named
// barriers): two and three warpgroups, with and without ATTN_OVERLAP, D 64, 96, 128, 256,
// the three masks, odd lengths, Sq != Sk both ways, GQA 32/8, LSE, bf16 and f16 (the GPU
// test's PingPong group).
inline std::vector<Case> wgmma_pingpong_cases() {
  std::vector<Case> v;
  const std::string pp = "ATTN_MMA=wgmma,ATTN_PRODUCER=1,ATTN_PINGPONG=1";
  for (const char* causal : {"true", "false", "top_left"}) {
    v.push_back({expr(1, 4, 2, 1000, 777, 128, causal, "bf16", true), pp});  // 3 x 64 rows
    v.push_back({expr(2, 4, 4, 17, 1000, 128, causal, "f16", true), pp + ",ATTN_WG=2"});
    v.push_back({expr(2, 8, 2, 1000, 17, 64, causal, "bf16", true), pp});
    v.push_back({expr(1, 4, 2, 1000, 777, 256, causal, "bf16", true), pp});
  }
  for (const char* causal : {"true", "false"}) {
    v.push_back({expr(1, 32, 8, 4097, 4097, 128, causal, "bf16", true), pp});
    v.push_back({expr(1, 32, 8, 1000, 1000, 128, causal, "bf16", false),
                 pp + ",ATTN_WG=2,ATTN_OVERLAP=1"});
    v.push_back({expr(1, 4, 1, 1000, 777, 128, causal, "bf16", true), pp + ",ATTN_WG=2,BLOCK_N=176"});
    v.push_back({expr(2, 8, 2, 1000, 777, 128, causal, "f16", true), pp + ",ATTN_WG=2,BLOCK_N=128"});
    v.push_back({expr(2, 8, 2, 1000, 777, 96, causal, "bf16", true), pp});
    v.push_back({expr(1, 8, 2, 4097, 1000, 256, causal, "bf16", true), pp + ",ATTN_OVERLAP=1"});
    v.push_back({expr(2, 4, 4, 1000, 1000, 64, causal, "f16", true), pp + ",ATTN_OVERLAP=1"});
    // ATTN_PACK_P=1 without the overlap: P converted once after the softmax.
    v.push_back({expr(2, 8, 2, 1000, 777, 128, causal, "bf16", true), "ATTN_MMA=wgmma,ATTN_PACK_P=1"});
    v.push_back({expr(1, 4, 2, 1000, 777, 256, causal, "f16", true), pp + ",ATTN_PACK_P=1"});
    v.push_back({expr(2, 4, 4, 17, 1000, 64, causal, "bf16", true), "ATTN_MMA=wgmma,ATTN_PACK_P=1"});
  }
  return v;
}

// The intra-warpgroup overlap's tiles (ATTN_OVERLAP=1: the next block's S issued before
// this block's softmax, P in its own 16-bit array, K and V released apart), the forms the
// defaults may take (the GPU test's Overlap group): D = 256 at 80 and 64 keys (the
// default at 80, with the walk where it is on by default, without a mask), FlashAttention-3's D = 128 tile (two
// warpgroups with the ping-pong, 176 keys without a mask, 128 causal), three warpgroups at
// 96 keys (D = 96) and 112 (D = 64), two by 192 keys at D = 64; odd lengths, Sq != Sk
// both ways, GQA 32/8, LSE, bf16 and f16, the three masks.
inline std::vector<Case> wgmma_overlap_cases() {
  std::vector<Case> v;
  const std::string ov = "ATTN_MMA=wgmma,ATTN_PRODUCER=1,ATTN_OVERLAP=1";
  const std::string fa3 = ov + ",ATTN_WG=2,ATTN_PINGPONG=1";
  for (const char* causal : {"true", "false"}) {
    v.push_back({expr(1, 8, 2, 4097, 1000, 256, causal, "bf16", true), ov});
    v.push_back({expr(2, 4, 4, 1000, 777, 256, causal, "f16", true), ov + ",BLOCK_N=64"});
    v.push_back({expr(2, 4, 4, 17, 1000, 256, causal, "f16", true), "ATTN_MMA=wgmma"});  // the default
    v.push_back({expr(1, 32, 8, 4097, 4097, 128, causal, "bf16", true), fa3 + ",BLOCK_N=176"});
    v.push_back({expr(2, 8, 2, 1000, 777, 128, causal, "f16", true), fa3 + ",BLOCK_N=128"});
    v.push_back({expr(2, 4, 4, 17, 1000, 128, causal, "bf16", true), fa3 + ",BLOCK_N=176"});
    v.push_back({expr(2, 8, 2, 1000, 777, 96, causal, "bf16", true), ov + ",ATTN_WG=3,BLOCK_N=96"});
    v.push_back({expr(2, 8, 2, 1000, 777, 64, causal, "f16", true), ov + ",ATTN_WG=3,BLOCK_N=112"});
    v.push_back({expr(2, 8, 2, 1000, 17, 64, causal, "bf16", true), fa3 + ",BLOCK_N=192"});
  }
  v.push_back({expr(1, 4, 2, 1000, 777, 256, "top_left", "bf16", true), ov});
  v.push_back({expr(1, 4, 2, 1000, 777, 128, "top_left", "bf16", true), fa3 + ",BLOCK_N=128"});
  return v;
}

// ATTN_PEEL_MASK=1 (the masked key blocks as a loop of their own after the unmasked ones;
// the GPU test's PeelMask group): the benchmark's default tiles — D = 256 with the overlap
// at 80 keys (1000 and 4097 keys: the last block ragged), without it at 64 keys causal
// under the dynamic walk; D = 128's 2 x 128 with the ping-pong and 3 x 112 under the walk
// — the three masks, Sq != Sk both ways (Sq > Sk: warpgroups with no unmasked block),
// GQA 32/8, LSE, bf16 and f16.
inline std::vector<Case> wgmma_peel_cases() {
  std::vector<Case> v;
  const std::string pm = "ATTN_MMA=wgmma,ATTN_PEEL_MASK=1";
  for (const char* causal : {"true", "false", "top_left"}) {
    v.push_back({expr(1, 8, 2, 4097, 1000, 256, causal, "bf16", true), pm + ",ATTN_OVERLAP=1"});
    v.push_back({expr(2, 4, 4, 1000, 4097, 256, causal, "f16", true), pm});
    v.push_back({expr(1, 32, 8, 1000, 1000, 128, causal, "bf16", true), pm});  // 2 x 128, the ping-pong
    v.push_back({expr(1, 32, 8, 4097, 4097, 128, causal, "bf16", true), pm});  // 3 x 112, the walk
    v.push_back({expr(2, 8, 2, 777, 1000, 128, causal, "f16", true), pm + ",ATTN_OVERLAP=1,ATTN_WG=2"});
  }
  return v;
}

// ATTN_OVERLAP=1 under the walk's stream (the consumers' thread lets after their
// setmaxnreg, which removed the 4 B spill; the GPU test's OverlapWalk group): D = 256 at 80
// keys, causal (the dynamic schedule, the walk's causal default) with Sq > Sk on 16 CTAs
// (keyless units), the three masks at 1000 x 777, the dynamic schedule without a mask; with
// and without the peeled mask. And the defaults that take them: causal D = 256 from 1024
// keys (the overlap under the dynamic walk, peeled; Sq < Sk and Sq = Sk, LSE), causal
// D = 128 in the short tile (2 x 128 with the ping-pong, peeled; GQA 8/2, Sq != Sk).
inline std::vector<Case> wgmma_overlap_walk_cases() {
  std::vector<Case> v;
  v.push_back({expr(1, 4, 2, 1000, 4096, 256, "true", "bf16", true), "ATTN_MMA=wgmma"});
  v.push_back({expr(1, 2, 2, 4096, 4096, 256, "top_left", "f16", false), "ATTN_MMA=wgmma"});
  v.push_back({expr(1, 4, 2, 1500, 2048, 256, "true", "bf16", true), "ATTN_MMA=wgmma"});
  v.push_back({expr(2, 2, 2, 1024, 1024, 256, "top_left", "f16", true), "ATTN_MMA=wgmma"});
  v.push_back({expr(2, 8, 2, 1000, 1200, 128, "true", "bf16", true), "ATTN_MMA=wgmma"});
  v.push_back({expr(2, 8, 2, 1200, 1000, 128, "top_left", "f16", false), "ATTN_MMA=wgmma"});
  const std::string ow = "ATTN_MMA=wgmma,ATTN_OVERLAP=1,ATTN_PERSISTENT=1";
  for (const char* peel : {"", ",ATTN_PEEL_MASK=1"}) {
    v.push_back({expr(2, 8, 2, 4097, 1000, 256, "true", "bf16", true), ow + ",ATTN_CTAS=16" + peel});
    for (const char* causal : {"true", "top_left"})
      v.push_back({expr(1, 4, 2, 1000, 777, 256, causal, "f16", true), ow + peel});
    v.push_back({expr(1, 4, 2, 1000, 777, 256, "false", "bf16", true), ow + ",ATTN_SCHEDULE=dynamic" + peel});
  }
  return v;
}

// ATTN_PERSISTENT=1 (the grid walks the units; causal longest first, the units back to back
// in the K/V ring, each unit's ring base handed from the producer to the consumers) and ATTN_TMA_STORE=1 (O through shared memory by TMA store,
// clipped at Sq and D; written there by stmatrix, and by 4-byte stores with ATTN_STMATRIX=0): D 64 (with the producer), 96, 128, 256 (O in Q's slot) and 40
// (a 16-column span half past D), the three masks, odd lengths both ways (Sq > Sk: units
// with no key), GQA 32/8, LSE, bf16 and f16; the SM-count grid and a tiny one (ATTN_CTAS=7:
// dozens of units per CTA), causal sections (8 x 16 pairs at 4097 keys), the overlap and
// the ping-pong under the walk (the GPU test's Persistent group).
inline std::vector<Case> wgmma_persistent_cases() {
  std::vector<Case> v;
  const std::string p = "ATTN_MMA=wgmma,ATTN_PRODUCER=1,ATTN_PERSISTENT=1";
  const std::string pt = p + ",ATTN_TMA_STORE=1";
  for (const char* causal : {"true", "false", "top_left"}) {
    v.push_back({expr(1, 4, 2, 1000, 777, 128, causal, "bf16", true), p});
    v.push_back({expr(1, 4, 2, 1000, 777, 128, causal, "bf16", true), pt});
    v.push_back({expr(2, 4, 4, 17, 1000, 96, causal, "f16", true), pt + ",ATTN_CTAS=7"});
    v.push_back({expr(2, 8, 2, 1000, 17, 64, causal, "bf16", true), pt});
    v.push_back({expr(1, 4, 2, 1000, 777, 256, causal, "bf16", true), pt});
    v.push_back({expr(2, 4, 2, 1000, 777, 40, causal, "f16", true), "ATTN_MMA=wgmma,ATTN_TMA_STORE=1"});
    // O's 4-byte stores to its buffer instead of stmatrix (ATTN_STMATRIX=0).
    v.push_back({expr(1, 4, 2, 1000, 777, 128, causal, "bf16", true), pt + ",ATTN_STMATRIX=0"});
    v.push_back({expr(2, 4, 2, 1000, 777, 40, causal, "f16", true), "ATTN_MMA=wgmma,ATTN_TMA_STORE=1,ATTN_STMATRIX=0"});
  }
  for (const char* causal : {"true", "false"}) {
    v.push_back({expr(1, 32, 8, 4097, 4097, 128, causal, "bf16", true), pt});
    v.push_back({expr(4, 16, 16, 1024, 1024, 128, causal, "bf16", false), pt + ",ATTN_CTAS=7"});
    // Causal: 8 sections of 16 (head, batch) pairs (2 MB of K and V each within 32 MB).
    v.push_back({expr(8, 16, 16, 4097, 4097, 128, causal, "bf16", false), p});
    v.push_back({expr(2, 8, 2, 4097, 1000, 256, causal, "bf16", true), p});
    v.push_back({expr(2, 8, 2, 1000, 777, 128, causal, "f16", true), pt + ",ATTN_OVERLAP=1,ATTN_WG=2"});
    v.push_back({expr(2, 8, 2, 1000, 777, 128, causal, "bf16", true), pt + ",ATTN_PINGPONG=1"});
    v.push_back({expr(1, 8, 8, 2048, 2048, 64, causal, "bf16", true), pt + ",KV_STAGES=3"});
  }
  // Sq > Sk causal at D = 256 (three quarters of the units keyless) on few CTAs, or a
  // three-slot ring with its padding: they hung on the H100 while a warpgroup's first warp
  // ran alone through the keyless units and the padding (k:013, the warpgroup meeting
  // before an elected arrival), as the 132-CTA case above did at times.
  v.push_back({expr(2, 8, 2, 4097, 1000, 256, "true", "bf16", true), p + ",ATTN_CTAS=16"});
  v.push_back({expr(2, 8, 2, 4097, 1000, 256, "true", "bf16", true), p + ",KV_STAGES=3,BLOCK_N=48"});
  // ATTN_SCHEDULE=dynamic (the work counter, the unit hand-off through shared memory, the
  // stop): the three masks at D 128, 96 and 256, Sq > Sk (keyless units) on 16 CTAs and a
  // three-slot ring, a tiny grid, GQA, the sections at 4097 keys. (Launches that reuse
  // the counter: scripts/attention_walk_check.py.)
  const std::string dy = p + ",ATTN_SCHEDULE=dynamic";
  for (const char* causal : {"true", "false", "top_left"}) {
    v.push_back({expr(1, 4, 2, 1000, 777, 128, causal, "bf16", true), dy});
    v.push_back({expr(2, 4, 4, 17, 1000, 96, causal, "f16", true), dy + ",ATTN_TMA_STORE=1,ATTN_CTAS=7"});
    v.push_back({expr(1, 4, 2, 1000, 777, 256, causal, "bf16", true), dy});
  }
  v.push_back({expr(8, 16, 16, 4097, 4097, 128, "true", "bf16", false), dy});
  v.push_back({expr(4, 16, 16, 1024, 1024, 128, "true", "bf16", false), dy + ",ATTN_TMA_STORE=1"});
  v.push_back({expr(2, 8, 2, 4097, 1000, 256, "true", "bf16", true), dy + ",ATTN_CTAS=16"});
  v.push_back({expr(2, 8, 2, 4097, 1000, 256, "true", "bf16", true), dy + ",KV_STAGES=3,BLOCK_N=48"});
  return v;
}

inline std::vector<Case> wgmma_cases() {
  std::vector<Case> v;
  const std::string wg = "ATTN_MMA=wgmma";
  for (const char* dt : {"bf16", "f16"})
    for (int d : {64, 128})
      for (const char* causal : {"true", "false", "top_left"}) {
        for (int s : {1, 17, 1000}) v.push_back({expr(1, 4, 2, s, s, d, causal, dt, true), wg});
        v.push_back({expr(2, 4, 4, 17, 1000, d, causal, dt, true), wg});
        v.push_back({expr(2, 4, 4, 1000, 17, d, causal, dt, true), wg});
        v.push_back({expr(2, 4, 2, 1000, 777, d, causal, dt, true), wg + ",BLOCK_N=64"});
      }
  for (const char* causal : {"true", "false"}) {
    v.push_back({expr(1, 32, 8, 4097, 4097, 128, causal, "bf16", true), wg});
    v.push_back({expr(2, 8, 1, 1000, 1000, 64, causal, "f16", false), wg});
    v.push_back({expr(2, 8, 2, 1000, 777, 128, causal, "bf16", true), wg + ",ATTN_WG=1"});
    v.push_back({expr(2, 8, 2, 1000, 777, 64, causal, "bf16", true), wg + ",ATTN_WG=3,BLOCK_N=64"});
    v.push_back({expr(2, 8, 2, 1000, 1000, 128, causal, "bf16", true), wg + ",ATTN_PRODUCER=0"});
    v.push_back({expr(2, 8, 2, 1000, 777, 64, causal, "f16", true), wg + ",KV_STAGES=3"});
    v.push_back({expr(2, 4, 2, 1000, 777, 64, causal, "bf16", true),
                 wg + ",ATTN_PRODUCER=1,KV_STAGES=3,BLOCK_N=64"});
    for (int d : {64, 128}) {
      v.push_back({expr(2, 8, 2, 1000, 777, d, causal, "bf16", true),
                   wg + ",ATTN_PRODUCER=1,ATTN_OVERLAP=1"});
      v.push_back({expr(1, 4, 4, 17, 1000, d, causal, "f16", true),
                   wg + ",ATTN_PRODUCER=1,ATTN_OVERLAP=1"});
    }
    v.push_back({expr(1, 32, 8, 4097, 4097, 128, causal, "bf16", true),
                 wg + ",ATTN_PRODUCER=1,ATTN_OVERLAP=1"});
    v.push_back({expr(2, 8, 2, 4097, 1000, 128, causal, "f16", true), wg + ",BLOCK_N=32"});
    v.push_back({expr(1, 4, 2, 1000, 777, 256, causal, "bf16", true), wg});  // BLOCK_N = 64
    // D = 192: three 64-column boxes, O += P V as m64n192k16 (BLOCK_N = 64, the producer).
    v.push_back({expr(1, 4, 2, 1000, 777, 192, causal, "bf16", true), wg});
    v.push_back({expr(2, 4, 4, 17, 1000, 192, causal, "f16", true), wg + ",ATTN_PRODUCER=0"});
    v.push_back({expr(1, 8, 2, 4097, 1000, 192, causal, "bf16", false),
                 wg + ",ATTN_PRODUCER=1,ATTN_OVERLAP=1"});
  }
  return v;
}

}  // namespace loom::attention_test
