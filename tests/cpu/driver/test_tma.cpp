// STAGE=tma kernels compile with NVRTC for sm_90a (no GPU needed): tensor maps arrive as
// `const __grid_constant__ loom_tensor_map` parameters, the mbarriers follow the shared
// tensors, and ptxas accepts the bulk tensor copies and mbarrier waits. For sm_80 the
// knob is an error that names the target.
#include <gtest/gtest.h>

#include "codegen/cuda.h"
#include "driver/compile.h"
#include "ir/error.h"
#include "runtime/nvrtc.h"

namespace loom {
namespace {

CompiledProgram compile_tma(const std::string& expr, const std::string& knobs,
                            const std::string& arch = "sm_90a") {
  CompileOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.target = Target::for_arch(arch);
  return compile_expression(expr, opt);
}

CompileResult nvrtc(const CompiledProgram& c) {
  CompileRequest req;
  req.source = c.cuda;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = "sm_90a";
  return compile(req, nullptr);
}

TEST(TmaCompile, NvrtcCompilesTmaKernelsForSm90a) {
  const std::string big = "BM=128,BN=128,FM=8,FN=8,BK=8,STAGE=tma";
  struct Case { std::string expr, knobs; };
  std::vector<Case> cases = {
      {"matmul(A[4096,4096]:f32, B[4096,4096]:f32)", big + ",STAGES=1,PIPELINE=0"},
      {"matmul(A[4096,4096]:f32, B[4096,4096]:f32)", big + ",STAGES=3,PIPELINE=1"},
      {"matmul(A[1000,776]:f32, B[776,3000]:f32)", big + ",STAGES=2,PIPELINE=1"},
      {"bmm(A[4,100,72]:f16, B[4,72,40]:f16)", "BM=32,BN=32,FM=2,FN=2,BK=8,STAGE=tma,STAGES=2"},
      {"relu(matmul(A[M,K]:bf16, B[N,K]:bf16.T))", "BM=64,BN=64,FM=4,FN=4,BK=64,STAGE=tma,"
                                                   "SWIZZLE=128B,STAGES=2"},
      {"matmul(A[256,256]:tf32, B[256,256]:tf32.T)", "BM=64,BN=64,FM=4,FN=4,BK=32,STAGE=tma,"
                                                     "SWIZZLE=128B,STAGES=4"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expr + " knobs=" + c.knobs);
    CompiledProgram p = compile_tma(c.expr, c.knobs);
    EXPECT_NE(p.cuda.find("const __grid_constant__ loom_tensor_map loom_m_A_s_tmap"), std::string::npos)
        << p.cuda;
    EXPECT_NE(p.cuda.find("loom::mbarrier_wait_parity_shared_b64"), std::string::npos);
    EXPECT_NE(p.cuda.find("__align__(1024)"), std::string::npos);
    EXPECT_EQ(p.cuda.find("require_smem_aligned_1024") != std::string::npos,
              c.knobs.find("SWIZZLE=128B") != std::string::npos);
    CompileResult r = nvrtc(p);
    EXPECT_GT(r.cubin.size(), 1000u) << r.log;
    for (const auto& k : p.state.kernel.kernels) {
      ASSERT_TRUE(r.resources.count(k.name)) << r.log;
      EXPECT_EQ(r.resources.at(k.name).spill_store_bytes, 0) << c.knobs;
    }
  }
}

TEST(TmaCompile, Sm80HasNoTma) {
  try {
    compile_tma("matmul(A[64,64]:f32, B[64,64]:f32)", "STAGE=tma", "sm_80");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("STAGE=tma needs sm_90 or newer (the TMA copy engine); "
                                         "the target is sm_80: use STAGE=cp_async"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace loom
