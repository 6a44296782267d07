// The consumer mainloop's instruction diet, checked on the generated source and through
// NVRTC for sm_90a (no GPU needed): in a warp-specialized kernel the role arms and the
// warpgroup index are read through loom::warp_uniform (a shfl from lane 0), so ptxas may
// keep the mainloop's warp-uniform values — ring slot, parity, wgmma descriptors — in
// uniform registers (SASS: no R2UR before each HGMMA), and every wgmma descriptor is the
// shared tensor's base descriptor advanced by the operand's offset in 16-byte units
// (one add, no per-wgmma mask/shift/or). scripts/sass-loops.py counts the resulting SASS
// per k-step (docs/architecture.md, "Code generation").
#include <gtest/gtest.h>

#include <regex>

#include "driver/compile.h"
#include "nvrtc_check.h"

namespace loom {
namespace {

CompiledProgram compile_default(const std::string& expr, const std::string& knobs = "") {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  opt.knobs = Knobs::parse(knobs);
  return compile_expression(expr, opt);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(MainloopDiet, IssueSixDefaultsBranchOnUniformWarpIndicesWithoutSpills) {
  for (const char* expr : {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)",
                           "matmul(A[8192,1024]:bf16, B[1024,8192]:bf16)",
                           "matmul(A[4096,16384]:f16, B[16384,4096]:f16)"}) {
    SCOPED_TRACE(expr);
    CompiledProgram p = compile_default(expr);
    // Two consumer warpgroups (warps 0-7), the producer warpgroup after them.
    EXPECT_NE(p.cuda.find("if (8 <= loom::warp_uniform(threadIdx.x / 32)) {"), std::string::npos)
        << p.cuda;
    EXPECT_NE(p.cuda.find("if (loom::warp_uniform(threadIdx.x / 32) < 8) {"), std::string::npos);
    EXPECT_NE(p.cuda.find("const int m_w = loom::warp_uniform(threadIdx.x / 128);"),
              std::string::npos);
    EXPECT_EQ(p.cuda.find("threadIdx.x < 256"), std::string::npos);
    // Both operands of the one wgmma of the k-step: base descriptor + offset.
    EXPECT_EQ(count(p.cuda, "loom::wgmma_desc_add(loom::wgmma_desc(loom_t_A_s, 16, 1024, 1), "), 1u);
    EXPECT_EQ(count(p.cuda, "loom::wgmma_desc_add(loom::wgmma_desc(loom_t_B_s, "), 1u);
    EXPECT_EQ(p.cuda.find("loom::wgmma_desc(&"), std::string::npos);
    CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a");
    ASSERT_GT(r.cubin.size(), 0u) << r.log;
    if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache skipped ptxas' report";
    nvrtc_check::expect_no_spills(p, r);
  }
}

// The A offset is a sum of multiples of 8 elements (16 bytes of bf16): it is divided
// term by term, so the k_i-th wgmma's descriptor differs from the first by a constant.
TEST(MainloopDiet, DescriptorOffsetsAreSixteenByteUnitsWhereTheTermsAllow) {
  CompiledProgram p = compile_default("matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)");
  const std::regex a(R"(wgmma_desc\(loom_t_A_s, 16, 1024, 1\), unsigned\(([^;]*?)\)\))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(p.cuda, m, a)) << p.cuda;
  EXPECT_NE(m[1].str().find("k_i * 2"), std::string::npos) << m[1];
  EXPECT_EQ(m[1].str().find(">>"), std::string::npos) << m[1];
}

TEST(MainloopDiet, KernelsWithoutSpecializationKeepThreadIndexConditions) {
  // The single-role TMA kernel and an sm_80 mma.sync kernel: no shfl is added.
  CompiledProgram tma =
      compile_default("matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)",
                      "WARP_SPECIALIZE=0,PERSISTENT=0,CLUSTER_M=1,EPILOGUE=direct");
  EXPECT_EQ(tma.cuda.find("warp_uniform"), std::string::npos);
  EXPECT_NE(tma.cuda.find("loom::wgmma_desc_add(loom::wgmma_desc(loom_t_A_s"), std::string::npos);
  CompileOptions opt;
  opt.target = Target::for_arch("sm_80");
  CompiledProgram mma = compile_expression("matmul(A[1024,1024]:f16, B[1024,1024]:f16)", opt);
  EXPECT_EQ(mma.cuda.find("warp_uniform"), std::string::npos);
}

// Ping-pong: an arm per consumer warpgroup, each a range of whole warps.
TEST(MainloopDiet, PingPongArmsAreWarpRanges) {
  CompiledProgram p = compile_default(
      "matmul(A[8192,1024]:bf16, B[1024,8192]:bf16)",
      "ATOM=wgmma_bf16,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,EPILOGUE=direct,"
      "WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong,WM=2,WN=1");
  EXPECT_NE(p.cuda.find("if (loom::warp_uniform(threadIdx.x / 32) < 4) {"), std::string::npos)
      << p.cuda;
  EXPECT_NE(p.cuda.find("if (4 <= loom::warp_uniform(threadIdx.x / 32) && "
                        "loom::warp_uniform(threadIdx.x / 32) < 8) {"),
            std::string::npos);
  CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a");
  ASSERT_GT(r.cubin.size(), 0u) << r.log;
  if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache skipped ptxas' report";
  nvrtc_check::expect_no_spills(p, r);
}

}  // namespace
}  // namespace loom
