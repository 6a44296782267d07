// The small-tile organization compiles with NVRTC for sm_90a (no GPU needed): every case
// of the GPU test (tests/gpu/small_tile_cases.h) with ptxas reporting no spills, and the
// CUDA of a 2 x 4 cluster: one 8-CTA cluster launch whose A and B boxes are multicast to a
// rank-dependent row and column of CTAs, the split-K partials summed in the same kernel.
#include <gtest/gtest.h>

#include "driver/compile.h"
#include "frontend/parser.h"
#include "nvrtc_check.h"

#include "../../gpu/small_tile_cases.h"

namespace loom {
namespace {

CompiledProgram compile_sm90a(const std::string& expr, const std::string& knobs) {
  CompileOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.target = Target::for_arch("sm_90a");
  return compile_expression(expr, opt);
}

TEST(SmallTilesCompile, EveryGpuCaseCompilesWithoutSpills) {
  for (const auto& c : small_tile::cases()) {
    SCOPED_TRACE(c.expr + " knobs=" + c.knobs);
    CompiledProgram p = compile_sm90a(c.expr, c.knobs);
    CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a", "test_small_tiles_compile.cu");
    ASSERT_GT(r.cubin.size(), 0u) << r.log;
    if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache skipped ptxas' report";
    nvrtc_check::expect_no_spills(p, r);
  }
}

TEST(SmallTilesCompile, TwoByFourClusterIsOneLaunchWithRankDependentMulticast) {
  CompiledProgram p =
      compile_sm90a("matmul(A[128,16384]:bf16, B[16384,128]:bf16)", small_tile::skinny(11));
  ASSERT_EQ(p.state.kernel.kernels.size(), 1u);
  const KernelOp& k = p.state.kernel.kernels[0];
  EXPECT_EQ(k.cluster[0], 8);
  // 2 x 4 tiles of 64 x 32 per cluster, one cluster per split.
  EXPECT_EQ(k.grid[0].const_value() * k.grid[1].const_value() * k.grid[2].const_value(), 88);
  EXPECT_NE(p.cuda.find("__cluster_dims__(8, 1, 1)"), std::string::npos) << p.cuda;
  // A's row of CTAs and B's column: masks that depend on the rank digits.
  EXPECT_NE(p.cuda.find("(unsigned short)((m_cta == 0)"), std::string::npos) << p.cuda;
  EXPECT_NE(p.cuda.find("(unsigned short)((n_cta == 0)"), std::string::npos) << p.cuda;
  EXPECT_EQ(p.cuda.find("atomicAdd"), std::string::npos) << p.cuda;
}

}  // namespace
}  // namespace loom
