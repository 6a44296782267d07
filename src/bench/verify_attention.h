// Verification of an attention result (O and, when the op has it, LSE) against the fp64
// reference, with the threshold the issue asks for: twice the error that a 16-bit
// attention pipeline makes on the same inputs (docs/verification.md, "Attention").
//
// The 16-bit pipeline (`reference_attention_16bit`) is what FlashAttention and PyTorch's
// bf16/f16 SDPA compute: S and the softmax statistics in f32-or-better, the probabilities
// P rounded to the input dtype before P·V (the tensor cores multiply 16-bit operands), O
// rounded to the input dtype when stored. Its relative Frobenius error against the fp64
// reference, times 2, is O's threshold, and so is its largest elementwise error for O's
// (the "max error") — per problem, so it tightens where rounding is
// small (one key: P = 1 exactly) and loosens where a long row sums many rounded terms.
// LSE is f32 from f32 statistics: it is judged by the f32 threshold, and its -inf entries
// (rows that keep no key) must be -inf exactly.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "bench/reference_attention.h"
#include "bench/verify.h"
#include "ir/graph.h"
#include "ir/interpreter.h"

namespace loom {

struct AttentionVerify {
  VerifyResult out;
  std::optional<VerifyResult> lse;
  double pipeline_error = 0;      // the 16-bit pipeline's relative Frobenius error on O
  double pipeline_max_error = 0;  // and its largest |O - ref|
  int64_t rows_checked = 0, rows_total = 0;  // query rows compared (all, or a sample)
  bool passed() const { return out.passed && (!lse || lse->passed); }
  std::string message() const;  // "O: PASS ...; LSE: PASS ..."
};

// `g` is an attention graph with its sizes bound; `inputs` its Q, K, V by name (storage
// values); `out` the kernel's O and `lse` its LSE when the op has one.
// Up to `full_check_macs` of reference work (B·Hq·Sq·Sk·D multiply-adds) every query row
// is checked; above, the first, middle and last 64 rows of three (batch, head) pairs (the
// host reference in fp64 takes seconds per 1e9 multiply-adds).
constexpr double kAttentionFullCheckMacs = 1e9;
AttentionVerify verify_attention(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                                 const HostTensor& out, const HostTensor* lse,
                                 double full_check_macs = kAttentionFullCheckMacs);

// The reference half of verify_attention, computed once: which rows are checked and
// their fp64 O and LSE and the 16-bit pipeline's O. verify_attention(g, inputs, ...) is
// verify_attention(attention_reference(g, inputs), ...); the tuner's trials keep one
// reference per problem and check every candidate against it (the same check, without
// recomputing seconds of host reference per candidate).
struct AttentionReference {
  AttentionShape shape;
  bool has_lse = false;
  std::vector<int64_t> rows;     // (b * Hq + h) * Sq + i of each checked row, in order
  std::vector<double> o64, o16;  // D per row: fp64 O, the 16-bit pipeline's O
  std::vector<double> lse;       // one per row
};
// The serving forms' index inputs (docs/attention.md, "Serving forms"), seeded, in `b`
// (random inputs already made). Paged KV: sequence s has maxp·page - (37 s mod page) keys,
// its pages drawn in shuffled order (distinct while the pool has them, then reused), dead
// table slots -1, and every page no sequence uses NaN in Kc and Vc, so a wrong page read
// shows; so are the rows of a sequence's last page past its length (unless the page is
// reused), so a masked key's V reaching O shows. Varlen: cumulative lengths, the first
// sequence max_seqlen_q queries, the others 1..max_seqlen_q while Tq lasts, keys in
// proportion, K and V rows past the last sequence's keys NaN. No-op for dense attention.
void fill_serving_inputs(const Graph& g, Bindings& b, uint64_t seed);

AttentionReference attention_reference(const Graph& g,
                                       const std::map<std::string, HostTensor>& inputs,
                                       double full_check_macs = kAttentionFullCheckMacs);
AttentionVerify verify_attention(const AttentionReference& ref, const HostTensor& out,
                                 const HostTensor* lse);

// The 16-bit pipeline's O: P = exp(s - m) rounded to `dt` before it multiplies V, O
// rounded to `dt`; everything else in double. Same arguments as reference_attention.
std::vector<double> reference_attention_16bit(const AttentionShape& shape,
                                              const AttentionAttrs& attrs,
                                              const std::vector<double>& q,
                                              const std::vector<double>& k,
                                              const std::vector<double>& v, DType dt);

// A threshold as above: 2 x the pipeline's error, floored at 2⁻²⁰ (f32 accumulation
// noise, where the 16-bit pipeline happens to be exact).
double attention_threshold(double pipeline_error);

}  // namespace loom
