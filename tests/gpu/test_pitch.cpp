// Pitched operands on the GPU (`A[M,K|1056]`, TensorDecl::pitch): views into larger
// buffers on every GEMM family — wgmma over TMA (the tensor map's strides are the
// pitches), wgmma over realigned copies of odd pitches, mma.sync and SIMT — with
// transposed views, batch strides, a 3-D linear and pitched epilogue operands. Each case
// runs through run_expression: the inputs scattered into pitched buffers whose gaps hold
// NaN (a kernel that read a gap fails), output poisoned, fp64 reference; the bench cases
// also time cuBLAS on the same pitched buffers (its lda/ldb) and check its answer.
#include <gtest/gtest.h>

#include "compile_first.h"
#include "pitch_cases.h"
#include "driver/run.h"

namespace loom {
namespace {

class GpuPitch : public ::testing::TestWithParam<PitchCase> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuPitch, MatchesFp64Reference) {
  const PitchCase& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 53;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.program.cuda.find(c.family), std::string::npos) << c.family;
}

INSTANTIATE_TEST_SUITE_P(Pitch, GpuPitch, ::testing::ValuesIn(pitch_cases()));

// cuBLAS on the same pitched buffers: its leading dimensions are the pitches.
TEST(GpuPitchBench, CublasReadsTheSameViews) {
  const std::string expr = "matmul(A[512,1000|1088]:bf16, B[1000,256|320]:bf16)";
  compile_then_require_gpu(expr, "");
  if (IsSkipped()) return;
  RunOptions opt;
  opt.seed = 59;
  opt.bench = true;
  opt.timing.warmup = 1;
  opt.timing.reps = 3;
  RunReport r = run_expression(expr, opt);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  ASSERT_TRUE(r.cublas_verify.has_value());
  EXPECT_TRUE(r.cublas_verify->passed) << r.cublas_verify->message;
}

}  // namespace
}  // namespace loom
