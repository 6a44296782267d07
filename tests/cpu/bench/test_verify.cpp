#include "bench/verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "ir/dtype.h"
#include "ir/error.h"

namespace loom {
namespace {

HostTensor tensor(DType t, std::vector<int64_t> shape, std::vector<double> data) {
  HostTensor h;
  h.dtype = t;
  h.shape = std::move(shape);
  h.data = std::move(data);
  return h;
}

HostTensor random_tensor(DType t, std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  HostTensor h = tensor(t, shape, {});
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  for (int64_t i = 0; i < n; ++i) h.data.push_back(round_to_dtype(t, dist(rng)));
  return h;
}

TEST(VerifyOutput, PassesSmallRelativeError) {
  HostTensor ref = random_tensor(DType::F64, {8, 16}, 1);
  HostTensor out = ref;
  out.dtype = DType::F32;
  for (double& v : out.data) v = double(float(v * (1 + 1e-7)));
  VerifyResult r = verify_output(out, ref, verify_threshold(DType::F32, DType::F32));
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_GT(r.rel_fro_error, 0.0);
  EXPECT_LT(r.rel_fro_error, 1e-6);
  EXPECT_EQ(r.nan_count, 0);
  EXPECT_EQ(r.threshold, 1e-5);
  EXPECT_EQ(r.message.rfind("PASS", 0), 0u) << r.message;
}

TEST(VerifyOutput, FailsOnOnePerturbedValueAndNamesIt) {
  HostTensor ref = random_tensor(DType::F64, {8, 16}, 2);
  HostTensor out = ref;
  out.data[37] += 0.5;  // row 2, column 5
  VerifyResult r = verify_output(out, ref, 1e-5);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.worst_index, 37);
  EXPECT_NEAR(r.max_abs_error, 0.5, 1e-12);
  EXPECT_EQ(r.message.rfind("FAIL", 0), 0u) << r.message;
  EXPECT_NE(r.message.find("[2,5]"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("threshold"), std::string::npos) << r.message;
}

TEST(VerifyOutput, NanOrInfFailsEvenWithHugeThreshold) {
  HostTensor ref = random_tensor(DType::F64, {4, 4}, 3);
  HostTensor out = ref;
  out.data[5] = std::numeric_limits<double>::quiet_NaN();
  out.data[9] = std::numeric_limits<double>::infinity();
  VerifyResult r = verify_output(out, ref, 1e30);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.nan_count, 2);
  EXPECT_EQ(r.worst_index, 5);
  EXPECT_NE(r.message.find("NaN"), std::string::npos) << r.message;
}

TEST(VerifyIeeeOutput, PassesWhereEverySpecialMatchesAndTheRestIsClose) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  HostTensor ref = tensor(DType::F32, {2, 3}, {1.0, nan, inf, -inf, 2.0, -3.0});
  HostTensor out = tensor(DType::F32, {2, 3}, {1.0 + 1e-7, nan, inf, -inf, 2.0, -3.0});
  VerifyResult v = verify_ieee_output(out, ref, 1e-6);
  EXPECT_TRUE(v.passed) << v.message;
}

TEST(VerifyIeeeOutput, FailsOnEachClassMismatchAndNamesTheFirst) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const HostTensor ref = tensor(DType::F32, {2, 2}, {nan, inf, -inf, 1.0});
  // NaN turned into a number (fmaxf(NaN, 0) = 0), an inf of the wrong sign, an inf that
  // became NaN, and a finite value that became NaN: each fails alone.
  const std::vector<std::pair<size_t, double>> wrong = {{0, 0.0}, {1, -inf}, {2, nan}, {3, nan}};
  for (const auto& [i, value] : wrong) {
    HostTensor out = ref;
    out.data[i] = value;
    VerifyResult v = verify_ieee_output(out, ref, 1.0);
    EXPECT_FALSE(v.passed) << "element " << i;
    EXPECT_EQ(v.worst_index, int64_t(i));
    EXPECT_NE(v.message.find("NaN/inf class differs"), std::string::npos) << v.message;
  }
}

TEST(VerifyIeeeOutput, JudgesTheFinitePartByTheThreshold) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  HostTensor ref = tensor(DType::F32, {3}, {nan, 1.0, 1.0});
  HostTensor out = tensor(DType::F32, {3}, {nan, 1.1, 1.0});
  EXPECT_FALSE(verify_ieee_output(out, ref, 1e-3).passed);
  EXPECT_TRUE(verify_ieee_output(out, ref, 1e-1).passed);
}

TEST(VerifyOutput, ThresholdIsInclusive) {
  HostTensor ref = tensor(DType::F64, {2}, {3.0, 4.0});
  HostTensor out = tensor(DType::F32, {2}, {3.0, 4.05});
  const double err = verify_output(out, ref, 1.0).rel_fro_error;
  EXPECT_NEAR(err, 0.01, 1e-12);
  EXPECT_TRUE(verify_output(out, ref, err).passed);
  EXPECT_FALSE(verify_output(out, ref, std::nextafter(err, 0.0)).passed);
}

TEST(VerifyOutput, ZeroReferenceUsesAbsoluteError) {
  HostTensor ref = tensor(DType::F64, {3}, {0, 0, 0});
  HostTensor out = tensor(DType::F32, {3}, {0, 3e-6, 4e-6});
  VerifyResult r = verify_output(out, ref, 1e-5);
  EXPECT_NEAR(r.rel_fro_error, 5e-6, 1e-18);
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_FALSE(verify_output(out, ref, 4e-6).passed);
}

