// GEMMs with run-time sizes on wgmma, without a GPU: the sm_90a default for a run-time M
// (the large class's persistent schedule, the same knobs a large constant M gets) and
// where it stays SIMT; every case of tests/gpu/wgmma_symbolic_cases.h, kept symbolic,
// compiles with NVRTC for sm_90a without spills, its persistent grid an expression of M;
// stream-K's refusal of a run-time tile count names the fix; a run-time row length TMA
// cannot address is refused at launch naming the knob whose tensor map it is.
#include <gtest/gtest.h>

#include "../../gpu/wgmma_symbolic_cases.h"
#include "driver/compile.h"
#include "driver/executor.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "nvrtc_check.h"

namespace loom {
namespace {

CompiledProgram compile_symbolic(const std::string& expr, const std::string& knobs) {
  CompileOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.target = Target::for_arch("sm_90a");
  return compile_graph(parse_expression(expr), opt, expr);
}

std::string knob(const CompiledProgram& p, const std::string& name) {
  auto it = p.state.used_knobs.find(name);
  return it == p.state.used_knobs.end() ? "" : it->second;
}

TEST(WgmmaSymbolicCompile, RunTimeMGetsTheLargeSchedule) {
  // The knobs of a constant M of 4096 rows (class large), with M a kernel parameter.
  const CompiledProgram sym = compile_symbolic("matmul(A[M,4096]:bf16, B[4096,4096]:bf16)", "");
  const CompiledProgram big = compile_symbolic("matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", "");
  EXPECT_NE(sym.knob_source.find("class symbolic, wgmma schedule"), std::string::npos)
      << sym.knob_source;
  for (const char* k : {"ATOM", "BM", "BN", "BK", "STAGE", "STAGES", "SWIZZLE", "WM", "WN",
                        "GROUP_M", "WARP_SPECIALIZE", "PERSISTENT", "CLUSTER_M", "EPILOGUE",
                        "EPI_BUFFERS", "CONSUMER_REGS"})
    EXPECT_EQ(knob(sym, k), knob(big, k)) << k;
  EXPECT_EQ(knob(sym, "PERSISTENT"), "1");
  EXPECT_EQ(knob(sym, "CLUSTER_M"), "2");
  const KernelOp& k = sym.state.kernel.kernels.at(0);
  EXPECT_FALSE(k.grid[0].is_const()) << "the persistent grid must be sized from M at launch";
  EXPECT_EQ(k.grid[0].eval({{"M", 1}}), 32);  // 16 cluster tiles (256 x 256) of 2 CTAs
  EXPECT_EQ(k.grid[0].eval({{"M", 100000}}), 132);  // 66 clusters of 2 on 132 SMs
  // f16 linear with a fused epilogue: the same schedule.
  const CompiledProgram lin =
      compile_symbolic("silu(linear(X[M,4096]:f16, W[11008,4096]:f16, bias[11008]:f16))", "");
  EXPECT_EQ(knob(lin, "ATOM"), "wgmma_f16");
  EXPECT_EQ(knob(lin, "PERSISTENT"), "1");
}

TEST(WgmmaSymbolicCompile, OtherRunTimeSizesKeepTheSimtClass) {
  // A run-time N or K (row alignment unknown when compiling: TMA needs 16-byte rows), a
  // transposed A (its rows are M), f32, a small N and K, and sm_80 keep ATOM=fma.
  for (const auto& [expr, arch] : std::vector<std::pair<std::string, std::string>>{
           {"matmul(A[M,K]:bf16, B[K,4096]:bf16)", "sm_90a"},
           {"matmul(A[M,4096]:bf16, B[4096,N]:bf16)", "sm_90a"},
           {"matmul(A[4096,M]:bf16.T, B[4096,4096]:bf16)", "sm_90a"},
           {"matmul(A[M,4096]:f32, B[4096,4096]:f32)", "sm_90a"},
           {"matmul(A[M,64]:bf16, B[64,64]:bf16)", "sm_90a"},
           {"matmul(A[M,4096]:bf16, B[4096,4096]:bf16)", "sm_80"}}) {
    SCOPED_TRACE(expr + " " + arch);
    CompileOptions opt;
    opt.target = Target::for_arch(arch);
    const CompiledProgram p = compile_graph(parse_expression(expr), opt, expr);
    EXPECT_EQ(knob(p, "ATOM"), "fma");
    EXPECT_NE(p.knob_source.find("class symbolic"), std::string::npos) << p.knob_source;
  }
}

TEST(WgmmaSymbolicCompile, EveryGpuCaseCompilesWithoutSpills) {
  for (const SymbolicCase& c : symbolic_cases()) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    const CompiledProgram p = compile_symbolic(c.expr, c.knobs);
    EXPECT_NE(p.cuda.find("wgmma"), std::string::npos);
    for (const auto& sym : c.runtime)
      EXPECT_NE(p.cuda.find("loom_d_" + sym), std::string::npos) << sym << " is no parameter";
    const CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a");
    if (r.resources.empty()) continue;  // NVRTC's cache left no report
    nvrtc_check::expect_no_spills(p, r);
  }
}

TEST(WgmmaSymbolicCompile, StreamKRefusesARunTimeTileCount) {
  try {
    compile_symbolic("matmul(A[M,4096]:bf16, B[4096,4096]:bf16)",
                     kSymbolicLarge + ",STREAM_K=1");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("STREAM_K=1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("constant tile count"), std::string::npos) << msg;
    EXPECT_NE(msg.find("STREAM_K=0"), std::string::npos) << msg;
  }
}

// With a run-time N a row's length is first known when the tensor maps are encoded (at
// launch, before any driver call): the output's map is the TMA-store epilogue's.
TEST(WgmmaSymbolicCompile, UnaddressableRunTimeRowsNameTheirKnob) {
  const CompiledProgram p = compile_symbolic(
      "matmul(A[M,K]:bf16, B[K,N]:bf16)",
      "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,EPILOGUE=tma_store");
  const KernelProgram& kp = p.state.kernel;
  ASSERT_EQ(kp.kernels.at(0).tma.size(), 3u);
  const std::map<std::string, int64_t> ragged_n = {{"M", 64}, {"N", 77}, {"K", 64}};
  std::string out_msg, b_msg;
  for (const TmaDescriptor& d : kp.kernels.at(0).tma) {
    if (d.tensor == "A") continue;  // 128-byte rows: it would reach the driver
    try {
      encode_tensor_map(d, kp.tensor(d.tensor), nullptr, ragged_n);
    } catch (const Error& e) {
      (d.tensor == "out" ? out_msg : b_msg) = e.what();
    }
  }
  EXPECT_NE(out_msg.find("EPILOGUE=tma_store needs rows of out"), std::string::npos) << out_msg;
  EXPECT_NE(out_msg.find("EPILOGUE=direct"), std::string::npos) << out_msg;
  EXPECT_NE(b_msg.find("STAGE=tma needs rows of B"), std::string::npos) << b_msg;
}

}  // namespace
}  // namespace loom
