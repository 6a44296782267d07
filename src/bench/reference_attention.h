// The attention reference: softmax(scale · Q Kᵀ, masked) V and the row log-sum-exp, in
// double on the host, one query row at a time (max-subtracted, so no exp overflows).
// It is the yardstick for Loom's loop forms on the CPU interpreter and for the GPU
// kernel; docs/attention.md states the semantics it implements.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace loom {

struct AttentionShape {
  int64_t B = 1, Hq = 1, Hkv = 1, Sq = 1, Sk = 1, D = 1;
};

struct AttentionResult {
  std::vector<double> out;  // [B, Hq, Sq, D]
  std::vector<double> lse;  // [B, Hq, Sq]: log Σ_j exp(s_ij) over kept keys; -inf if none
};

// Whether query row i keeps key j under `causal` (graph.h: bottom-right is FlashAttention's
// alignment, top-left PyTorch's is_causal).
bool attention_keeps(Causal causal, int64_t i, int64_t j, int64_t Sq, int64_t Sk);

// q [B,Hq,Sq,D], k and v [B,Hkv,Sk,D], row-major. Query head h reads key/value head
// h / (Hq / Hkv). A row that keeps no key gets O = 0 and LSE = -inf (as FlashAttention
// writes them). Throws loom::Error when the sizes do not fit the shape.
AttentionResult reference_attention(const AttentionShape& shape, const AttentionAttrs& attrs,
                                    const std::vector<double>& q, const std::vector<double>& k,
                                    const std::vector<double>& v);

// Paged KV (docs/attention.md, "Paged KV"): kc and vc are page pools [P, Hkv, page, D],
// block_table [B, maxp] and seqlens [B]; sequence b's keys are its first L[b] (clamped to
// 0..maxp·page), key j being row j % page of page block_table[b][j / page]. shape.Sk is
// ignored. Each sequence is gathered into dense K and V and computed by
// reference_attention with Sk = L[b] (so every mask is aligned to the sequence's own
// length). Only the pages a sequence uses are read: the rest may hold anything (NaN).
// Throws loom::Error on a page number outside the pool.
AttentionResult reference_attention_paged(const AttentionShape& shape, const AttentionAttrs& attrs,
                                          int64_t pages, int64_t page,
                                          const std::vector<double>& q,
                                          const std::vector<double>& kc,
                                          const std::vector<double>& vc,
                                          const std::vector<int64_t>& block_table,
                                          const std::vector<int64_t>& seqlens);

// Varlen (docs/attention.md, "Serving forms: varlen"): q [Tq, Hq, D], k and v [Tk, Hkv, D]
// packed, cu_q and cu_k [B+1] cumulative lengths (shape.B = B; shape.Sq, shape.Sk
// ignored). Sequence b's queries are rows cu_q[b] .. cu_q[b+1] - 1 (at most max_seqlen_q
// of them), its keys rows cu_k[b] .. cu_k[b+1] - 1; each is computed by
// reference_attention with its own Sq and Sk. Returns O [Tq, Hq, D] and LSE [Tq, Hq];
// rows no sequence covers are NaN (Loom does not write them). Throws loom::Error when the
// lengths leave the tensors.
AttentionResult reference_attention_varlen(const AttentionShape& shape, const AttentionAttrs& attrs,
                                           int64_t max_seqlen_q, const std::vector<double>& q,
                                           const std::vector<double>& k,
                                           const std::vector<double>& v,
                                           const std::vector<int64_t>& cu_q,
                                           const std::vector<int64_t>& cu_k);

}  // namespace loom
