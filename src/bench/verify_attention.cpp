#include "bench/verify_attention.h"

#include <cmath>
#include <limits>

#include "bench/reference_attention.h"
#include "ir/error.h"

namespace loom {
namespace {

AttentionShape shape_of(const Graph& g) {
  const Node* a = g.attention();
  if (!a) throw Error("verify_attention: the graph has no attention op");
  const Node& q = g.node(a->inputs[0]);
  const Node& k = g.node(a->inputs[1]);
  AttentionShape s;
  s.B = q.shape[0].value;
  s.Hq = q.shape[1].value;
  s.Sq = q.shape[2].value;
  s.D = q.shape[3].value;
  s.Hkv = k.shape[1].value;
  s.Sk = k.shape[2].value;
  return s;
}

const HostTensor& input(const std::map<std::string, HostTensor>& in, const std::string& name) {
  auto it = in.find(name);
  if (it == in.end()) throw Error("verify_attention: no data for input " + name);
  return it->second;
}

}  // namespace

// The row sum is of the unrounded P, as the kernels keep it in f32.
std::vector<double> reference_attention_16bit(const AttentionShape& sh, const AttentionAttrs& attrs,
                                    const std::vector<double>& q, const std::vector<double>& k,
                                    const std::vector<double>& v, DType dt) {
  const int64_t group = sh.Hq / sh.Hkv, D = sh.D;
  std::vector<double> out(size_t(sh.B * sh.Hq * sh.Sq * D), 0.0), s(size_t(sh.Sk));
  for (int64_t b = 0; b < sh.B; ++b)
    for (int64_t h = 0; h < sh.Hq; ++h) {
      const double* K = &k[size_t(((b * sh.Hkv + h / group) * sh.Sk) * D)];
      const double* V = &v[size_t(((b * sh.Hkv + h / group) * sh.Sk) * D)];
      for (int64_t i = 0; i < sh.Sq; ++i) {
        const size_t row = size_t((b * sh.Hq + h) * sh.Sq + i);
        const double* Q = &q[row * size_t(D)];
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < sh.Sk; ++j) {
          if (!attention_keeps(attrs.causal, i, j, sh.Sq, sh.Sk)) continue;
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += Q[d] * K[j * D + d];
          s[size_t(j)] = attrs.scale * dot;
          m = std::max(m, s[size_t(j)]);
        }
        if (std::isinf(m)) continue;
        double l = 0.0;
        double* O = &out[row * size_t(D)];
        for (int64_t j = 0; j < sh.Sk; ++j) {
          if (!attention_keeps(attrs.causal, i, j, sh.Sq, sh.Sk)) continue;
          const double p = std::exp(s[size_t(j)] - m);
          l += p;
          const double p16 = round_to_dtype(dt, p);
          for (int64_t d = 0; d < D; ++d) O[d] += p16 * V[j * D + d];
        }
        for (int64_t d = 0; d < D; ++d) O[d] = round_to_dtype(dt, O[d] / l);
      }
    }
  return out;
}

namespace {

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

}  // namespace

double attention_threshold(double pipeline_error) {
  return std::max(2.0 * pipeline_error, std::ldexp(1.0, -20));
}

AttentionVerify verify_attention(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                                 const HostTensor& out, const HostTensor* lse) {
  const Node* a = g.attention();
  const AttentionShape sh = shape_of(g);
  const HostTensor& q = input(inputs, g.node(a->inputs[0]).name);
  const HostTensor& k = input(inputs, g.node(a->inputs[1]).name);
  const HostTensor& v = input(inputs, g.node(a->inputs[2]).name);
  const AttentionResult ref = reference_attention(sh, a->attention, q.data, k.data, v.data);
  HostTensor ref_out = out;
  ref_out.dtype = DType::F64;
  ref_out.data = ref.out;
  HostTensor lowp = ref_out;
  lowp.data = reference_attention_16bit(sh, a->attention, q.data, k.data, v.data, q.dtype);
  AttentionVerify r;
  const VerifyResult pipeline = verify_output(lowp, ref_out, 1.0);
  r.pipeline_error = pipeline.rel_fro_error;
  r.pipeline_max_error = pipeline.max_abs_error;
  r.out = verify_output(out, ref_out, attention_threshold(r.pipeline_error));
  const double max_allowed = attention_threshold(r.pipeline_max_error);
  if (r.out.passed && r.out.max_abs_error > max_allowed) {
    r.out.passed = false;
    r.out.message = "FAIL max |O - ref| = " + std::to_string(r.out.max_abs_error) +
                    " exceeds 2 x the 16-bit pipeline's " + std::to_string(r.pipeline_max_error) +
                    " (at flat index " + std::to_string(r.out.worst_index) + ")";
  }
  if (lse) r.lse = verify_lse(*lse, ref.lse);
  return r;
}

std::string AttentionVerify::message() const {
  std::string m = "O: " + out.message + " (thresholds: 2 x the 16-bit pipeline's errors, " +
                  std::to_string(pipeline_error) + " relative, " +
                  std::to_string(pipeline_max_error) + " max)";
  if (lse) m += "; LSE: " + lse->message;
  return m;
}

}  // namespace loom
