#include "bench/verify_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "ir/error.h"

namespace loom {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

AttentionShape shape_of(const Graph& g) {
  const Node* a = g.attention();
  if (!a) throw Error("verify_attention: the graph has no attention op");
  if (a->varlen_attention()) {  // O [Tq, Hq, D] as B = 1, Sq = Tq (row t·Hq + h: LSE's too)
    const Node& q = g.node(a->inputs[0]);
    const Node& k = g.node(a->inputs[1]);
    return AttentionShape{1, q.shape[1].value, k.shape[1].value, q.shape[0].value,
                          k.shape[0].value, q.shape[2].value};
  }
  const Node& q = g.node(a->inputs[0]);
  const Node& k = g.node(a->inputs[1]);
  AttentionShape s;
  s.B = q.shape[0].value;
  s.Hq = q.shape[1].value;
  s.Sq = q.shape[2].value;
  s.D = q.shape[3].value;
  s.Hkv = k.shape[1].value;
  s.Sk = k.shape[2].value;
  // Paged: the longest a sequence can be (the table's capacity) sizes the reference's work.
  if (a->paged_attention()) s.Sk = g.node(a->inputs[3]).shape[1].value * s.Sk;
  return s;
}

const HostTensor& input(const std::map<std::string, HostTensor>& in, const std::string& name) {
  auto it = in.find(name);
  if (it == in.end()) throw Error("verify_attention: no data for input " + name);
  return it->second;
}

// One query row (b, h, i): O in fp64, O of the 16-bit pipeline, LSE. The fp64 part is
// reference_attention's row, line for line (tests/cpu/bench/test_verify_attention.cpp
// compares the two); the pipeline rounds P = exp(s - m) to `dt` before it multiplies V
// (the row sum stays unrounded, as the kernels keep it in f32) and O to `dt`.
struct Row {
  std::vector<double> o64, o16;
  double lse = kNegInf;
};

Row attention_row(const AttentionShape& sh, const AttentionAttrs& attrs,
                  const std::vector<double>& q, const std::vector<double>& k,
                  const std::vector<double>& v, DType dt, int64_t b, int64_t h, int64_t i) {
  const int64_t D = sh.D, hk = h / (sh.Hq / sh.Hkv);
  const double* Q = &q[size_t(((b * sh.Hq + h) * sh.Sq + i) * D)];
  const double* K = &k[size_t(((b * sh.Hkv + hk) * sh.Sk) * D)];
  const double* V = &v[size_t(((b * sh.Hkv + hk) * sh.Sk) * D)];
  Row r;
  r.o64.assign(size_t(D), 0.0);
  r.o16.assign(size_t(D), 0.0);
  std::vector<double> s(size_t(sh.Sk));
  double m = kNegInf;
  for (int64_t j = 0; j < sh.Sk; ++j) {
    if (!attention_keeps(attrs.causal, i, j, sh.Sq, sh.Sk)) continue;
    double dot = 0.0;
    for (int64_t d = 0; d < D; ++d) dot += Q[d] * K[j * D + d];
    s[size_t(j)] = attrs.scale * dot;
    m = std::max(m, s[size_t(j)]);
  }
  if (std::isinf(m)) return r;  // no kept key: O = 0, LSE = -inf
  double l = 0.0;
  for (int64_t j = 0; j < sh.Sk; ++j) {
    if (!attention_keeps(attrs.causal, i, j, sh.Sq, sh.Sk)) continue;
    const double p = std::exp(s[size_t(j)] - m), p16 = round_to_dtype(dt, p);
    l += p;
    for (int64_t d = 0; d < D; ++d) {
      r.o64[size_t(d)] += p * V[j * D + d];
      r.o16[size_t(d)] += p16 * V[j * D + d];
    }
  }
  for (int64_t d = 0; d < D; ++d) {
    r.o64[size_t(d)] /= l;
    r.o16[size_t(d)] = round_to_dtype(dt, r.o16[size_t(d)] / l);
  }
  r.lse = m + std::log(l);
  return r;
}

// The rows verified: all of them up to kFullCheckMacs of reference work; beyond, the
// first, middle and last 64 rows of three heads (first, middle, last (batch, head)):
// the causal diagonal's both ends, ragged query blocks and GQA groups all show up there,
// and the host reference stays within seconds at 16k keys.
struct RowId {
  int64_t b, h, i;
};
std::vector<RowId> rows_to_check(const AttentionShape& sh, double full_check_macs) {
  std::vector<RowId> rows;
  const double macs = double(sh.B * sh.Hq) * double(sh.Sq) * double(sh.Sk) * double(sh.D);
  if (macs <= full_check_macs) {
    for (int64_t b = 0; b < sh.B; ++b)
      for (int64_t h = 0; h < sh.Hq; ++h)
        for (int64_t i = 0; i < sh.Sq; ++i) rows.push_back({b, h, i});
    return rows;
  }
  const int64_t heads = sh.B * sh.Hq;
  std::vector<int64_t> picked = {0, heads / 2, heads - 1};
  for (size_t n = 0; n < picked.size(); ++n) {
    if (n > 0 && picked[n] == picked[n - 1]) continue;
    const int64_t b = picked[n] / sh.Hq, h = picked[n] % sh.Hq;
    std::vector<bool> take(size_t(sh.Sq), false);
    for (int64_t start : {int64_t(0), sh.Sq / 2 - 32, sh.Sq - 64})
      for (int64_t i = std::max<int64_t>(0, start); i < std::min(sh.Sq, start + 64); ++i)
        take[size_t(i)] = true;
    for (int64_t i = 0; i < sh.Sq; ++i)
      if (take[size_t(i)]) rows.push_back({b, h, i});
  }
  return rows;
}

// -inf where the reference has -inf (and only there), then the finite entries as usual.
VerifyResult verify_lse(const HostTensor& got, const std::vector<double>& want) {
  HostTensor g = got, w = got;
  w.dtype = DType::F64;
  w.data = want;
  int64_t mismatched = -1;
  for (size_t i = 0; i < want.size() && i < g.data.size(); ++i) {
    const bool wi = std::isinf(want[i]), gi = std::isinf(g.data[i]) && g.data[i] < 0;
    if (wi != gi && mismatched < 0) mismatched = int64_t(i);
    if (wi && gi) g.data[i] = w.data[i] = 0.0;
  }
  VerifyResult r = verify_output(g, w, verify_threshold(DType::F32, DType::F32));
  if (mismatched >= 0) {
    r.passed = false;
    r.worst_index = mismatched;
    r.message = "FAIL lse[" + std::to_string(mismatched) + "] = " +
                std::to_string(got.data[size_t(mismatched)]) + " where the reference has " +
                std::to_string(want[size_t(mismatched)]) + " (a row that keeps no key is -inf, "
                "and only such a row)";
  }
  return r;
}

HostTensor tensor(DType dt, std::vector<int64_t> shape, std::vector<double> data) {
  HostTensor t;
  t.dtype = dt;
  t.shape = std::move(shape);
  t.data = std::move(data);
  return t;
}

}  // namespace

