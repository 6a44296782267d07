#include "bench/verify.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "bench/broadcast.h"
#include "ir/error.h"

namespace loom {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

// "[2,5] (flat 17)" for a flat index into `shape`.
std::string element_str(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> coord(shape.size());
  int64_t rest = flat;
  for (size_t d = shape.size(); d-- > 0;) {
    coord[d] = shape[d] ? rest % shape[d] : 0;
    rest = shape[d] ? rest / shape[d] : 0;
  }
  return shape_str(coord) + " (flat " + std::to_string(flat) + ")";
}

// The error of the finite elements both checks compare: the Frobenius norms of the
// difference and of the reference, and the element of the largest difference.
struct FiniteError {
  double diff2 = 0, ref2 = 0, max_abs = 0;
  int64_t worst = -1;
  void add(size_t i, double out, double ref) {
    const double d = out - ref;
    diff2 += d * d;
    ref2 += ref * ref;
    if (std::fabs(d) > max_abs || worst < 0) max_abs = std::fabs(d), worst = int64_t(i);
  }
  double ref_norm() const { return std::sqrt(ref2); }
  // Relative to the reference's norm; absolute when the reference is all zeros.
  double rel_fro() const { return ref_norm() > 0 ? std::sqrt(diff2) / ref_norm() : std::sqrt(diff2); }
};

VerifyResult fail(VerifyResult r, const std::string& why) {
  r.passed = false;
  r.message = "FAIL: " + why;
  return r;
}

}  // namespace

VerifyResult verify_ieee_output(const HostTensor& out, const HostTensor& ref, double threshold) {
  VerifyResult r;
  r.threshold = threshold;
  if (out.shape != ref.shape || out.data.size() != ref.data.size())
    return fail(r, "output shape " + shape_str(out.shape) + " differs from reference shape " +
                       shape_str(ref.shape));
  auto kind = [](double v) { return std::isnan(v) ? "NaN" : std::isinf(v) ? (v > 0 ? "+inf" : "-inf") : "finite"; };
  FiniteError err;
  int64_t mismatches = 0, first_mismatch = -1;
  for (size_t i = 0; i < out.data.size(); ++i) {
    const double o = out.data[i], e = ref.data[i];
    if (std::string(kind(o)) != kind(e)) {
      if (mismatches++ == 0) first_mismatch = int64_t(i);
      continue;
    }
    if (std::isfinite(e)) err.add(i, o, e);
  }
  r.max_abs_error = err.max_abs;
  r.rel_fro_error = err.rel_fro();
  r.nan_count = mismatches;
  r.worst_index = first_mismatch >= 0 ? first_mismatch : err.worst;
  if (mismatches > 0) {
    const size_t i = size_t(first_mismatch);
    return fail(r, std::to_string(mismatches) + " element(s) whose NaN/inf class differs from the "
                   "reference; first " + element_str(first_mismatch, out.shape) + ": out=" +
                   num(out.data[i]) + " (" + kind(out.data[i]) + ") ref=" + num(ref.data[i]) +
                   " (" + kind(ref.data[i]) + ")");
  }
  r.passed = r.rel_fro_error <= threshold;
  r.message = std::string(r.passed ? "PASS: " : "FAIL: ") + "every NaN/inf as the reference; finite part " +
              "rel_fro_error " + sci(r.rel_fro_error) + (r.passed ? " <= " : " > ") + "threshold " +
              sci(threshold);
  return r;
}

