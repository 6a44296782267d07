// The batched Hopper GEMM's GPU cases (tests/gpu/wgmma_batched_cases.h: bmm, shared
// operands, rank 4, in both dtypes) compile with NVRTC for sm_90a without spills, as wgmma
// kernels that load rank-3/4 boxes (rank 2 for a shared operand) and, persistent, run one
// grid over the (batch, tile) units (no batch on blockIdx.z).
#include <gtest/gtest.h>

#include "driver/compile.h"
#include "nvrtc_check.h"

#include "../../gpu/wgmma_batched_cases.h"

namespace loom {
namespace {

TEST(WgmmaBatchedCompile, GpuCasesCompileWithoutSpills) {
  for (const wgmma_batched_test::Case& c : wgmma_batched_test::cases()) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(c.expr, opt);
    EXPECT_NE(p.cuda.find("wgmma"), std::string::npos);
    const bool rank4 = c.expr.find("matmul(A[2,") == 0 || c.expr.find("matmul(A[8,16,") == 0;
    EXPECT_NE(p.cuda.find(rank4 ? "cp_async_bulk_tensor_4d_global_to_shared"
                                : "cp_async_bulk_tensor_3d_global_to_shared"),
              std::string::npos);
    // A shared operand's map is rank 2.
    if (c.expr.find("W[") != std::string::npos) {
      EXPECT_TRUE(p.cuda.find("cp_async_bulk_tensor_2d_global_to_shared(&loom_t_W_s") !=
                      std::string::npos ||
                  p.cuda.find("tma_load_2d_multicast(&loom_t_W_s") != std::string::npos);
    }
    ASSERT_EQ(p.state.kernel.kernels.size(), 1u);
    const KernelOp& k = p.state.kernel.kernels[0];
    EXPECT_EQ(p.state.used_knobs.at("PERSISTENT"), "1");
    EXPECT_EQ(k.grid[1].const_value() * k.grid[2].const_value(), 1);
    EXPECT_EQ(p.cuda.find("blockIdx.z"), std::string::npos);
    const CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a");
    ASSERT_FALSE(r.resources.empty()) << r.log;
    nvrtc_check::expect_no_spills(p, r);
  }
}

}  // namespace
}  // namespace loom