std::vector<double> reference_attention_16bit(const AttentionShape& sh,
                                              const AttentionAttrs& attrs,
                                              const std::vector<double>& q,
                                              const std::vector<double>& k,
                                              const std::vector<double>& v, DType dt) {
  std::vector<double> out;
  out.reserve(size_t(sh.B * sh.Hq * sh.Sq * sh.D));
  for (const RowId& r : rows_to_check(sh, std::numeric_limits<double>::infinity())) {
    const Row row = attention_row(sh, attrs, q, k, v, dt, r.b, r.h, r.i);
    out.insert(out.end(), row.o16.begin(), row.o16.end());
  }
  return out;
}

double attention_threshold(double pipeline_error) {
  return std::max(2.0 * pipeline_error, std::ldexp(1.0, -20));
}

AttentionReference attention_reference(const Graph& g,
                                       const std::map<std::string, HostTensor>& inputs,
                                       double full_check_macs) {
  const Node* a = g.attention();
  AttentionReference ref;
  ref.shape = shape_of(g);
  const AttentionShape& sh = ref.shape;
  ref.has_lse = a->attention.lse;
  const HostTensor& q = input(inputs, g.node(a->inputs[0]).name);
  const HostTensor& k = input(inputs, g.node(a->inputs[1]).name);
  const HostTensor& v = input(inputs, g.node(a->inputs[2]).name);
  if (a->varlen_attention()) {
    // Each sequence gathered into the dense form; its rows (token q0 + i, head h) are O's
    // row (q0 + i)·Hq + h. All rows up to full_check_macs of work, else per sequence the
    // first and last 32 rows of three heads.
    const HostTensor& cq = input(inputs, g.node(a->inputs[3]).name);
    const HostTensor& ck = input(inputs, g.node(a->inputs[4]).name);
    const int64_t nseq = int64_t(cq.data.size()) - 1, Hq = sh.Hq, Hkv = sh.Hkv, D = sh.D;
    const int64_t Tq = sh.Sq, Tk = sh.Sk;
    double macs = 0;
    for (int64_t b = 0; b < nseq; ++b)
      macs += double(cq.data[size_t(b + 1)] - cq.data[size_t(b)]) *
              double(ck.data[size_t(b + 1)] - ck.data[size_t(b)]) * double(Hq * D);
    for (int64_t b = 0; b < nseq; ++b) {
      const int64_t q0 = int64_t(cq.data[size_t(b)]), k0 = int64_t(ck.data[size_t(b)]);
      const int64_t sq = std::clamp<int64_t>(int64_t(cq.data[size_t(b + 1)]) - q0, 0,
                                             a->attention.max_seqlen_q);
      const int64_t sk = std::max<int64_t>(int64_t(ck.data[size_t(b + 1)]) - k0, 0);
      if (q0 < 0 || q0 + sq > Tq || k0 < 0 || k0 + sk > Tk)
        throw Error("verify_attention: sequence " + std::to_string(b) + "'s rows leave Q or K");
      AttentionShape one{1, Hq, Hkv, sq, sk, D};
      std::vector<double> qs(size_t(Hq * sq * D)), ks(size_t(Hkv * sk * D)), vs(ks.size());
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t i = 0; i < sq; ++i)
          std::copy_n(q.data.begin() + std::ptrdiff_t(((q0 + i) * Hq + h) * D), D,
                      qs.begin() + std::ptrdiff_t((h * sq + i) * D));
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t j = 0; j < sk; ++j) {
          std::copy_n(k.data.begin() + std::ptrdiff_t(((k0 + j) * Hkv + h) * D), D,
                      ks.begin() + std::ptrdiff_t((h * sk + j) * D));
          std::copy_n(v.data.begin() + std::ptrdiff_t(((k0 + j) * Hkv + h) * D), D,
                      vs.begin() + std::ptrdiff_t((h * sk + j) * D));
        }
      const bool all = macs <= full_check_macs;
      for (int64_t h = 0; h < Hq; ++h) {
        if (!all && h != 0 && h != Hq / 2 && h != Hq - 1) continue;
        for (int64_t i = 0; i < sq; ++i) {
          if (!all && i >= 32 && i < sq - 32) continue;
          const Row row = attention_row(one, a->attention, qs, ks, vs, q.dtype, 0, h, i);
          ref.rows.push_back((q0 + i) * Hq + h);
          ref.o64.insert(ref.o64.end(), row.o64.begin(), row.o64.end());
          ref.o16.insert(ref.o16.end(), row.o16.begin(), row.o16.end());
          ref.lse.push_back(row.lse);
        }
      }
    }
    return ref;
  }
  // Paged KV: sequence b's keys gathered through the table into dense [1, Hkv, L[b], D]
  // (once per sequence), its rows computed with Sk = L[b] (reference_attention_paged's rule).
  const bool paged = a->paged_attention();
  int64_t gathered = -1;
  AttentionShape one = sh;
  std::vector<double> qb, kb, vb;
  auto gather = [&](int64_t b) {
    if (gathered == b) return;
    gathered = b;
    const HostTensor& bt = input(inputs, g.node(a->inputs[3]).name);
    const HostTensor& len = input(inputs, g.node(a->inputs[4]).name);
    const int64_t page = k.shape[2], pages = k.shape[0], maxp = bt.shape[1], D = sh.D;
    one.B = 1;
    one.Sk = std::clamp<int64_t>(int64_t(len.data[size_t(b)]), 0, maxp * page);
    kb.assign(size_t(sh.Hkv * one.Sk * D), 0.0);
    vb.assign(kb.size(), 0.0);
    for (int64_t hk = 0; hk < sh.Hkv; ++hk)
      for (int64_t j = 0; j < one.Sk; ++j) {
        const int64_t pg = int64_t(bt.data[size_t(b * maxp + j / page)]);
        if (pg < 0 || pg >= pages)
          throw Error("verify_attention: block_table[" + std::to_string(b) + "][" +
                      std::to_string(j / page) + "] = " + std::to_string(pg) +
                      " is not a page of the pool (0.." + std::to_string(pages - 1) + ")");
        const size_t from = size_t(((pg * sh.Hkv + hk) * page + j % page) * D);
        std::copy_n(k.data.begin() + std::ptrdiff_t(from), D,
                    kb.begin() + std::ptrdiff_t((hk * one.Sk + j) * D));
        std::copy_n(v.data.begin() + std::ptrdiff_t(from), D,
                    vb.begin() + std::ptrdiff_t((hk * one.Sk + j) * D));
      }
    const size_t per = size_t(sh.Hq * sh.Sq * D);
    qb.assign(q.data.begin() + std::ptrdiff_t(size_t(b) * per),
              q.data.begin() + std::ptrdiff_t(size_t(b + 1) * per));
  };
  for (const RowId& r : rows_to_check(sh, full_check_macs)) {
    if (paged) gather(r.b);
    const Row row = paged ? attention_row(one, a->attention, qb, kb, vb, q.dtype, 0, r.h, r.i)
                          : attention_row(sh, a->attention, q.data, k.data, v.data, q.dtype,
                                          r.b, r.h, r.i);
    ref.rows.push_back((r.b * sh.Hq + r.h) * sh.Sq + r.i);
    ref.o64.insert(ref.o64.end(), row.o64.begin(), row.o64.end());
    ref.o16.insert(ref.o16.end(), row.o16.begin(), row.o16.end());
    ref.lse.push_back(row.lse);
  }
  return ref;
}

