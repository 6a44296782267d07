// Element types and bit-exact host emulation of the GPU's conversions.
#include "ir/dtype.h"

#include <bit>
#include <cmath>

namespace loom {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::TF32: return "tf32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F64: return "f64";
    case DType::I32: return "i32";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::F32, DType::TF32, DType::F16, DType::BF16, DType::F64, DType::I32})
    if (s == dtype_name(t)) return t;
  return std::nullopt;
}

int dtype_bytes(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16: return 2;
    case DType::F64: return 8;
    default: return 4;  // f32, and tf32 which is stored as f32
  }
}

const char* dtype_storage_ctype(DType t) {
  switch (t) {
    case DType::F16: return "loom_f16";
    case DType::BF16: return "loom_bf16";
    case DType::F64: return "double";
    case DType::I32: return "int";
    default: return "float";
  }
}

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
uint16_t f32_to_f16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u | uint16_t((ax >> 13) & 0x3ffu);  // NaN, quiet
  // 65520 is halfway between the largest half 65504 (odd mantissa) and 2^16: the tie
  // goes to the even neighbour, which is infinity.
  if (ax >= 0x477ff000u) return sign | 0x7c00u;
  if (ax >= 0x38800000u) {  // a normal half: rebias the exponent, round off 13 bits
    uint32_t r = ax - 0x38000000u;
    uint32_t h = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry bumps the exponent
    return sign | uint16_t(h);
  }
  // Subnormal half: value = m * 2^(e-150) expressed in units of 2^-24.
  uint32_t e = ax >> 23;
  uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - e;  // >= 14 here
  if (e == 0 || shift > 24) return sign;  // below 2^-25: rounds to zero
  uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // 0x3ff + 1 is the smallest normal
  return sign | uint16_t(h);
}

float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

// bf16 is the top half of an f32: rounding to nearest even is an add of 0x7fff plus the
// kept lsb; a carry out of the mantissa correctly reaches the exponent (and infinity).
uint16_t f32_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

float bf16_bits_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// cvt.rna.tf32.f32 keeps 10 mantissa bits, rounding to nearest with ties away from zero;
// sign-magnitude encoding makes "add half an ulp to the magnitude bits, truncate" exactly
// that, subnormals included. The result is still an f32 bit pattern (low 13 bits zero).
float round_to_tf32(float f) {
  if (!std::isfinite(f)) return f;
  uint32_t x = std::bit_cast<uint32_t>(f);
  x = (x + 0x1000u) & 0xffffe000u;
  return std::bit_cast<float>(x);
}

float truncate_to_tf32(float f) {
  if (!std::isfinite(f)) return f;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) & 0xffffe000u);
}

namespace {

// double -> float rounding to odd: the truncated value with its lsb set when inexact.
// Rounding that float again to 11 (f16) or 8 (bf16) significant bits gives the correctly
// rounded result of the original double, because f32 keeps more than two extra bits;
// plain round-to-nearest to f32 first could create a false tie (double rounding).
float to_f32_round_odd(double v) {
  float f = float(v);
  if (std::isnan(f) || double(f) == v) return f;
  if (std::fabs(double(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

}  // namespace

double round_to_dtype(DType t, double v) {
  switch (t) {
    // tf32 tensors are stored as f32; only loads round to tf32 (see the interpreter).
    case DType::F32:
    case DType::TF32: return double(float(v));
    case DType::F16: return f16_bits_to_f32(f32_to_f16_bits(to_f32_round_odd(v)));
    case DType::BF16: return bf16_bits_to_f32(f32_to_bf16_bits(to_f32_round_odd(v)));
    case DType::F64: return v;
    case DType::I32: return std::nearbyint(v);  // an index stored as an integer
  }
  return v;
}

// Relative Frobenius thresholds ||out - ref|| / ||ref||. The reference is exact (f64), so
// the error is dominated by rounding the result to the output dtype: unit roundoff u
// (2^-24 f32, 2^-11 f16, 2^-8 bf16, 2^-53 f64) per element, which for uniformly
// distributed rounding errors gives a relative Frobenius error near u/sqrt(3), plus f32
// accumulation over k that grows like sqrt(k) * 2^-24. The thresholds are u times a
// safety factor of about 4-8 that covers both at the sizes we test:
//   f32 1e-5 (u = 6e-8; headroom for k-dependent f32 accumulation), f16 2e-3 (u = 4.9e-4),
//   bf16 1e-2 (u = 3.9e-3), f64 1e-12.
// tf32 inputs are rounded to 10 mantissa bits on load: 2^-11 relative error per operand,
// two operands per product, so an f32 output of tf32 inputs gets 5e-3 (~10 * 2^-11).
double verify_threshold(DType in, DType out) {
  switch (out) {
    case DType::F16: return 2e-3;
    case DType::BF16: return 1e-2;
    case DType::F64: return 1e-12;
    case DType::F32:
    case DType::TF32: return in == DType::TF32 ? 5e-3 : 1e-5;
    case DType::I32: return 0.0;  // integers compare exactly
  }
  return 1e-5;
}

}  // namespace loom
