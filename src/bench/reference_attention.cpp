#include "bench/reference_attention.h"

#include <algorithm>
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

AttentionResult reference_attention_paged(const AttentionShape& sh, const AttentionAttrs& attrs,
                                          int64_t pages, int64_t page,
                                          const std::vector<double>& q,
                                          const std::vector<double>& kc,
                                          const std::vector<double>& vc,
                                          const std::vector<int64_t>& block_table,
                                          const std::vector<int64_t>& seqlens) {
  const int64_t D = sh.D, per_head = page * D;
  const size_t pool = size_t(pages * sh.Hkv * per_head);
  if (kc.size() != pool || vc.size() != pool || seqlens.size() != size_t(sh.B) || sh.B <= 0 ||
      block_table.size() % size_t(sh.B) != 0 || q.size() != size_t(sh.B * sh.Hq * sh.Sq * D))
    throw Error("reference_attention_paged: the sizes of Q, Kc, Vc, the block table and the "
                "lengths do not fit B=" + std::to_string(sh.B) + ", P=" + std::to_string(pages) +
                ", page=" + std::to_string(page));
  const int64_t maxp = int64_t(block_table.size()) / sh.B;
  const size_t rows = size_t(sh.Hq * sh.Sq);
  AttentionResult r;
  r.out.reserve(q.size());
  r.lse.reserve(size_t(sh.B) * rows);
  for (int64_t b = 0; b < sh.B; ++b) {
    const int64_t len = std::clamp<int64_t>(seqlens[size_t(b)], 0, maxp * page);
    AttentionShape one = sh;
    one.B = 1;
    one.Sk = len;
    std::vector<double> k(size_t(sh.Hkv * len * D)), v(k.size());
    for (int64_t hk = 0; hk < sh.Hkv; ++hk)
      for (int64_t j = 0; j < len; ++j) {
        const int64_t pg = block_table[size_t(b * maxp + j / page)];
        if (pg < 0 || pg >= pages)
          throw Error("reference_attention_paged: block_table[" + std::to_string(b) + "][" +
                      std::to_string(j / page) + "] = " + std::to_string(pg) +
                      " is not a page of the pool (0.." + std::to_string(pages - 1) + ")");
        const size_t from = size_t((pg * sh.Hkv + hk) * per_head + (j % page) * D);
        const size_t to = size_t((hk * len + j) * D);
        std::copy_n(kc.begin() + std::ptrdiff_t(from), D, k.begin() + std::ptrdiff_t(to));
        std::copy_n(vc.begin() + std::ptrdiff_t(from), D, v.begin() + std::ptrdiff_t(to));
      }
    const std::vector<double> qb(q.begin() + std::ptrdiff_t(size_t(b) * rows * size_t(D)),
                                 q.begin() + std::ptrdiff_t(size_t(b + 1) * rows * size_t(D)));
    AttentionResult rb = reference_attention(one, attrs, qb, k, v);
    r.out.insert(r.out.end(), rb.out.begin(), rb.out.end());
    r.lse.insert(r.lse.end(), rb.lse.begin(), rb.lse.end());
  }
  return r;
}

AttentionResult reference_attention_varlen(const AttentionShape& sh, const AttentionAttrs& attrs,
                                           int64_t max_seqlen_q, const std::vector<double>& q,
                                           const std::vector<double>& k,
                                           const std::vector<double>& v,
                                           const std::vector<int64_t>& cu_q,
                                           const std::vector<int64_t>& cu_k) {
  const int64_t D = sh.D, Hq = sh.Hq, Hkv = sh.Hkv;
  const int64_t Tq = int64_t(q.size()) / (Hq * D), Tk = int64_t(k.size()) / (Hkv * D);
  if (cu_q.size() != size_t(sh.B + 1) || cu_k.size() != cu_q.size() ||
      q.size() != size_t(Tq * Hq * D) || k.size() != v.size() || k.size() != size_t(Tk * Hkv * D))
    throw Error("reference_attention_varlen: the sizes of Q, K, V and the cumulative lengths "
                "do not fit B=" + std::to_string(sh.B));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  AttentionResult r;
  r.out.assign(q.size(), nan);
  r.lse.assign(size_t(Tq * Hq), nan);
  for (int64_t b = 0; b < sh.B; ++b) {
    const int64_t q0 = cu_q[size_t(b)], k0 = cu_k[size_t(b)];
    const int64_t sq = std::clamp<int64_t>(cu_q[size_t(b + 1)] - q0, 0, max_seqlen_q);
    const int64_t sk = std::max<int64_t>(cu_k[size_t(b + 1)] - k0, 0);
    if (q0 < 0 || q0 + sq > Tq || k0 < 0 || k0 + sk > Tk)
      throw Error("reference_attention_varlen: sequence " + std::to_string(b) +
                  "'s rows leave Q (" + std::to_string(Tq) + " tokens) or K (" +
                  std::to_string(Tk) + ")");
    AttentionShape one{1, Hq, Hkv, sq, sk, D};
    std::vector<double> qb(size_t(Hq * sq * D)), kb(size_t(Hkv * sk * D)), vb(kb.size());
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t d = 0; d < D; ++d)
          qb[size_t((h * sq + i) * D + d)] = q[size_t(((q0 + i) * Hq + h) * D + d)];
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t j = 0; j < sk; ++j)
        for (int64_t d = 0; d < D; ++d) {
          kb[size_t((h * sk + j) * D + d)] = k[size_t(((k0 + j) * Hkv + h) * D + d)];
          vb[size_t((h * sk + j) * D + d)] = v[size_t(((k0 + j) * Hkv + h) * D + d)];
        }
    const AttentionResult rb = reference_attention(one, attrs, qb, kb, vb);
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        r.lse[size_t((q0 + i) * Hq + h)] = rb.lse[size_t(h * sq + i)];
        for (int64_t d = 0; d < D; ++d)
          r.out[size_t(((q0 + i) * Hq + h) * D + d)] = rb.out[size_t((h * sq + i) * D + d)];
      }
  }
  return r;
}

}  // namespace loom
