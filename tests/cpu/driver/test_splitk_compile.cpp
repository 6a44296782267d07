// Split-K on tensor-core tiles compiles with NVRTC (no GPU needed): every case of the GPU
// test (tests/gpu/splitk_mma_cases.h) for sm_90a, the mma.sync ones for sm_80 too, with
// ptxas reporting no spills; and the device header's tile arrival in both forms (the
// whole block, and the first threads on a named barrier).
#include <gtest/gtest.h>

#include "codegen/cuda.h"
#include "driver/compile.h"
#include "frontend/parser.h"
#include "nvrtc_check.h"
#include "runtime/nvrtc.h"

#include "../../gpu/splitk_mma_cases.h"

namespace loom {
namespace {

CompileResult nvrtc(const std::string& source, const std::string& arch) {
  return nvrtc_check::compile_source(source, arch, "test_splitk_compile.cu");
}

TEST(SplitKCompile, EveryGpuCaseCompilesWithoutSpills) {
  for (const auto& c : splitk_mma::cases())
    for (const std::string arch : {"sm_90a", "sm_80"}) {
      if (c.wgmma && arch != "sm_90a") continue;
      SCOPED_TRACE(arch + " " + c.expr + " knobs=" + c.knobs);
      CompileOptions opt;
      opt.knobs = Knobs::parse(c.knobs);
      opt.target = Target::for_arch(arch);
      CompiledProgram p = compile_expression(c.expr, opt);
      CompileResult r = nvrtc(p.cuda, arch);
      ASSERT_GT(r.cubin.size(), 0u) << r.log;
      if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache skipped ptxas' report";
      nvrtc_check::expect_no_spills(p, r);
    }
}

TEST(SplitKCompile, FixupIsOneKernelWithTheArrival) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  opt.knobs = Knobs::parse(splitk_mma::kWs + ",SPLITK=8,SPLITK_MODE=fixup");
  CompiledProgram p = compile_expression("matmul(A[128,4096]:bf16, B[4096,128]:bf16)", opt);
  ASSERT_EQ(p.state.kernel.kernels.size(), 1u);
  // The two consumer warpgroups arrive on named barrier 1; the producer does not.
  EXPECT_NE(p.cuda.find("loom::tile_arrive_group("), std::string::npos) << p.cuda;
  EXPECT_NE(p.cuda.find(", 8.0f, 256u)"), std::string::npos) << p.cuda;
  opt.knobs = Knobs::parse("ATOM=mma_bf16,SPLITK=8,SPLITK_MODE=fixup");
  p = compile_expression("matmul(A[128,4096]:bf16, B[4096,128]:bf16)", opt);
  EXPECT_NE(p.cuda.find("loom::tile_arrive_block("), std::string::npos) << p.cuda;
}

}  // namespace
}  // namespace loom
