// Attention expressions for the pass tests (t:012/k:012, k:013, l:005): Q[batch,hq,sq,d],
// K and V [batch,hkv,sk,d], the causal mode, optional LSE; and the three causal modes.
#pragma once

#include <string>

namespace loom::attention_test {

inline std::string attention(int hq, int hkv, int sq, int sk, int d, const std::string& causal,
                             const char* dtype = "bf16", bool lse = true, int batch = 1) {
  auto t = [&](const char* n, int h, int s) {
    return std::string(n) + "[" + std::to_string(batch) + "," + std::to_string(h) + "," +
           std::to_string(s) + "," + std::to_string(d) + "]:" + dtype;
  };
  return "attention(" + t("Q", hq, sq) + ", " + t("K", hkv, sk) + ", " + t("V", hkv, sk) +
         ", causal=" + causal + (lse ? ", lse=true" : "") + ")";
}

inline const char* const kMasks[] = {"false", "true", "top_left"};

// Paged KV: Q[batch,hq,sq,d], page pools Kc and Vc [pages,hkv,page,d], BT[batch,maxp]:i32,
// L[batch]:i32.
inline std::string paged_attention(int batch, int hq, int hkv, int sq, int d, int pages,
                                   int page, int maxp, const std::string& causal,
                                   const char* dtype = "bf16", bool lse = true) {
  auto n = [](int x) { return std::to_string(x); };
  const std::string pool = "[" + n(pages) + "," + n(hkv) + "," + n(page) + "," + n(d) + "]:" + dtype;
  return "attention(Q[" + n(batch) + "," + n(hq) + "," + n(sq) + "," + n(d) + "]:" + dtype +
         ", Kc" + pool + ", Vc" + pool + ", block_table=BT[" + n(batch) + "," + n(maxp) +
         "]:i32, seqlens_k=L[" + n(batch) + "]:i32, causal=" + causal +
         (lse ? ", lse=true" : "") + ")";
}

}  // namespace loom::attention_test
