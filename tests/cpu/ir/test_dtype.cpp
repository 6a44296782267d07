#include "ir/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

namespace loom {
namespace {

float bits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(DType, NamesBytesCtypes) {
  for (DType t : {DType::F32, DType::TF32, DType::F16, DType::BF16, DType::F64})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_STREQ(dtype_name(DType::BF16), "bf16");
  EXPECT_FALSE(parse_dtype("fp32"));
  EXPECT_FALSE(parse_dtype(""));
  EXPECT_EQ(dtype_bytes(DType::F32), 4);
  EXPECT_EQ(dtype_bytes(DType::TF32), 4);
  EXPECT_EQ(dtype_bytes(DType::F16), 2);
  EXPECT_EQ(dtype_bytes(DType::BF16), 2);
  EXPECT_EQ(dtype_bytes(DType::F64), 8);
  EXPECT_STREQ(dtype_storage_ctype(DType::TF32), "float");
  EXPECT_STREQ(dtype_storage_ctype(DType::F16), "loom_f16");
  EXPECT_STREQ(dtype_storage_ctype(DType::BF16), "loom_bf16");
  EXPECT_STREQ(dtype_storage_ctype(DType::F64), "double");
}

TEST(F16, KnownValuesAndTies) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);  // tie to even is infinity
  EXPECT_EQ(f32_to_f16_bits(1e6f), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-INFINITY), 0xfc00);
  uint16_t nan = f32_to_f16_bits(NAN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie: even down
  EXPECT_EQ(f32_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie: even up
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  // Subnormals, in units of 2^-24.
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0: even
  EXPECT_EQ(f32_to_f16_bits(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie to 2
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1023.5f, -24)), 0x0400);  // up into the normals
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(f32_to_f16_bits(1e-30f), 0x0000);
  EXPECT_EQ(f16_bits_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_bits_to_f32(0x83ff), -std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_bits_to_f32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_bits_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(0x7e00)));
}

TEST(F16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_bits_to_f32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(f)))) << h;
      continue;
    }
    ASSERT_EQ(f32_to_f16_bits(f), h) << "half 0x" << std::hex << h;
  }
}

#ifdef __FLT16_MAX__
// The compiler's own float -> _Float16 conversion rounds to nearest even: compare on
// random bit patterns across the whole float range.
TEST(F16, MatchesCompilerConversion) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    float f = bits(rng());
    if (std::isnan(f)) continue;
    _Float16 h = static_cast<_Float16>(f);
    ASSERT_EQ(f32_to_f16_bits(f), std::bit_cast<uint16_t>(h)) << f;
  }
}
#endif

TEST(BF16, KnownValuesAndTies) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie: even down
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie: even up
  EXPECT_EQ(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(f32_to_bf16_bits(-1.0f), 0xbf80);
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // overflows
  EXPECT_EQ(f32_to_bf16_bits(INFINITY), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(bits(0x7f800001u)))));
  EXPECT_EQ(bf16_bits_to_f32(0x4049), 3.140625f);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = bf16_bits_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16_bits(f), h) << "bf16 0x" << std::hex << h;
  }
}

TEST(TF32, RoundsToNearestTiesAway) {
  const float ulp = std::ldexp(1.0f, -10);  // tf32 ulp at 1.0
  EXPECT_EQ(round_to_tf32(1.0f + ulp / 2), 1.0f + ulp);  // tie: away from zero
  EXPECT_EQ(round_to_tf32(-(1.0f + ulp / 2)), -(1.0f + ulp));
  EXPECT_EQ(round_to_tf32(1.0f + 3 * ulp / 2), 1.0f + 2 * ulp);
  EXPECT_EQ(round_to_tf32(std::nextafter(1.0f + ulp / 2, 0.0f)), 1.0f);
  EXPECT_EQ(round_to_tf32(1.0f + ulp), 1.0f + ulp);
  EXPECT_EQ(std::bit_cast<uint32_t>(round_to_tf32(0.1f)) & 0x1fffu, 0u);
  EXPECT_TRUE(std::isinf(round_to_tf32(INFINITY)));
  EXPECT_TRUE(std::isnan(round_to_tf32(NAN)));
}

TEST(RoundToDtype, PerDtype) {
  EXPECT_EQ(round_to_dtype(DType::F64, 0.1), 0.1);
  EXPECT_EQ(round_to_dtype(DType::F32, 0.1), double(0.1f));
  EXPECT_NE(round_to_dtype(DType::F32, 0.1), 0.1);
  EXPECT_EQ(round_to_dtype(DType::TF32, 0.1), double(0.1f));  // storage is f32
  EXPECT_EQ(round_to_dtype(DType::F16, 0.1), double(f16_bits_to_f32(0x2e66)));
  EXPECT_EQ(round_to_dtype(DType::BF16, 3.14159), 3.140625);
  EXPECT_EQ(round_to_dtype(DType::F16, 1e9), INFINITY);
}

TEST(RoundToDtype, NoDoubleRoundingFromDouble) {
  // Just above an f16 (bf16) tie by less than half an f32 ulp: rounding to f32 first
  // would land on the tie and round to even (down); the correct answer rounds up.
  double above = std::ldexp(1.0, -40);
  EXPECT_EQ(round_to_dtype(DType::F16, 1.0 + std::ldexp(1.0, -11) + above),
            1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(round_to_dtype(DType::BF16, 1.0 + std::ldexp(1.0, -8) + above),
            1.0 + std::ldexp(1.0, -7));
  EXPECT_EQ(round_to_dtype(DType::F16, -(1.0 + std::ldexp(1.0, -11) + above)),
            -(1.0 + std::ldexp(1.0, -10)));
  EXPECT_EQ(round_to_dtype(DType::F16, 1.0 + std::ldexp(1.0, -11)), 1.0);  // exact tie
  EXPECT_EQ(round_to_dtype(DType::F16, 1e-300), 0.0);
}

TEST(VerifyThreshold, PerOutputDtype) {
  EXPECT_EQ(verify_threshold(DType::F32, DType::F32), 1e-5);
  EXPECT_EQ(verify_threshold(DType::TF32, DType::F32), 5e-3);
  EXPECT_EQ(verify_threshold(DType::F16, DType::F32), 1e-5);
  EXPECT_EQ(verify_threshold(DType::F16, DType::F16), 2e-3);
  EXPECT_EQ(verify_threshold(DType::BF16, DType::BF16), 1e-2);
  EXPECT_EQ(verify_threshold(DType::F64, DType::F64), 1e-12);
}

}  // namespace
}  // namespace loom
