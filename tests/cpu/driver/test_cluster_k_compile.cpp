// CLUSTER_K compiles with NVRTC for sm_90a (no GPU needed): every case of the GPU test
// (tests/gpu/cluster_k_cases.h), ptxas reporting no spills, one cluster kernel that reads
// its peers' shared memory through mapa + ld.shared::cluster.
#include <gtest/gtest.h>

#include "codegen/cuda.h"
#include "driver/compile.h"
#include "frontend/parser.h"
#include "runtime/nvrtc.h"

#include "../../gpu/cluster_k_cases.h"

namespace loom {
namespace {

CompileResult nvrtc(const std::string& source) {
  CompileRequest req;
  req.name = "test_cluster_k_compile.cu";
  req.source = source;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = "sm_90a";
  return compile(req, nullptr);
}

TEST(ClusterKCompile, EveryGpuCaseCompilesWithoutSpills) {
  for (const auto& c : cluster_k::cases()) {
    SCOPED_TRACE(c.expr + " knobs=" + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    CompiledProgram p = compile_expression(c.expr, opt);
    CompileResult r = nvrtc(p.cuda);
    ASSERT_GT(r.cubin.size(), 0u) << r.log;
    if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache skipped ptxas' report";
    for (const auto& k : p.state.kernel.kernels) {
      ASSERT_TRUE(r.resources.count(k.name)) << r.log;
      EXPECT_EQ(r.resources.at(k.name).spill_store_bytes, 0) << k.name;
      EXPECT_EQ(r.resources.at(k.name).spill_load_bytes, 0) << k.name;
    }
  }
}

TEST(ClusterKCompile, OneClusterKernelReadingItsPeers) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  opt.knobs = Knobs::parse(cluster_k::kWs + ",CLUSTER_K=8");
  CompiledProgram p = compile_expression("matmul(A[128,16384]:bf16, B[16384,128]:bf16)", opt);
  ASSERT_EQ(p.state.kernel.kernels.size(), 1u);
  EXPECT_EQ(p.state.kernel.kernels[0].cluster[0], 8);
  EXPECT_NE(p.cuda.find("__cluster_dims__(8, 1, 1)"), std::string::npos) << p.cuda;
  EXPECT_NE(p.cuda.find("loom::ld_shared_cluster_f32("), std::string::npos) << p.cuda;
  EXPECT_EQ(p.cuda.find("atomicAdd"), std::string::npos) << p.cuda;
}

}  // namespace
}  // namespace loom
