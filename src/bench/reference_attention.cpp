#include "bench/reference_attention.h"

#include <cmath>
#include <limits>

#include "ir/error.h"

namespace loom {

bool attention_keeps(Causal causal, int64_t i, int64_t j, int64_t Sq, int64_t Sk) {
  switch (causal) {
    case Causal::None: return true;
    case Causal::BottomRight: return j <= i + Sk - Sq;
    case Causal::TopLeft: return j <= i;
  }
  return true;
}

AttentionResult reference_attention(const AttentionShape& sh, const AttentionAttrs& attrs,
                                    const std::vector<double>& q, const std::vector<double>& k,
                                    const std::vector<double>& v) {
  if (sh.Hkv <= 0 || sh.Hq % sh.Hkv != 0)
    throw Error("reference_attention: Hq=" + std::to_string(sh.Hq) + " is not a multiple of Hkv=" +
                std::to_string(sh.Hkv));
  const size_t nq = size_t(sh.B * sh.Hq * sh.Sq * sh.D), nkv = size_t(sh.B * sh.Hkv * sh.Sk * sh.D);
  if (q.size() != nq || k.size() != nkv || v.size() != nkv)
    throw Error("reference_attention: got " + std::to_string(q.size()) + ", " +
                std::to_string(k.size()) + ", " + std::to_string(v.size()) +
                " values for Q, K, V; the shape needs " + std::to_string(nq) + ", " +
                std::to_string(nkv) + ", " + std::to_string(nkv));
  const int64_t group = sh.Hq / sh.Hkv, D = sh.D;
  AttentionResult r;
  r.out.assign(nq, 0.0);
  r.lse.assign(size_t(sh.B * sh.Hq * sh.Sq), -std::numeric_limits<double>::infinity());
  std::vector<double> s(size_t(sh.Sk));
  for (int64_t b = 0; b < sh.B; ++b)
    for (int64_t h = 0; h < sh.Hq; ++h) {
      const int64_t hk = h / group;
      const double* K = &k[size_t(((b * sh.Hkv + hk) * sh.Sk) * D)];
      const double* V = &v[size_t(((b * sh.Hkv + hk) * sh.Sk) * D)];
      for (int64_t i = 0; i < sh.Sq; ++i) {
        const size_t row = size_t((b * sh.Hq + h) * sh.Sq + i);
        const double* Q = &q[row * size_t(D)];
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < sh.Sk; ++j) {
          if (!attention_keeps(attrs.causal, i, j, sh.Sq, sh.Sk)) continue;
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += Q[d] * K[j * D + d];
          s[size_t(j)] = attrs.scale * dot;
          // NaN propagates (std::max(-inf, NaN) is -inf, which would make a row of NaN
          // scores look like a row with no key and give it O = 0 where PyTorch gives NaN).
          if (!std::isnan(m) && (std::isnan(s[size_t(j)]) || s[size_t(j)] > m)) m = s[size_t(j)];
        }
        // No kept key: O stays 0, LSE -inf. (+inf is a score, and exp(inf - inf) makes the
        // row NaN, as IEEE and PyTorch have it.)
        if (m == -std::numeric_limits<double>::infinity()) continue;
        double l = 0.0;
        double* O = &r.out[row * size_t(D)];
        for (int64_t j = 0; j < sh.Sk; ++j) {
          if (!attention_keeps(attrs.causal, i, j, sh.Sq, sh.Sk)) continue;
          const double p = std::exp(s[size_t(j)] - m);
          l += p;
          for (int64_t d = 0; d < D; ++d) O[d] += p * V[j * D + d];
        }
        for (int64_t d = 0; d < D; ++d) O[d] /= l;
        r.lse[row] = m + std::log(l);
      }
    }
  return r;
}

}  // namespace loom
