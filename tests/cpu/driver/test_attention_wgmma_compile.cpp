// Every kernel of the GPU wgmma attention cases (tests/gpu/attention_wgmma_cases.h) and the
// benchmark's shapes compile with NVRTC for sm_90a under ATTN_MMA=wgmma, and ptxas spills
// nothing (attention_wgmma_tiles() counts the accumulators). The source carries the
// kernel's parts: TMA tile loads and mbarrier waits, the ss wgmma for S, the rs wgmma for
// P V with P packed from S's f32 accumulators, the quad shuffles and ex2.approx.
#include <gtest/gtest.h>

#include <iostream>

#include "driver/compile.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "nvrtc_check.h"

#include "../../gpu/attention_wgmma_cases.h"

namespace loom {
namespace {

CompiledProgram compile_for(const std::string& expr, const std::string& knobs) {
  CompileOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.target = Target::for_arch("sm_90a");
  return compile_expression(expr, opt);
}

void expect_compiles(const std::string& expr, const std::string& knobs) {
  SCOPED_TRACE(expr + " knobs " + knobs);
  CompiledProgram p = compile_for(expr, knobs);
  CompileResult r;
  try {
    r = nvrtc_check::compile_source(p.cuda, "sm_90a", "attention_wgmma.cu");
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << p.cuda;
  }
  if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache left no ptxas report";
  nvrtc_check::expect_no_spills(p, r);
  for (const auto& [name, res] : r.resources)
    std::cout << "[ ptxas    ] sm_90a " << knobs << " " << expr << ": " << res.registers
              << " registers, " << res.stack_frame_bytes << " B stack\n";
}

TEST(AttentionWgmmaCompile, Source) {
  const std::string e = attention_test::expr(2, 8, 2, 1000, 1000, 128, "true", "bf16", true);
  const std::string cu = compile_for(e, "ATTN_MMA=wgmma").cuda;
  for (const char* part : {"loom::wgmma_m64n128k16_f32_bf16_ss<0, 0>(reinterpret_cast<float (&)[64]>(s_acc), ",
                           "loom::wgmma_m64n128k16_f32_bf16_rs<1>(o_acc, a_,",
                           "loom::pack_bf16x2(s_acc[kk][0][0], s_acc[kk][0][1])",
                           "loom::lane_reduce_max<4>(", "loom::ex2_approx_ftz(",
                           "Q_s_tmap", "K_s_tmap", "V_s_tmap"})
    EXPECT_NE(cu.find(part), std::string::npos) << part << "\n" << cu;
  EXPECT_EQ(cu.find("ldmatrix"), std::string::npos) << cu;
}

// The benchmark's shapes (docs/benchmarking.md: 16k tokens, 2048/D heads), D = 64 and 128,
// both masks, the default tiling and its knob variants; D = 192 and 256.
TEST(AttentionWgmmaCompile, BenchmarkShapesAndKnobs) {
  for (int d : {64, 128})
    for (const char* causal : {"false", "true"})
      for (const char* knobs : {"ATTN_MMA=wgmma", "ATTN_MMA=wgmma,ATTN_WG=1",
                                "ATTN_MMA=wgmma,ATTN_WG=3", "ATTN_MMA=wgmma,BLOCK_N=64",
                                "ATTN_MMA=wgmma,BLOCK_N=176", "ATTN_MMA=wgmma,ATTN_PRODUCER=1",
                                "ATTN_MMA=wgmma,KV_STAGES=3,BLOCK_N=112",
                                "ATTN_PRODUCER=1,ATTN_OVERLAP=1",
                                "ATTN_PRODUCER=1,ATTN_OVERLAP=1,KV_STAGES=3"})
        expect_compiles(attention_test::expr(4, 2048 / d, 2048 / d, 4096, 4096, d, causal, "bf16",
                                             false),
                        knobs);
  for (int d : {192, 256})
    for (const char* knobs : {"ATTN_MMA=wgmma", "ATTN_PRODUCER=1",
                              "ATTN_PRODUCER=1,ATTN_OVERLAP=1"})  // BLOCK_N 64, 64, 32
      expect_compiles(attention_test::expr(1, 8, 8, 4096, 4096, d, "true", "bf16", true), knobs);
}

TEST(AttentionWgmmaCompile, GpuCases) {
  for (const auto& c : attention_test::wgmma_cases()) expect_compiles(c.expr, c.knobs);
}

}  // namespace
}  // namespace loom
