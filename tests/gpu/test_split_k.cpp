// GPU correctness of split-K (l:020_split_k) and grouped rasterization (t:025): the
// skinny 128x128x16384 GEMM split-K is built for, at SPLITK 1..32 in both combine modes,
// and odd shapes whose last chunk, last tile and last group are partial. Each case runs
// through run_expression (NaN-poisoned output and partials, fp64 reference). Skips with
// the reason on a GPU-less machine.
#include <gtest/gtest.h>

#include "compile_first.h"
#include "driver/run.h"
#include "runtime/device.h"

namespace loom {
namespace {

struct SplitCase {
  std::string expr;
  std::map<std::string, int64_t> sizes;
  std::string knobs;
};

void PrintTo(const SplitCase& c, std::ostream* os) {
  *os << c.expr;
  for (const auto& [k, v] : c.sizes) *os << " " << k << "=" << v;
  *os << " knobs " << c.knobs;
}

class GpuSplitK : public ::testing::TestWithParam<SplitCase> {
 protected:
  void SetUp() override {
    const auto& c = GetParam();
    compile_then_require_gpu(c.expr, c.knobs, c.sizes);
  }
};

TEST_P(GpuSplitK, MatchesFp64Reference) {
  const SplitCase& c = GetParam();
  RunOptions opt;
  opt.sizes = c.sizes;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 11;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
}

std::vector<SplitCase> cases() {
  std::vector<SplitCase> v;
  // The article's skinny shape: 16 output tiles of 32x32, K = 16384.
  for (int s : {1, 4, 16, 32})
    for (std::string mode : {"reduce", "atomic"})
      v.push_back({"matmul(A[128,16384]:f32, B[16384,128]:f32)", {},
                   "BM=32,BN=32,FM=2,FN=2,SPLITK=" + std::to_string(s) + ",SPLITK_MODE=" + mode});
  // Odd shapes: partial tiles, a K that no chunk size divides, symbolic sizes (trailing
  // empty chunks), batch with split-K, fused epilogues in reduce mode, f16/bf16 output.
  v.push_back({"matmul(A[M,K]:f32, B[K,N]:f32)", {{"M", 77}, {"N", 45}, {"K", 3001}},
               "SPLITK=7"});
  v.push_back({"matmul(A[M,K]:f32, B[K,N]:f32)", {{"M", 77}, {"N", 45}, {"K", 3001}},
               "SPLITK=7,SPLITK_MODE=atomic,GROUP_M=3"});
  v.push_back({"matmul(A[M,K]:f32, B[K,N]:f32)", {{"M", 5}, {"N", 3}, {"K", 40}},
               "SPLITK=8,BK=16"});
  v.push_back({"matmul(A[129,1000]:f32, B[N,1000]:f32.T)", {{"N", 65}},
               "SPLITK=5,STAGE=direct,GROUP_M=2"});
  v.push_back({"bmm(A[3,50,999]:f16, B[3,999,70]:f16)", {}, "SPLITK=6,GROUP_M=4"});
  v.push_back({"relu(linear(X[100,2000]:bf16, W[33,2000]:bf16, bias[33]:bf16))", {},
               "SPLITK=9,BM=16,BN=16,FM=2,FN=2"});
  v.push_back({"mul(matmul(A[64,4096]:f32, B[4096,96]:f32), 0.5)", {},
               "SPLITK=16,SPLITK_MODE=atomic,GROUP_M=8,BM=16,BN=32,FM=2,FN=4"});
  v.push_back({"matmul(A[300,200]:f32, B[200,500]:f32)", {}, "GROUP_M=8,BM=32,BN=32"});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuSplitK, ::testing::ValuesIn(cases()));

}  // namespace
}  // namespace loom
