// Varlen cases (docs/attention.md, "Serving forms: varlen"): packed sequences Q [Tq,Hq,D],
// K/V [Tk,Hkv,D] with cumulative lengths from fill_serving_inputs (the first sequence
// max_seqlen_q queries, the others random up to it, keys in proportion), the three masks,
// GQA and MHA, D 64, 96 and 128, bf16 and f16, with and without LSE: on sm_90a the wgmma
// kernel (the default once max_seqlen_q passes 64: both issue schemes, at D = 128 the
// overlap tile — 2 x 64 rows by 128 keys, the ping-pong — and the 3 x 112 tile by
// ATTN_OVERLAP=0, 64 + 32 column spans at D = 96), and the mma.sync kernel by
// ATTN_MMA=mma_sync and for a decode-sized max_seqlen_q; the wgmma kernel under the
// persistent walk (the default at D = 128 with either tile; ATTN_PERSISTENT=0 there runs
// one CTA per query block); O by stmatrix and the threads' copy-out (ATTN_STMATRIX=1).
// tests/gpu/test_attention_varlen.cpp runs them against the fp64 reference;
// tests/cpu/driver/test_attention_varlen.cpp compiles every kernel with NVRTC for sm_80 and
// sm_90a (no spills).
#pragma once
#include <string>
#include <vector>

#include "attention_cases.h"

