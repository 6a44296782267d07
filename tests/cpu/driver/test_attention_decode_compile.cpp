// Every kernel of the GPU decode cases (tests/gpu/attention_decode_cases.h: SPLIT_KV's
// split kernel and combine, GQA_PACK's packed rows) compiles with NVRTC for sm_80 and
// sm_90a, and ptxas spills nothing.
#include <gtest/gtest.h>

#include <iostream>

#include "driver/compile.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "nvrtc_check.h"

#include "../../gpu/attention_decode_cases.h"

namespace loom {
namespace {

TEST(AttentionDecodeCompile, EveryCaseBothArchs) {
  for (const char* arch : {"sm_90a", "sm_80"})
    for (const auto& c : attention_test::decode_cases()) {
      // KV_COPY=tma is sm_90's (TMA); sm_80 refuses it (AttentionDecode.KvCopyTmaErrors).
      if (c.knobs.find("KV_COPY=tma") != std::string::npos && std::string(arch) == "sm_80")
        continue;
      SCOPED_TRACE(c.expr + " knobs " + c.knobs + " " + arch);
      CompileOptions opt;
      opt.knobs = Knobs::parse(c.knobs);
      opt.target = Target::for_arch(arch);
      CompiledProgram p = compile_expression(c.expr, opt);
      ASSERT_EQ(p.state.used_knobs.at("ATTN_MMA"), "mma_sync");
      CompileResult r;
      try {
        r = nvrtc_check::compile_source(p.cuda, arch, "attention_decode.cu");
      } catch (const Error& e) {
        FAIL() << e.what() << "\n" << p.cuda;
      }
      if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache left no ptxas report";
      nvrtc_check::expect_no_spills(p, r);
    }
}

// The split kernel's parts: the split's Lets, the f32 partial stores, the combine kernel
// (a programmatic dependent on sm_90a), and GQA_PACK's per-row heads in Q's copy.
TEST(AttentionDecodeCompile, SourceHasBothKernels) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  opt.knobs = Knobs::parse("SPLIT_WARPS=1");  // one group: the combine kernel by default
  CompiledProgram p = compile_expression(
      attention_test::expr(1, 32, 8, 1, 8192, 128, "true", "bf16", true), opt);
  for (const char* part : {"k_attention(", "k_attention_combine(", "griddepcontrol",
                           "attn_part_o", "attn_part_lse"})
    EXPECT_NE(p.cuda.find(part), std::string::npos) << part << "\n" << p.cuda;
  EXPECT_EQ(p.state.used_knobs.at("GQA_PACK"), "1");
  EXPECT_EQ(p.state.used_knobs.at("BLOCK_M"), "16");
  EXPECT_NE(p.state.used_knobs.at("SPLIT_KV"), "1");
}

// COMBINE=last_cta is one kernel ending in a tile arrival on the row sets' counters (no
// combine kernel, no programmatic dependent); SPLIT_WARPS=4 makes the one-warp CTA four
// warps. Both are the default there (B = 1, Hkv = 8, 8k keys); at 1k keys (one-block
// splits) one group and the combine kernel.
TEST(AttentionDecodeCompile, LastCtaAndSplitWarpsSource) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  const std::string e = attention_test::expr(1, 32, 8, 1, 8192, 128, "false", "bf16", true);
  opt.knobs = Knobs::parse("COMBINE=last_cta,SPLIT_WARPS=4");
  CompiledProgram p = compile_expression(e, opt);
  ASSERT_EQ(p.state.kernel.kernels.size(), 1u);
  EXPECT_EQ(p.state.kernel.kernels[0].block_threads, 128);
  for (const char* part : {"loom::tile_arrive_block(", "attn_split_count", "attn_part_o"})
    EXPECT_NE(p.cuda.find(part), std::string::npos) << part << "\n" << p.cuda;
  for (const char* part : {"k_attention_combine(", "griddepcontrol"})
    EXPECT_EQ(p.cuda.find(part), std::string::npos) << part;
  EXPECT_EQ(p.state.used_knobs.at("COMBINE"), "last_cta");
  EXPECT_EQ(p.state.used_knobs.at("SPLIT_WARPS"), "4");
  opt.knobs = Knobs();
  CompiledProgram d = compile_expression(e, opt);
  EXPECT_EQ(d.state.used_knobs.at("COMBINE"), "last_cta");
  EXPECT_EQ(d.state.used_knobs.at("SPLIT_WARPS"), "4");
  EXPECT_EQ(d.state.kernel.kernels.size(), 1u);
  CompiledProgram k = compile_expression(
      attention_test::expr(1, 32, 8, 1, 1024, 128, "false", "bf16", true), opt);
  EXPECT_EQ(k.state.used_knobs.at("COMBINE"), "kernel");
  EXPECT_EQ(k.state.used_knobs.at("SPLIT_WARPS"), "1");
  EXPECT_EQ(k.state.kernel.kernels.size(), 2u);
}

// KV_COPY=tma: K and V come by 4-D tensor-map loads completing on mbarriers, which the
// key loop waits on; the one cp.async wait left is Q's, before the loop (the default form
// waits on cp.async groups at the loop's two waits and after it).
TEST(AttentionDecodeCompile, KvCopyTmaSource) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  opt.knobs = Knobs::parse("KV_COPY=tma");
  CompiledProgram p = compile_expression(
      attention_test::expr(1, 32, 8, 1, 8192, 128, "false", "bf16", true), opt);
  const KernelOp& k = p.state.kernel.kernels[0];
  ASSERT_EQ(k.tma.size(), 2u);
  EXPECT_EQ(k.mbarriers, 2 * 4 * 3);  // K and V, four groups' rings of 3 (the defaults)
  for (const char* part : {"cp_async_bulk_tensor_4d_global_to_shared(", "_K_s_tmap",
                           "_V_s_tmap", "mbarrier_wait_parity_shared_b64(",
                           "mbarrier_arrive_expect_tx_shared_b64("})
    EXPECT_NE(p.cuda.find(part), std::string::npos) << part << "\n" << p.cuda;
  size_t waits = 0;
  for (size_t at = p.cuda.find("cp_async_wait"); at != std::string::npos;
       at = p.cuda.find("cp_async_wait", at + 1))
    ++waits;
  EXPECT_EQ(waits, 1u) << p.cuda;
  EXPECT_EQ(p.state.used_knobs.at("KV_COPY"), "tma");
}

}  // namespace
}  // namespace loom