AttentionVerify verify_attention(const AttentionReference& ref, const HostTensor& out,
                                 const HostTensor* lse) {
  const AttentionShape& sh = ref.shape;
  if (out.data.size() != size_t(sh.B * sh.Hq * sh.Sq * sh.D) ||
      (lse && lse->data.size() != size_t(sh.B * sh.Hq * sh.Sq)))
    throw Error("verify_attention: the outputs do not have the attention's shape");
  // The checked rows gathered side by side: got, fp64, the 16-bit pipeline; LSE likewise.
  std::vector<double> got, lse_got;
  for (int64_t at : ref.rows) {
    got.insert(got.end(), out.data.begin() + ptrdiff_t(size_t(at) * size_t(sh.D)),
               out.data.begin() + ptrdiff_t(size_t(at + 1) * size_t(sh.D)));
    if (lse) lse_got.push_back(lse->data[size_t(at)]);
  }
  const int64_t n = int64_t(ref.rows.size());
  const HostTensor got_t = tensor(out.dtype, {n, sh.D}, std::move(got));
  const HostTensor ref_t = tensor(DType::F64, {n, sh.D}, ref.o64);
  const HostTensor lowp_t = tensor(DType::F64, {n, sh.D}, ref.o16);
  AttentionVerify r;
  r.rows_checked = n;
  r.rows_total = sh.B * sh.Hq * sh.Sq;
  const VerifyResult pipeline = verify_output(lowp_t, ref_t, 1.0);
  r.pipeline_error = pipeline.rel_fro_error;
  r.pipeline_max_error = pipeline.max_abs_error;
  r.out = verify_output(got_t, ref_t, attention_threshold(r.pipeline_error));
  const double max_allowed = attention_threshold(r.pipeline_max_error);
  if (r.out.passed && r.out.max_abs_error > max_allowed) {
    r.out.passed = false;
    r.out.message = "FAIL max |O - ref| = " + std::to_string(r.out.max_abs_error) +
                    " exceeds 2 x the 16-bit pipeline's " + std::to_string(r.pipeline_max_error);
  }
  if (lse) r.lse = verify_lse(tensor(DType::F32, {n}, std::move(lse_got)), ref.lse);
  return r;
}