VerifyResult verify_output(const HostTensor& out, const HostTensor& ref, double threshold) {
  VerifyResult r;
  r.threshold = threshold;
  if (out.shape != ref.shape || out.data.size() != ref.data.size())
    return fail(r, "output shape " + shape_str(out.shape) + " (" + std::to_string(out.data.size()) +
                       " values) differs from reference shape " + shape_str(ref.shape) + " (" +
                       std::to_string(ref.data.size()) + " values)");

  FiniteError err;
  int64_t first_bad = -1;
  for (size_t i = 0; i < out.data.size(); ++i) {
    const double o = out.data[i], e = ref.data[i];
    if (!std::isfinite(e))
      return fail(r, "the reference itself is not finite at " + element_str(int64_t(i), ref.shape) +
                         " (" + num(e) + "); check the inputs for inf/NaN");
    if (!std::isfinite(o)) {
      if (r.nan_count++ == 0) first_bad = int64_t(i);
      continue;
    }
    err.add(i, o, e);
  }
  r.max_abs_error = err.max_abs;
  r.rel_fro_error = err.rel_fro();
  r.worst_index = first_bad >= 0 ? first_bad : err.worst;
  const double ref_norm = err.ref_norm();

  const std::string measure = ref_norm > 0 ? "rel_fro_error " : "abs_fro_error (reference is 0) ";
  std::string worst_str;
  if (r.worst_index >= 0)
    worst_str = "; worst element " + element_str(r.worst_index, out.shape) +
                ": out=" + num(out.data[size_t(r.worst_index)]) +
                " ref=" + num(ref.data[size_t(r.worst_index)]);
  if (r.nan_count > 0)
    return fail(r, std::to_string(r.nan_count) + " NaN/inf value(s) in the output (unwritten or "
                   "overflowed elements); " + measure + "of the finite ones " +
                   sci(r.rel_fro_error) + ", threshold " + sci(threshold) + worst_str);
  r.passed = r.rel_fro_error <= threshold;
  r.message = std::string(r.passed ? "PASS: " : "FAIL: ") + measure + sci(r.rel_fro_error) +
              (r.passed ? " <= " : " > ") + "threshold " + sci(threshold) +
              ", max_abs_error " + sci(r.max_abs_error) + worst_str;
  return r;
}

double verify_threshold_f16_accumulate(DType in, DType out, int64_t k, int atom_k) {
  if (k < 1 || atom_k < 1)
    throw Error("verify_threshold_f16_accumulate: reduction length " + std::to_string(k) +
                " and atom depth " + std::to_string(atom_k) + " must be positive");
  // f16's unit roundoff. Round-to-nearest errors of the n sums are independent and
  // uniform in [-u, u]·|s_j|; for zero-mean inputs the partial sums s_j grow like √j, so
  // the relative error is about u·√((n+1)/6) ≈ 0.41·u·√n (measured 0.3·u·√n from
  // n = 1 to 1024). The factor 4 is about 10x that, the room the f32 threshold leaves.
  const double u = std::ldexp(1.0, -11);
  const int64_t roundings = (k + atom_k - 1) / atom_k;
  return verify_threshold(in, out) + 4 * u * std::sqrt(double(roundings));
}

HostTensor from_device_bytes(const void* bytes, size_t nbytes, DType dtype,
                             std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const size_t n = size_t(shape_numel(t.shape));
  if (nbytes != n * size_t(dtype_bytes(dtype)))
    throw Error("storage of " + std::to_string(nbytes) + " bytes does not hold a " +
                dtype_name(dtype) + " tensor of shape " + shape_str(t.shape) + " (" +
                std::to_string(n * size_t(dtype_bytes(dtype))) + " bytes); copy the whole tensor");
  t.data.resize(n);
  const char* p = static_cast<const char*>(bytes);
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::F32:
      case DType::TF32: {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        t.data[i] = f;
        break;
      }
      case DType::F16:
      case DType::BF16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        t.data[i] = dtype == DType::F16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
        break;
      }
      case DType::F64: std::memcpy(&t.data[i], p + 8 * i, 8); break;
      case DType::I32: {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        t.data[i] = v;
        break;
      }
    }
  }
  return t;
}

std::vector<char> to_storage_bytes(const HostTensor& t) {
  const size_t esize = size_t(dtype_bytes(t.dtype));
  std::vector<char> out(t.data.size() * esize);
  for (size_t i = 0; i < t.data.size(); ++i) {
    char* p = out.data() + esize * i;
    switch (t.dtype) {
      case DType::F32:
      case DType::TF32: {
        const float f = float(t.data[i]);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::F16:
      case DType::BF16: {
        const float f = float(t.data[i]);
        const uint16_t h = t.dtype == DType::F16 ? f32_to_f16_bits(f) : f32_to_bf16_bits(f);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::F64: std::memcpy(p, &t.data[i], 8); break;
      case DType::I32: {
        const int32_t v = int32_t(t.data[i]);
        std::memcpy(p, &v, 4);
        break;
      }
    }
  }
  return out;
}

}  // namespace loom