namespace loom::attention_test {

inline std::string varlen_expr(int b, int tq, int tk, int hq, int hkv, int d, int max_q,
                               const std::string& causal, const char* dtype, bool lse) {
  auto n = [](int x) { return std::to_string(x); };
  return "attention(Q[" + n(tq) + "," + n(hq) + "," + n(d) + "]:" + dtype + ", K[" + n(tk) + "," +
         n(hkv) + "," + n(d) + "]:" + dtype + ", V[" + n(tk) + "," + n(hkv) + "," + n(d) + "]:" +
         dtype + ", cu_seqlens_q=CQ[" + n(b + 1) + "]:i32, cu_seqlens_k=CK[" + n(b + 1) +
         "]:i32, max_seqlen_q=" + n(max_q) + ", causal=" + causal + (lse ? ", lse=true" : "") + ")";
}

inline std::vector<Case> varlen_cases() {
  std::vector<Case> v;
  for (const char* causal : {"true", "false", "top_left"}) {
    v.push_back({varlen_expr(4, 2000, 2000, 16, 16, 128, 1000, causal, "bf16", true), ""});
    v.push_back({varlen_expr(3, 1500, 3000, 8, 2, 64, 700, causal, "f16", false), ""});
  }
  v.push_back({varlen_expr(8, 4096, 4096, 32, 8, 128, 1024, "true", "bf16", true), ""});
  // The deeper K/V rings (KV_STAGES=3, 4) over packed sequences.
  v.push_back({varlen_expr(4, 2000, 2000, 16, 16, 128, 1000, "true", "bf16", true), "KV_STAGES=3"});
  v.push_back({varlen_expr(3, 1500, 3000, 8, 2, 64, 700, "false", "f16", false),
               "ATTN_MMA=mma_sync,KV_STAGES=4"});
  // The mma.sync kernel by name (the wgmma kernel is sm_90a's default above), and by
  // default for a decode-sized max_seqlen_q.
  for (const char* causal : {"true", "false"})
    v.push_back({varlen_expr(4, 2000, 2000, 16, 16, 128, 1000, causal, "bf16", true),
                 "ATTN_MMA=mma_sync"});
  v.push_back({varlen_expr(6, 200, 900, 32, 8, 128, 48, "true", "bf16", true), ""});
  // The wgmma kernel's variants: the producer warpgroup at D = 64, thread 0 issuing at
  // D = 128, two warpgroups by 128 keys, D = 96 (64 + 32 columns), MQA.
  v.push_back({varlen_expr(3, 1500, 3000, 8, 2, 64, 700, "true", "bf16", true), "ATTN_PRODUCER=1"});
  v.push_back({varlen_expr(4, 2000, 2000, 16, 16, 128, 1000, "true", "bf16", true),
               "ATTN_PRODUCER=0"});
  v.push_back({varlen_expr(4, 2000, 2000, 16, 16, 128, 1000, "top_left", "bf16", true),
               "ATTN_WG=2,BLOCK_N=128"});
  v.push_back({varlen_expr(5, 3000, 3000, 8, 1, 96, 1000, "true", "f16", true), ""});
  // The persistent walk (ATTN_PERSISTENT=1): causal units over max_seqlen_q's query blocks,
  // without a mask the packed order (sequence by sequence, query blocks fastest; also the
  // default there at D = 128, the first cases above), each binding its sequence's lengths,
  // units past a sequence's rows skipped; the grid of SMs
  // and a few CTAs (each walking many sequences' units), both schedules (causal's default
  // dynamic, the mask-free static), the three masks, GQA and MQA, D 64, 96 and 128.
  for (const char* causal : {"true", "false"}) {
    v.push_back({varlen_expr(4, 2000, 2000, 16, 16, 128, 1000, causal, "bf16", true),
                 "ATTN_PERSISTENT=1"});
    v.push_back({varlen_expr(8, 4096, 4096, 32, 8, 128, 1024, causal, "bf16", true),
                 "ATTN_PERSISTENT=1,ATTN_CTAS=3"});
  }
  v.push_back({varlen_expr(4, 2000, 2000, 16, 16, 128, 1000, "true", "bf16", true),
               "ATTN_PERSISTENT=1,ATTN_SCHEDULE=static,ATTN_CTAS=7"});
  v.push_back({varlen_expr(3, 1500, 3000, 8, 2, 64, 700, "top_left", "f16", false),
               "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_SCHEDULE=dynamic,ATTN_CTAS=5"});
  v.push_back({varlen_expr(5, 3000, 3000, 8, 1, 96, 1000, "false", "f16", true),
               "ATTN_PERSISTENT=1"});
  // Causal at D = 128 the walk is the default (the cases with no knobs above): one CTA per
  // query block given, as before the default moved.
  v.push_back({varlen_expr(4, 2000, 2000, 16, 16, 128, 1000, "true", "bf16", true),
               "ATTN_PERSISTENT=0"});
  // The 3 x 112 tile's causal walk (the causal default until 2026-11-29), both corners.
  for (const char* causal : {"true", "top_left"})
    v.push_back({varlen_expr(8, 4096, 4096, 32, 8, 128, 1024, causal, "f16", true),
                 "ATTN_OVERLAP=0"});
  // O by stmatrix into shared memory and the threads' 16-byte copy-out under the row test
  // (ATTN_STMATRIX=1, varlen's default: the cases above): the 3 x 112 causal walk, one CTA
  // per query block, D = 96's 64 + 32 spans, D = 64; and the fragments' 4-byte stores
  // (ATTN_STMATRIX=0, the default before 2026-11-29).
  for (const char* causal : {"true", "false"})
    v.push_back({varlen_expr(4, 2000, 2000, 16, 16, 128, 1000, causal, "bf16", true), "ATTN_STMATRIX=0"});
  v.push_back({varlen_expr(8, 4096, 4096, 32, 8, 128, 1024, "top_left", "f16", true),
               "ATTN_OVERLAP=0,ATTN_STMATRIX=1"});
  v.push_back({varlen_expr(4, 2000, 2000, 16, 16, 128, 1000, "false", "bf16", true),
               "ATTN_PERSISTENT=0,ATTN_STMATRIX=1"});
  v.push_back({varlen_expr(5, 3000, 3000, 8, 1, 96, 1000, "true", "f16", true), "ATTN_STMATRIX=1"});
  v.push_back({varlen_expr(3, 1500, 3000, 8, 2, 64, 700, "false", "bf16", false),
               "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_STMATRIX=1"});
  return v;
}

}  // namespace loom::attention_test
