// NVRTC (sm_90a, no GPU needed) compiles every case of the GPU test of wgmma on slabs the
// threads fill (tests/gpu/wgmma_cp_async_cases.h) without spills, with the cp.async and
// proxy-fence wrappers, a 1024-byte aligned shared buffer (checked at run time) and no TMA,
// so a GPU run is left with the numerics alone.
#include <gtest/gtest.h>

#include "driver/compile.h"
#include "nvrtc_check.h"

#include "../../gpu/wgmma_cp_async_cases.h"

namespace loom {
namespace {

TEST(WgmmaCpAsyncCompile, EveryGpuCaseCompilesWithoutSpills) {
  for (const wgmma_cp_async_test::Case& c : wgmma_cp_async_test::cases()) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(c.expr, opt);
    EXPECT_NE(p.cuda.find("wgmma"), std::string::npos);
    EXPECT_EQ(p.cuda.find("tma_load"), std::string::npos);
    EXPECT_NE(p.cuda.find("fence_proxy_async_shared"), std::string::npos);
    // No tensor map, but swizzled slabs the descriptors read: the buffer must start on
    // the 1024-byte repeat of the 128B pattern, or the hardware's XOR (on address bits)
    // and Loom's (on tensor offsets) disagree.
    EXPECT_NE(p.cuda.find("__align__(1024)"), std::string::npos);
    EXPECT_NE(p.cuda.find("require_smem_aligned_1024(loom_smem)"), std::string::npos);
    CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a");
    ASSERT_FALSE(r.cubin.empty()) << r.log;
    if (r.resources.empty()) GTEST_SKIP() << "NVRTC left no ptxas report:\n" << r.log;
    nvrtc_check::expect_no_spills(p, r);
  }
}

// The threads write a chunked slab where the interpreter (TensorDecl::physical) and the
// descriptors read it: 4096x4095 bf16's B slab is [32][128] in two 64-column chunks of
// 32 x 64, so column c of row r lands at c / 64 * 2048 + r * 64 + c % 64 (then the
// swizzle). Before codegen permuted thread accesses, the stores went to r * 128 + c.
// The realigned copy's 16-byte stores (REALIGN=1, the default here) go through the same
// placement: each thread's 8 columns c8*8.. land in chunk c8*8 / 64.
TEST(WgmmaCpAsyncCompile, ThreadStoresFollowTheChunkedLayout) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  opt.knobs = Knobs::parse("REALIGN=0");
  const CompiledProgram p = compile_expression("matmul(A[4096,4096]:bf16, B[4096,4095]:bf16)", opt);
  ASSERT_EQ(p.state.kernel.tensor("B_s").row_chunk, 64);
  const size_t store = p.cuda.find("loom::st_bf16(&loom_t_B_s[");
  ASSERT_NE(store, std::string::npos) << p.cuda;
  const std::string line = p.cuda.substr(store, p.cuda.find('\n', store) - store);
  EXPECT_NE(line.find("% 128 / 64 * 2048"), std::string::npos) << line;  // the column's chunk
  EXPECT_EQ(line.find("B_s_e / 128 * 128 + B_s_e % 128"), std::string::npos) << line;

  opt.knobs = Knobs();
  const CompiledProgram r = compile_expression("matmul(A[4096,4096]:bf16, B[4096,4095]:bf16)", opt);
  EXPECT_EQ(r.cuda.find("loom::st_bf16(&loom_t_B_s["), std::string::npos);
  const size_t realigned = r.cuda.find("loom::st_realign16(&loom_t_B_s[");
  ASSERT_NE(realigned, std::string::npos) << r.cuda;
  const std::string rline = r.cuda.substr(realigned, r.cuda.find('\n', realigned) - realigned);
  EXPECT_NE(rline.find("B_s_e % 16 * 8 / 64 * 2048"), std::string::npos) << rline;
  EXPECT_NE(r.cuda.find("loom::ld_chunks16(&B_s_v["), std::string::npos);
}

}  // namespace
}  // namespace loom