TEST(VerifyOutput, ShapeMismatchFails) {
  HostTensor ref = tensor(DType::F64, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor out = tensor(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  VerifyResult r = verify_output(out, ref, 1.0);
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.message.find("[3,2]"), std::string::npos) << r.message;
}

TEST(StorageBytes, RoundTripsEveryDtype) {
  for (DType t : {DType::F32, DType::TF32, DType::F16, DType::BF16, DType::F64}) {
    HostTensor h = random_tensor(t, {3, 5}, 7);
    std::vector<char> bytes = to_storage_bytes(h);
    ASSERT_EQ(bytes.size(), size_t(15 * dtype_bytes(t))) << dtype_name(t);
    HostTensor back = from_device_bytes(bytes.data(), bytes.size(), t, {3, 5});
    EXPECT_EQ(back.dtype, t);
    EXPECT_EQ(back.shape, (std::vector<int64_t>{3, 5}));
    EXPECT_EQ(back.data, h.data) << dtype_name(t);
  }
}

TEST(StorageBytes, UsesTheDtypeBitPatterns) {
  HostTensor one_half = tensor(DType::F16, {2}, {1.0, -2.0});
  std::vector<char> b = to_storage_bytes(one_half);
  uint16_t bits[2];
  std::memcpy(bits, b.data(), 4);
  EXPECT_EQ(bits[0], 0x3C00);
  EXPECT_EQ(bits[1], 0xC000);
  HostTensor bf = tensor(DType::BF16, {1}, {1.0});
  b = to_storage_bytes(bf);
  std::memcpy(bits, b.data(), 2);
  EXPECT_EQ(bits[0], 0x3F80);
}

TEST(StorageBytes, WrongByteCountThrows) {
  std::vector<char> bytes(10);
  EXPECT_THROW(from_device_bytes(bytes.data(), bytes.size(), DType::F32, {3}), Error);
}

// ACC=f16's threshold: the dtype's threshold plus 4 * 2^-11 * sqrt(ceil(k / 16)).
TEST(VerifyThreshold, F16AccumulateGrowsWithTheRoundingsAlongK) {
  const double u = std::ldexp(1.0, -11);
  EXPECT_DOUBLE_EQ(verify_threshold_f16_accumulate(DType::F16, DType::F32, 16, 16), 1e-5 + 4 * u);
  EXPECT_DOUBLE_EQ(verify_threshold_f16_accumulate(DType::F16, DType::F32, 17, 16), 1e-5 + 4 * u * std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(verify_threshold_f16_accumulate(DType::F16, DType::F16, 4096, 16), 2e-3 + 64 * u);
  EXPECT_DOUBLE_EQ(verify_threshold_f16_accumulate(DType::F16, DType::BF16, 1000, 16), 1e-2 + 4 * u * std::sqrt(63.0));
  // The f16 contract never replaces the others' thresholds (those stay as they were).
  EXPECT_EQ(verify_threshold(DType::F16, DType::F32), 1e-5);
  EXPECT_EQ(verify_threshold(DType::F16, DType::F16), 2e-3);
  EXPECT_THROW(verify_threshold_f16_accumulate(DType::F16, DType::F32, 0, 16), Error);
}

// The derivation checked on the inputs verification uses (uniform in [-1, 1], rounded to
// f16): a GEMM whose running sums are rounded to f16 after every 16 products passes with
// room (the model predicts ~0.4 u sqrt(n), the threshold is 4 u sqrt(n)) yet fails f32
// accumulation's threshold, and a sum that drops one 16-deep slice of K fails it.
TEST(VerifyThreshold, F16AccumulateSeparatesRoundingFromAMissingSlice) {
  for (const int64_t K : {16, 100, 333, 1024}) {
    SCOPED_TRACE("K=" + std::to_string(K));
    const int64_t M = 24, N = 24;
    std::mt19937_64 rng{uint64_t(K)};
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    std::vector<double> A(size_t(M * K)), B(size_t(K * N));
    for (double& x : A) x = round_to_dtype(DType::F16, uni(rng));
    for (double& x : B) x = round_to_dtype(DType::F16, uni(rng));
    HostTensor ref = tensor(DType::F64, {M, N}, {}), acc = tensor(DType::F32, {M, N}, {});
    HostTensor dropped = acc;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double exact = 0, f16 = 0, miss = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = A[size_t(i * K + k)] * B[size_t(k * N + j)];
          exact += p;
          f16 += p;
          if (k / 16 != (K - 1) / 16 / 2) miss += p;
          if ((k + 1) % 16 == 0 || k + 1 == K) {
            f16 = round_to_dtype(DType::F16, f16);
            miss = round_to_dtype(DType::F16, miss);
          }
        }
        ref.data.push_back(exact);
        acc.data.push_back(f16);
        dropped.data.push_back(miss);
      }
    const double t = verify_threshold_f16_accumulate(DType::F16, DType::F32, K, 16);
    VerifyResult ok = verify_output(acc, ref, t);
    EXPECT_TRUE(ok.passed) << ok.message;
    EXPECT_LT(ok.rel_fro_error, t / 4) << ok.message;
    EXPECT_FALSE(verify_output(acc, ref, verify_threshold(DType::F16, DType::F32)).passed);
    EXPECT_FALSE(verify_output(dropped, ref, t).passed);
  }
}

}  // namespace
}  // namespace loom