AttentionVerify verify_attention(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                                 const HostTensor& out, const HostTensor* lse,
                                 double full_check_macs) {
  return verify_attention(attention_reference(g, inputs, full_check_macs), out, lse);
}

std::string AttentionVerify::message() const {
  std::string m = "O: " + out.message + " (thresholds: 2 x the 16-bit pipeline's errors, " +
                  std::to_string(pipeline_error) + " relative, " +
                  std::to_string(pipeline_max_error) + " max)";
  if (rows_checked < rows_total)
    m += " [rows sampled: " + std::to_string(rows_checked) + " of " + std::to_string(rows_total) +
         "]";
  if (lse) m += "; LSE: " + lse->message;
  return m;
}

void fill_serving_inputs(const Graph& g, Bindings& b, uint64_t seed) {
  const Node* a = g.attention();
  if (a && a->varlen_attention()) {
    // Sequence lengths drawn from 1..max_seqlen_q (the first one max_seqlen_q) while the
    // tokens last, keys in proportion (Tk / Tq, at least as many as queries when Tk allows).
    HostTensor& cq = b.tensors.at(g.node(a->inputs[3]).name);
    HostTensor& ck = b.tensors.at(g.node(a->inputs[4]).name);
    const int64_t tq = g.node(a->inputs[0]).shape[0].value, tk = g.node(a->inputs[1]).shape[0].value;
    const int64_t maxq = a->attention.max_seqlen_q, nseq = int64_t(cq.data.size()) - 1;
    std::mt19937_64 rng(seed);
    int64_t q = 0, k = 0;
    cq.data[0] = ck.data[0] = 0;
    for (int64_t s = 0; s < nseq; ++s) {
      const int64_t want = s == 0 ? maxq : 1 + int64_t(rng() % uint64_t(maxq));
      const int64_t lq = std::min(want, tq - q);
      const int64_t lk = std::min<int64_t>(std::max<int64_t>(1, lq * tk / std::max<int64_t>(1, tq)), tk - k);
      q += lq;
      k += lk;
      cq.data[size_t(s + 1)] = double(q);
      ck.data[size_t(s + 1)] = double(k);
    }
    // Rows of K and V past the last sequence's keys are no sequence's: NaN, so a kernel
    // that lets one reach O (a masked key's V times P = 0) fails verification.
    for (size_t in : {size_t(1), size_t(2)}) {
      HostTensor& x = b.tensors.at(g.node(a->inputs[in]).name);
      const size_t row = x.data.size() / size_t(std::max<int64_t>(1, tk));
      std::fill(x.data.begin() + std::ptrdiff_t(size_t(k) * row), x.data.end(),
                std::numeric_limits<double>::quiet_NaN());
    }
    return;
  }
  if (!a || !a->paged_attention()) return;
  const std::string kc = g.node(a->inputs[1]).name, vc = g.node(a->inputs[2]).name;
  HostTensor& bt = b.tensors.at(g.node(a->inputs[3]).name);
  HostTensor& len = b.tensors.at(g.node(a->inputs[4]).name);
  const HostTensor& pool = b.tensors.at(kc);
  const int64_t pages = pool.shape[0], page = pool.shape[2], maxp = bt.shape[1],
                batch = bt.shape[0];
  std::mt19937_64 rng(seed);
  std::vector<int64_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<bool> used(size_t(pages), false);
  std::vector<int> uses(size_t(pages), 0);
  for (int64_t s = 0; s < batch; ++s) {
    const int64_t n = std::max<int64_t>(0, maxp * page - (s * 37) % page);
    len.data[size_t(s)] = double(n);
    for (int64_t slot = 0; slot < maxp; ++slot) {
      const int64_t pg = order[size_t((s * maxp + slot) % pages)];
      const bool live = slot * page < n;
      bt.data[size_t(s * maxp + slot)] = live ? double(pg) : -1.0;
      if (live) {
        used[size_t(pg)] = true;
        ++uses[size_t(pg)];
      }
    }
  }
  const size_t per_page = pool.data.size() / size_t(pages);
  for (const std::string& t : {kc, vc})
    for (int64_t pg = 0; pg < pages; ++pg)
      if (!used[size_t(pg)])
        std::fill_n(b.tensors.at(t).data.begin() + std::ptrdiff_t(size_t(pg) * per_page),
                    per_page, std::numeric_limits<double>::quiet_NaN());
  // So are the rows of each sequence's last page past its length (a cache's unwritten
  // rows): read by a kernel that loads the whole block, they must stay out of O. Not where
  // the page is reused (a small pool): another sequence may keep those rows.
  const int64_t hkv = pool.shape[1], d = pool.shape[3];
  for (int64_t s = 0; s < batch; ++s) {
    const int64_t n = int64_t(len.data[size_t(s)]);
    if (n <= 0 || n % page == 0) continue;
    const int64_t pg = int64_t(bt.data[size_t(s * maxp + n / page)]);
    if (uses[size_t(pg)] != 1) continue;
    for (const std::string& t : {kc, vc})
      for (int64_t hk = 0; hk < hkv; ++hk)
        std::fill_n(b.tensors.at(t).data.begin() +
                        std::ptrdiff_t(((pg * hkv + hk) * page + n % page) * d),
                    size_t((page - n % page) * d), std::numeric_limits<double>::quiet_NaN());
  }
}

}  // namespace loom
