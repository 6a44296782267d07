// Stream-K (STREAM_K=1, t:048) through NVRTC for sm_90a, no GPU needed: the default
// large-tile kernel (128 x 256 tiles in 2-CTA clusters, the streamed TMA-store epilogue)
// of the shape whose 13.58 waves on H100's 132 SMs stream-K balances compiles with no
// spills and no stack, its split tiles arriving per consumer warpgroup.
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

TEST(StreamKCompile, TheDefaultLargeTileKernelCompilesForSm90aWithoutSpills) {
  // The shape whose 13.58 waves stream-K is for, with the sm_90a defaults (128 x 256 tiles
  // in 2-CTA clusters, the streamed TMA-store epilogue) on H100's 132 SMs.
  CompileOptions opt;
  opt.target.sm_count = 132;
  opt.knobs = Knobs::parse("STREAM_K=1");
  const CompiledProgram c =
      compile_expression("matmul(A[4096,4096]:bf16, B[4096,14336]:bf16)", opt);
  EXPECT_NE(c.cuda.find("loom::tile_arrive_group("), std::string::npos);
  EXPECT_NE(c.cuda.find("wgmma_m64n256k16"), std::string::npos);
  const CompileResult r = nvrtc(c);
  ASSERT_GT(r.cubin.size(), 0u) << r.log;
  if (r.log.find("ptxas info") == std::string::npos)
    GTEST_SKIP() << "NVRTC's cache skipped ptxas' report (set CUDA_CACHE_DISABLE=1)";
  for (const auto& [name, rep] : r.resources) {
    EXPECT_EQ(rep.spill_store_bytes, 0) << name;
    EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    EXPECT_EQ(rep.stack_frame_bytes, 0) << name;
  }
}

}  // namespace
}  // namespace loom
