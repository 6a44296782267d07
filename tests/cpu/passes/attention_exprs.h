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

}  // namespace loom::attention_test
