// Paged KV cases (docs/attention.md, "Serving forms: paged KV"): page pools Kc/Vc
// [P,Hkv,page,D] read through a block table, page sizes 16 to 256 (smaller than, equal to
// and larger than the key block), decode (Sq 1 and 4, GQA 32/8 packed and not, MQA,
// split and not) on the mma.sync kernel, prefill (Sq 100 to 400) on sm_90a's default wgmma
// kernel (pages 16 to 256: one TMA box per block, several, 32-row pieces under D = 128's
// paged 3 x 96 tile, 16-row ones under 112 keys; both issue schemes and 1, 3 or 4 issuing
// producer warps; one CTA per query block and the persistent walk; GQA 32/8) and on
// mma.sync, the three masks,
// bf16 and f16, D 64 and 128, with and without LSE. The inputs come from
// fill_serving_inputs (bench/verify_attention.h): pages in shuffled order, lengths just
// under the table's capacity and different per sequence, unused pages NaN.
// tests/gpu/test_attention_paged.cpp runs them against the fp64 reference;
// tests/cpu/driver/test_attention_paged.cpp compiles every kernel with NVRTC for sm_80 and
// sm_90a (no spills).
#pragma once
#include <string>
#include <vector>

#include "attention_cases.h"

namespace loom::attention_test {

// Q[b,hq,sq,d], Kc/Vc[pages,hkv,page,d], BT[b,maxp], L[b].
inline std::string paged_expr(int b, int hq, int hkv, int sq, int d, int pages, int page, int maxp,
                              const std::string& causal, const char* dtype, bool lse) {
  auto n = [](int x) { return std::to_string(x); };
  const std::string pool = "[" + n(pages) + "," + n(hkv) + "," + n(page) + "," + n(d) + "]:" + dtype;
  return "attention(Q[" + n(b) + "," + n(hq) + "," + n(sq) + "," + n(d) + "]:" + dtype +
         ", Kc" + pool + ", Vc" + pool + ", block_table=BT[" + n(b) + "," + n(maxp) +
         "]:i32, seqlens_k=L[" + n(b) + "]:i32, causal=" + causal + (lse ? ", lse=true" : "") + ")";
}

inline std::vector<Case> paged_cases() {
  std::vector<Case> v;
  for (const char* causal : {"true", "false", "top_left"}) {
    v.push_back({paged_expr(4, 32, 8, 1, 128, 300, 16, 64, causal, "bf16", true), ""});
    v.push_back({paged_expr(2, 32, 8, 4, 128, 40, 256, 16, causal, "bf16", true), ""});
    v.push_back({paged_expr(3, 8, 1, 1, 64, 40, 64, 12, causal, "f16", false), "SPLIT_KV=1"});
    v.push_back({paged_expr(2, 32, 8, 4, 128, 64, 32, 32, causal, "bf16", true), "GQA_PACK=0"});
    v.push_back({paged_expr(2, 8, 2, 100, 64, 24, 128, 8, causal, "bf16", true), ""});
  }
  v.push_back({paged_expr(2, 32, 8, 1, 128, 256, 16, 128, "false", "bf16", true), "BLOCK_N=16"});
  // The decode kernel's deeper K/V rings (KV_STAGES=3, 4) read through the table.
  v.push_back({paged_expr(4, 32, 8, 1, 128, 300, 16, 64, "true", "bf16", true), "KV_STAGES=3"});
  v.push_back({paged_expr(2, 32, 8, 4, 128, 40, 256, 16, "false", "bf16", true), "KV_STAGES=4"});
  // The combine kernel's loads ahead of its per-split tests (every split of a long table:
  // 32 one-block splits, 8 a thread), and the last CTA by name where the default is the
  // kernel (16 rows: four passes).
  v.push_back({paged_expr(1, 32, 8, 1, 128, 16, 64, 16, "false", "bf16", true), ""});
  v.push_back({paged_expr(1, 32, 8, 1, 128, 16, 64, 16, "true", "bf16", true), "COMBINE=kernel"});
  v.push_back({paged_expr(1, 32, 8, 4, 128, 128, 64, 128, "true", "bf16", true),
               "COMBINE=last_cta"});
  // Prefill on the wgmma kernel (the default from Sq = 65 on sm_90a): D = 128's default
  // tile (2 x 64 rows by 128 keys, the overlap, the ping-pong, O by the copy-out) over
  // 64-key pages and 256-key ones, the 3 x 96 tile (ATTN_OVERLAP=0) and 112 keys (16-row
  // boxes), 2 x 128 over 16-key pages (a box per page), thread 0 issuing at D = 64 over
  // 128-key pages, MQA, f16; and the mma.sync kernel by name at the same shape.
  for (const char* causal : {"true", "false"}) {
    v.push_back({paged_expr(2, 32, 8, 300, 128, 24, 64, 6, causal, "bf16", true), ""});
    v.push_back({paged_expr(2, 32, 8, 300, 128, 24, 64, 6, causal, "bf16", true),
                 "ATTN_MMA=mma_sync"});
  }
  v.push_back({paged_expr(2, 16, 8, 400, 128, 6, 256, 2, "top_left", "bf16", true), ""});
  v.push_back({paged_expr(2, 32, 8, 300, 128, 24, 64, 6, "true", "bf16", true), "ATTN_OVERLAP=0"});
  v.push_back({paged_expr(2, 16, 8, 400, 128, 6, 256, 2, "true", "bf16", true), "BLOCK_N=112"});
  v.push_back({paged_expr(2, 16, 4, 400, 128, 60, 16, 30, "true", "f16", true),
               "ATTN_WG=2,BLOCK_N=128"});
  v.push_back({paged_expr(3, 8, 1, 300, 64, 12, 128, 4, "true", "bf16", false), ""});
  // The producer's issuing warps (ATTN_LOAD_WARPS): 16- and 32-key pages take four by
  // default (a warp per page), the single thread by name, and 64-key pages' four boxes a
  // half block spread over three warps.
  v.push_back({paged_expr(2, 16, 4, 400, 128, 60, 16, 30, "false", "bf16", true), ""});
  v.push_back({paged_expr(2, 16, 4, 400, 128, 30, 32, 15, "true", "bf16", true), ""});
  v.push_back({paged_expr(2, 16, 4, 400, 128, 60, 16, 30, "true", "f16", true),
               "ATTN_WG=2,BLOCK_N=128,ATTN_LOAD_WARPS=1"});
  v.push_back({paged_expr(2, 32, 8, 300, 128, 24, 64, 6, "true", "bf16", true),
               "ATTN_PERSISTENT=0,ATTN_LOAD_WARPS=3"});
  // Under the persistent walk (each unit's key count handed over with it): 16-key pages
  // with four issuing warps on the static walk, 64-key pages causal on the dynamic walk,
  // 32-key pages causal on the static one, 256-key pages top-left on a small grid.
  v.push_back({paged_expr(2, 16, 4, 400, 128, 60, 16, 30, "false", "bf16", true), "ATTN_PERSISTENT=1"});
  v.push_back({paged_expr(2, 32, 8, 300, 128, 24, 64, 6, "true", "bf16", true), "ATTN_PERSISTENT=1"});
  v.push_back({paged_expr(2, 32, 8, 300, 128, 24, 64, 6, "true", "bf16", true),
               "ATTN_SCHEDULE=static,ATTN_LOAD_WARPS=3"});
  v.push_back({paged_expr(2, 16, 4, 400, 128, 30, 32, 15, "true", "f16", true),
               "ATTN_PERSISTENT=1,ATTN_SCHEDULE=static"});
  v.push_back({paged_expr(2, 16, 8, 400, 128, 6, 256, 2, "top_left", "bf16", true),
               "ATTN_PERSISTENT=1,ATTN_CTAS=7"});
  // O from the fragments (ATTN_STMATRIX=0; the copy-out is paged prefill's default).
  v.push_back({paged_expr(2, 32, 8, 300, 128, 24, 64, 6, "true", "bf16", true), "ATTN_STMATRIX=0"});
  v.push_back({paged_expr(2, 16, 8, 400, 128, 6, 256, 2, "false", "f16", true), "ATTN_STMATRIX=0"});
  return v;
}

}  // namespace loom::attention_test
