// Ping-pong consumer warpgroups (CONSUMERS=pingpong) through NVRTC for sm_90a, no GPU
// needed: the persistent warp-specialized kernels of 64x256 and 128x128 warpgroup tiles,
// with a fused epilogue and in 2-CTA clusters, at the sizes the GPU tests and the ladder
// run, compile with no spills and no stack; the source has an arm per consumer
// warpgroup, each waiting for its turn before its mainloop and handing it on after.
#include <gtest/gtest.h>

#include "codegen/cuda.h"
#include "driver/compile.h"
#include "runtime/nvrtc.h"

namespace loom {
namespace {

CompileResult nvrtc(const CompiledProgram& c) {
  CompileRequest req;
  req.source = c.cuda;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = "sm_90a";
  return compile(req, nullptr);
}

const std::string kRung4 =
    "STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,GROUP_M=8,EPILOGUE=direct,WARP_SPECIALIZE=1,"
    "PERSISTENT=1,CONSUMERS=pingpong,WM=2,WN=1";

TEST(PingPongCompile, KernelsCompileForSm90aWithoutSpills) {
  struct Case { std::string expr, knobs, atom; };
  const std::vector<Case> cases = {
      {"matmul(A[8192,1024]:bf16, B[1024,8192]:bf16)", "ATOM=wgmma_bf16,BN=256," + kRung4,
       "wgmma_m64n256k16"},
      {"matmul(A[8192,1024]:bf16, B[1024,8192]:bf16)", "ATOM=wgmma_bf16,FM=2,BN=128," + kRung4,
       "wgmma_m64n128k16"},
      {"relu(linear(X[1000,512]:bf16, W[3000,512]:bf16, bias[3000]:bf16))",
       "ATOM=wgmma_bf16,FM=2,BN=128," + kRung4, "wgmma_m64n128k16"},
      {"matmul(A[2000,512]:f16, B[512,1496]:f16)", "ATOM=wgmma_f16,BN=256," + kRung4,
       "wgmma_m64n256k16"},
      {"matmul(A[4096,4096]:f16, B[4096,4096]:f16)",
       "ATOM=wgmma_f16,BN=256,CLUSTER_M=2," + kRung4, "wgmma_m64n256k16"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    CompiledProgram p = compile_expression(c.expr, opt);
    EXPECT_NE(p.cuda.find(c.atom), std::string::npos);
    // The arms split by warp index, read warp-uniformly (codegen, test_mainloop_diet).
    EXPECT_NE(p.cuda.find("if (loom::warp_uniform(threadIdx.x / 32) < 4) {"), std::string::npos);
    EXPECT_NE(p.cuda.find("if (4 <= loom::warp_uniform(threadIdx.x / 32) && "
                          "loom::warp_uniform(threadIdx.x / 32) < 8) {"),
              std::string::npos);
    EXPECT_EQ(p.state.kernel.kernels.at(0).block_threads, 384);
    CompileResult r = nvrtc(p);
    ASSERT_GT(r.cubin.size(), 0u) << r.log;
    if (r.log.find("ptxas info") == std::string::npos)
      GTEST_SKIP() << "NVRTC's cache skipped ptxas' report (set CUDA_CACHE_DISABLE=1)";
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
      EXPECT_EQ(rep.stack_frame_bytes, 0) << name;
    }
  }
}

}  // namespace
}  // namespace loom
