// STAGE=tma on the GPU: boxes moved by the copy engine, completing on mbarriers, give the
// same answers as the fp64 reference — the big square GEMM with one buffer and with a
// pipelined ring of three, odd shapes whose edge boxes lean on TMA's zero fill, a 128-byte
// swizzle, and a batch. Skips with the reason on a GPU-less machine.
#include <gtest/gtest.h>

#include "compile_first.h"
#include "driver/run.h"
#include "runtime/device.h"

namespace loom {
namespace {

struct TmaCase {
  std::string expr;
  std::map<std::string, int64_t> sizes;
  std::string knobs;
};

void PrintTo(const TmaCase& c, std::ostream* os) {
  *os << c.expr;
  for (const auto& [k, v] : c.sizes) *os << " " << k << "=" << v;
  *os << " knobs " << c.knobs;
}

class GpuTma : public ::testing::TestWithParam<TmaCase> {
 protected:
  void SetUp() override {
    const auto& c = GetParam();
    compile_then_require_gpu(c.expr, c.knobs, c.sizes);
  }
};

TEST_P(GpuTma, MatchesFp64Reference) {
  const TmaCase& c = GetParam();
  RunOptions opt;
  opt.sizes = c.sizes;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 11;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
}

const std::string kBig = "BM=128,BN=128,FM=8,FN=8,BK=8,STAGE=tma";
const std::string kSquare = "matmul(A[M,K]:f32, B[K,N]:f32)";

INSTANTIATE_TEST_SUITE_P(
    Tma, GpuTma,
    ::testing::Values(
        TmaCase{kSquare, {{"M", 4096}, {"N", 4096}, {"K", 4096}}, kBig + ",STAGES=1,PIPELINE=0"},
        TmaCase{kSquare, {{"M", 4096}, {"N", 4096}, {"K", 4096}}, kBig + ",STAGES=3,PIPELINE=1"},
        TmaCase{kSquare, {{"M", 1000}, {"N", 3000}, {"K", 776}}, kBig + ",STAGES=1,PIPELINE=0"},
        TmaCase{kSquare, {{"M", 1000}, {"N", 3000}, {"K", 776}}, kBig + ",STAGES=3,PIPELINE=1"},
        TmaCase{"matmul(A[M,K]:f32, B[N,K]:f32.T)", {{"M", 1000}, {"N", 3000}, {"K", 776}},
                "BM=64,BN=64,FM=4,FN=4,BK=32,STAGE=tma,SWIZZLE=128B,STAGES=2,PIPELINE=1"},
        TmaCase{"bmm(A[8,129,64]:f32, B[8,77,64]:f32.T)", {}, kBig + ",STAGES=2,PIPELINE=1"},
        TmaCase{"relu(matmul(A[M,K]:bf16, B[N,K]:bf16.T))", {{"M", 333}, {"N", 517}, {"K", 264}},
                "BM=64,BN=64,FM=4,FN=4,BK=64,STAGE=tma,SWIZZLE=128B,STAGES=3,PIPELINE=1"}));

}  // namespace
}  // namespace loom
