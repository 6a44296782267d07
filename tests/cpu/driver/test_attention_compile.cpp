// Every kernel of the GPU attention cases (tests/gpu/attention_cases.h), the brief's
// headline shape and head dim 256 compile with NVRTC for sm_80 and sm_90a, and ptxas spills nothing: the
// register budget attention_tiles() checks (O, S/P and Q fragments) holds in practice.
// The kernel's source carries its parts: ldmatrix.x4 for Q and K, .trans for V, the quad
// shuffles, ex2.approx, and P packed from its f32 accumulators at the P·V mma.
#include <gtest/gtest.h>

#include <iostream>

#include "driver/compile.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "nvrtc_check.h"

#include "../../gpu/attention_cases.h"

namespace loom {
namespace {

CompiledProgram compile_for(const std::string& expr, const std::string& knobs,
                            const std::string& arch) {
  CompileOptions opt;
  opt.knobs = Knobs::parse(attention_test::mma_sync(knobs));  // k:012's kernel
  opt.target = Target::for_arch(arch);
  return compile_expression(expr, opt);
}

void expect_compiles(const std::string& expr, const std::string& knobs, const std::string& arch) {
  SCOPED_TRACE(expr + " knobs " + knobs + " " + arch);
  CompiledProgram p = compile_for(expr, knobs, arch);
  CompileResult r;
  try {
    r = nvrtc_check::compile_source(p.cuda, arch, "attention.cu");
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << p.cuda;
  }
  if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache left no ptxas report";
  nvrtc_check::expect_no_spills(p, r);
  // The register count, for whoever sizes blocks (attention_tiles() estimates it).
  for (const auto& [name, res] : r.resources)
    std::cout << "[ ptxas    ] " << arch << " " << knobs << " " << expr << ": " << res.registers
              << " registers, " << res.stack_frame_bytes << " B stack\n";
}

const char* const kHeadline =
    "attention(Q[2,8,1000,128]:bf16, K[2,2,1000,128]:bf16, V[2,2,1000,128]:bf16, causal=true)";

TEST(AttentionCompile, HeadlineShapeSource) {
  CompiledProgram p = compile_for(kHeadline, "", "sm_90a");
  const std::string& cu = p.cuda;
  for (const char* part : {"loom::ldmatrix_x4(", "loom::ldmatrix_x4_trans(",
                           "loom::lane_reduce_max<4>(", "loom::lane_reduce_add<4>(",
                           "loom::ex2_approx_ftz(", "loom::pack_bf16x2(s_acc[",
                           "loom::mma_m16n8k16_f32_bf16(", "loom::cp_async"})
    EXPECT_NE(cu.find(part), std::string::npos) << part << "\n" << cu;
}

TEST(AttentionCompile, HeadlineShapeBothArchs) {
  for (const char* arch : {"sm_80", "sm_90a"})
    for (const char* knobs : {"", "BLOCK_M=128,WARPS=8", "BLOCK_M=64,BLOCK_N=32",
                              "BLOCK_M=128,BLOCK_N=128,WARPS=8"})
      expect_compiles(kHeadline, knobs, arch);
}

// The ladder's knob sets (docs/attention.md, "The articles' ladder as knobs") on the
// benchmark's shapes, D = 64 and 128, causal and not: what `loom ladder flash` and the
// A/B runs compile.
TEST(AttentionCompile, LadderKnobSets) {
  const char* const sets[] = {
      "SWIZZLE=none,KV_STAGES=1,INTERLEAVE_LOADS=0,BLOCK_N=32,SOFTMAX=exp,ZERO_INIT=init",
      "KV_STAGES=1,INTERLEAVE_LOADS=0,BLOCK_N=32,SOFTMAX=exp,ZERO_INIT=init",
      "INTERLEAVE_LOADS=0,BLOCK_N=32,SOFTMAX=exp,ZERO_INIT=init",
      "SOFTMAX=exp,ZERO_INIT=init",
      "FRAG_BUFFERS=2,SOFTMAX=exp,ZERO_INIT=init",
      "FRAG_BUFFERS=2",
      "SOFTMAX=exp",
      "ZERO_INIT=init",
      "STAGE_OUTPUT=1",
      "INTERLEAVE_LOADS=0,BLOCK_N=32",
  };
  for (int d : {64, 128})
    for (const char* causal : {"false", "true"})
      for (const char* knobs : sets)
        for (const char* arch : {"sm_80", "sm_90a"})
          expect_compiles(attention_test::expr(1, 16, 16, 4096, 4096, d, causal, "bf16", false),
                          knobs, arch);
  // Q re-read and double-buffered with K, two row atoms per warp (refused at D = 128 with
  // BLOCK_N = 32: attention_tiles() counts the second Q set, which spilled there).
  for (const char* arch : {"sm_80", "sm_90a"})
    expect_compiles(attention_test::expr(1, 16, 16, 4096, 4096, 64, "true", "bf16", false),
                    "FRAG_BUFFERS=2,Q_IN_REGS=0,BLOCK_M=128,WARPS=4,BLOCK_N=32", arch);
}

TEST(AttentionCompile, HeadDim256) {
  const std::string e = attention_test::expr(1, 4, 4, 1000, 1000, 256, "true", "bf16", true);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    expect_compiles(e, "", arch);  // BLOCK_N = 16, the default at D = 256
    expect_compiles(e, "SWIZZLE=none,BLOCK_N=16", arch);
  }
}

TEST(AttentionCompile, GpuCasesBothArchs) {
  for (const auto& c : attention_test::cases())
    for (const char* arch : {"sm_80", "sm_90a"}) expect_compiles(c.expr, c.knobs, arch);
}

}  // namespace
}  // namespace loom
