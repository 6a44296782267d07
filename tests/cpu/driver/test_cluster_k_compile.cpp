// CLUSTER_K compiles with NVRTC for sm_90a (no GPU needed): every case of the GPU test
// (tests/gpu/cluster_k_cases.h), ptxas reporting no spills, one cluster kernel that reads
// its peers' shared memory through mapa + ld.shared::cluster.
#include <gtest/gtest.h>

#include "driver/compile.h"
#include "frontend/parser.h"
#include "nvrtc_check.h"

#include "../../gpu/cluster_k_cases.h"

namespace loom {
namespace {

TEST(ClusterKCompile, EveryGpuCaseCompilesWithoutSpills) {
  for (const auto& c : cluster_k::cases()) {
    SCOPED_TRACE(c.expr + " knobs=" + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    CompiledProgram p = compile_expression(c.expr, opt);
    CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a", "test_cluster_k_compile.cu");
    ASSERT_GT(r.cubin.size(), 0u) << r.log;
    if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache skipped ptxas' report";
    nvrtc_check::expect_no_spills(p, r);
  }
}

TEST(ClusterKCompile, OneClusterKernelStoringIntoItsPeers) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  opt.knobs = Knobs::parse(cluster_k::kWs + ",CLUSTER_K=8");
  CompiledProgram p = compile_expression("matmul(A[128,16384]:bf16, B[16384,128]:bf16)", opt);
  ASSERT_EQ(p.state.kernel.kernels.size(), 1u);
  EXPECT_EQ(p.state.kernel.kernels[0].cluster[0], 8);
  EXPECT_NE(p.cuda.find("__cluster_dims__(8, 1, 1)"), std::string::npos) << p.cuda;
  // The partial slices go to their owners by st.async (vectors of 2), counted on the
  // exchange mbarrier; one relaxed cluster barrier, no release-ordered one (MEMBAR.GPU).
  EXPECT_NE(p.cuda.find("loom::st_async_v2_f32("), std::string::npos) << p.cuda;
  EXPECT_NE(p.cuda.find("loom::cluster_arrive_relaxed();"), std::string::npos) << p.cuda;
  EXPECT_EQ(p.cuda.find("loom::cluster_arrive();"), std::string::npos) << p.cuda;
  EXPECT_EQ(p.cuda.find("loom::ld_shared_cluster_f32("), std::string::npos) << p.cuda;
  EXPECT_EQ(p.cuda.find("atomicAdd"), std::string::npos) << p.cuda;
}

}  // namespace
}  // namespace loom
