// Tensors of 2^31 or more elements, where 32-bit index math would wrap: an operand
// (A of 65536 x 32768 bf16, 4 GiB) and an output (65536 x 32768 bf16) through the sm_90a
// default kernels, verified against the fp64 reference (cuBLAS DGEMM) like every run.
// Each needs tens of GiB of host memory (the fp64 host copies) and several GiB on the
// GPU; it skips, saying so, where either is short.
#include <gtest/gtest.h>

#include <unistd.h>

#include "compile_first.h"
#include "driver/run.h"

namespace loom {
namespace {

struct LargeCase {
  std::string expr;
  double device_gib;  // inputs, output and the reference's fp64 copies
  double host_gib;    // fp64 host copies of inputs, output and reference
};

void PrintTo(const LargeCase& c, std::ostream* os) { *os << c.expr; }

class GpuLargeTensors : public ::testing::TestWithParam<LargeCase> {
 protected:
  void SetUp() override {
    compile_then_require_gpu(GetParam().expr, "");
    if (IsSkipped() || HasFailure()) return;
    size_t free_b = 0, total_b = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    const double host_gib = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)) / 1073741824.0;
    if (double(free_b) / 1073741824.0 < GetParam().device_gib)
      GTEST_SKIP() << "needs " << GetParam().device_gib << " GiB free on the GPU, has "
                   << double(free_b) / 1073741824.0;
    if (host_gib < GetParam().host_gib)
      GTEST_SKIP() << "needs " << GetParam().host_gib << " GiB of host memory, has " << host_gib;
  }
};

TEST_P(GpuLargeTensors, MatchesFp64Reference) {
  const LargeCase& c = GetParam();
  // The operands really are past 32-bit indexing.
  RunOptions opt;
  opt.seed = 3;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  bool big = false;
  for (const auto& t : r.program.state.kernel.tensors) {
    int64_t n = 1;
    for (const auto& d : t.shape) n *= d.const_value();
    big = big || n >= (int64_t(1) << 31);
  }
  EXPECT_TRUE(big) << "no tensor of 2^31 elements or more in " << c.expr;
}

INSTANTIATE_TEST_SUITE_P(
    Past2To31, GpuLargeTensors,
    ::testing::Values(
        // A: 2^31 elements (4 GiB bf16); the reference's fp64 A is 16 GiB on the GPU.
        LargeCase{"matmul(A[65536,32768]:bf16, B[32768,128]:bf16)", 24, 40},
        // C: 2^31 elements.
        LargeCase{"matmul(A[65536,64]:bf16, B[64,32768]:bf16)", 24, 56}));

}  // namespace
}  // namespace loom
