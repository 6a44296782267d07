// Pitched operands on the GPU (`A[M,K|1056]`, TensorDecl::pitch): views into larger
// buffers on every GEMM family — wgmma over TMA (the tensor map's strides are the
// pitches), wgmma over realigned copies of odd pitches, mma.sync and SIMT — with
// transposed views, batch strides, a 3-D linear and pitched epilogue operands. Each case
// runs through run_expression: the inputs scattered into pitched buffers whose gaps hold
// NaN (a kernel that read a gap fails), output poisoned, fp64 reference; the bench cases
// also time cuBLAS on the same pitched buffers (its lda/ldb) and check its answer.
#include <gtest/gtest.h>

#include "compile_first.h"
#include "driver/run.h"

namespace loom {
namespace {

struct PitchCase {
  std::string expr, knobs, family;  // family: a substring the CUDA must hold
};

void PrintTo(const PitchCase& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs; }

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

const std::string kTma = "ATOM=wgmma_bf16,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,WM=2,BN=128";

INSTANTIATE_TEST_SUITE_P(
    Pitch, GpuPitch,
    ::testing::Values(
        // wgmma + TMA: 16-byte pitches, a column slice, a transposed view, a batch stride.
        PitchCase{"matmul(A[1024,1000|1088]:bf16, B[1000,512|576]:bf16)", kTma, "wgmma"},
        PitchCase{"matmul(A[512,768|1024]:bf16, B[384,768|800]:bf16.T)", kTma, "wgmma"},
        PitchCase{"matmul(A[768,512|520]:bf16.T, B[768,256|320]:bf16)", kTma, "wgmma"},
        PitchCase{"bmm(A[3,256,128|65536,136]:bf16, B[3,128,192|40960,200]:bf16)", kTma, "wgmma"},
        PitchCase{"add(relu(linear(X[512,256|264]:bf16, W[384,256|272]:bf16, b[384]:bf16)), "
                  "R[512,384|400]:bf16)", kTma, "wgmma"},
        // The sm_90a defaults: TMA for 16-byte pitches, realigned copies for odd ones.
        PitchCase{"matmul(A[4096,1000|1024]:bf16, B[1000,1024]:bf16)", "", "wgmma"},
        PitchCase{"matmul(A[1000,999|1001]:bf16, B[999,520|521]:bf16)", "", "wgmma"},
        PitchCase{"matmul(A[1000,999|1001]:f16, B[520,999|1003]:f16.T)", "", "wgmma"},
        PitchCase{"linear(X[8,512,1024|600000,1040]:bf16, W[768,1024]:bf16)", "", "wgmma"},
        // mma.sync and SIMT.
        PitchCase{"matmul(A[300,200|208]:f16, B[200,136|144]:f16)",
                  "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=32,STAGE=cp_async,STAGES=3", "mma"},
        PitchCase{"matmul(A[300,200|203]:bf16, B[136,200|201]:bf16.T)",
                  "ATOM=mma_bf16,WM=2,WN=2,FM=2,FN=2,BK=16,STAGE=sync,STAGES=2", "mma"},
        PitchCase{"matmul(A[300,200|203]:f32, B[200,136|139]:f32)", "ATOM=fma", "fma"},
        PitchCase{"bmm(A[2,100,64|10000,70]:f32, B[2,64,72|5000,75]:f32)", "ATOM=fma", "fma"}));

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
  EXPECT_TRUE(r.cublas_verify.passed) << r.cublas_verify.message;
}

}  // namespace
}  // namespace loom
