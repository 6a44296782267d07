// The GEMM tests/gpu/test_timing_l2.cpp benchmarks (rotated inputs, graph ratios) compiles
// for sm_90a at its defaults without spills, so the GPU run is left with the timing.
#include <gtest/gtest.h>

#include "driver/compile.h"
#include "nvrtc_check.h"

namespace loom {
namespace {

TEST(TimingL2Cases, SmallBenchGemmCompilesForSm90a) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  CompiledProgram p = compile_expression("matmul(A[64,1024]:bf16, B[1024,1024]:bf16)", opt);
  ASSERT_FALSE(p.cuda.empty());
  CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a");
  EXPECT_FALSE(r.cubin.empty());
  nvrtc_check::expect_no_spills(p, r);
}

}  // namespace
}  // namespace loom
