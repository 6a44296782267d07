// k:013_lower_attention_wgmma (ATTN_MMA=wgmma): every pass of an attention program run on
// the CPU interpreter computes what the naive loop form of l:000 computes — O and LSE — for
// the wgmma kernel: head dims 64, 128 and 192, the three masks, Sq != Sk, ragged lengths (17,
// and key counts past one BLOCK_N), GQA and MQA, f16 and bf16, one to three warpgroups.
// The kernel level runs per thread: TMA boxes with their zero fill, mbarrier phases, both
// wgmmas with their asynchrony (a missing fence or wait, or a slot refilled while a wgmma
// reads it, fails here), the quad shuffles and the P repack.
#include <gtest/gtest.h>

#include "attention_exprs.h"
#include "pass_check.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

using attention_test::attention;
using attention_test::kMasks;

// The pipeline pass by pass; the kernel level (k:013's output) interpreted and compared
// with the naive loop form, O and LSE.
void check_wgmma(const std::string& expr, const std::string& knobs, uint64_t seed) {
  SCOPED_TRACE(expr + " knobs=" + knobs);
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse("ATTN_MMA=wgmma" + (knobs.empty() ? "" : "," + knobs));
  s.target = Target::for_arch("sm_90a");
  Bindings inputs, reference;
  const DType out = s.graph.node(s.graph.result()).dtype;
  bool lowered = false;
  for (const auto& p : pipeline()) {
    p.run(s);
    passcheck::verify_level(s, p.to);
    if (reference.tensors.empty() && s.level >= Level::Loop) {
      make_random_inputs(s.loop, inputs, seed);
      reference = inputs;
      interpret(s.loop, reference);
    }
    if (p.id != "k:013_lower_attention_wgmma") continue;
    lowered = true;
    ASSERT_EQ(s.level, Level::Kernel);
    ASSERT_EQ(s.kernel.kernels.size(), 1u);
    EXPECT_EQ(s.kernel.kernels[0].block_threads % 128, 0);
    Bindings got = inputs;
    interpret(s.kernel, got);
    passcheck::expect_outputs_close(s.kernel, got, reference, out, "after " + p.id);
  }
  EXPECT_TRUE(lowered);
}

TEST(AttentionWgmma, HeadDim64MasksAndLengths) {
  const int lengths[][2] = {{17, 17}, {17, 33}, {33, 17}, {1, 33}, {130, 150}};
  uint64_t seed = 100;
  for (const char* causal : kMasks)
    for (auto [sq, sk] : lengths)
      check_wgmma(attention(2, 1, sq, sk, 64, causal), "ATTN_WG=1,BLOCK_N=64", seed++);
}

// Key counts past one BLOCK_N (ring slots reused, mbarrier phases flipping), ragged
// both ways, two warpgroups, GQA 4/2 and f16.
TEST(AttentionWgmma, SeveralKeyBlocksTwoWarpgroups) {
  uint64_t seed = 200;
  for (const char* causal : kMasks) {
    check_wgmma(attention(4, 2, 129, 300, 64, causal, "f16"), "BLOCK_N=64", seed++);
    check_wgmma(attention(2, 2, 200, 77, 64, causal, "bf16", false), "BLOCK_N=32", seed++);
  }
}

// The K/V ring's variants: three slots (two blocks in flight), and slots handed back by
// a block barrier instead of the empty mbarriers; several key blocks, so slots are reused
// and every mbarrier's phase flips more than once.
TEST(AttentionWgmma, RingVariants) {
  uint64_t seed = 400;
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 100, 300, 64, causal), "BLOCK_N=32,KV_STAGES=3", seed++);
    check_wgmma(attention(2, 2, 150, 200, 64, causal, "f16"), "BLOCK_N=32,ATTN_PRODUCER=1",
                seed++);
  }
  check_wgmma(attention(1, 1, 64, 333, 64, "false"), "ATTN_WG=1,BLOCK_N=16,KV_STAGES=3,ATTN_PRODUCER=1",
              seed++);
}

// ATTN_OVERLAP=1: S of block kb issued before P V of kb - 1, two S/P arrays trading roles
// (the loop unrolled by two): one, two, three and many key blocks, odd and even counts.
TEST(AttentionWgmma, OverlappedProducts) {
  uint64_t seed = 500;
  const std::string o = "ATTN_PRODUCER=1,ATTN_OVERLAP=1,BLOCK_N=32";
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 100, 300, 64, causal), o, seed++);
    check_wgmma(attention(2, 2, 33, 17, 64, causal, "f16"), o, seed++);
    check_wgmma(attention(2, 2, 150, 64, 64, causal), o + ",KV_STAGES=3", seed++);
  }
  check_wgmma(attention(1, 1, 64, 96, 64, "false"), o + ",ATTN_WG=1", seed++);
  check_wgmma(attention(1, 1, 70, 150, 128, "true"), "ATTN_PRODUCER=1,ATTN_OVERLAP=1,BLOCK_N=64", seed++);
}

TEST(AttentionWgmma, HeadDim128) {
  uint64_t seed = 300;
  for (const char* causal : kMasks)
    check_wgmma(attention(2, 1, 70, 150, 128, causal), "", seed++);
  check_wgmma(attention(1, 1, 33, 17, 128, "true", "f16"), "ATTN_WG=3,BLOCK_N=16", seed++);
}

// D = 192: Q, K and V rows as three TMA boxes of 64 columns, S's wgmma over 12 k-steps
// across them, O += P V as m64n192k16; the defaults above D = 128 (BLOCK_N = 64, the
// producer warpgroup), thread 0 issuing instead, a three-slot ring and ATTN_OVERLAP.
// Ragged lengths both ways, several key blocks, the three masks, GQA, f16 and bf16.
TEST(AttentionWgmma, HeadDim192) {
  uint64_t seed = 600;
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 70, 150, 192, causal), "", seed++);
    check_wgmma(attention(1, 1, 33, 17, 192, causal, "f16"), "ATTN_WG=1", seed++);
  }
  check_wgmma(attention(2, 2, 100, 130, 192, "true", "bf16", false), "ATTN_PRODUCER=0,BLOCK_N=32",
              seed++);
  check_wgmma(attention(1, 1, 65, 100, 192, "false", "f16"), "ATTN_WG=1,BLOCK_N=32,KV_STAGES=3",
              seed++);
  check_wgmma(attention(1, 1, 64, 96, 192, "top_left"), "ATTN_PRODUCER=1,ATTN_OVERLAP=1,ATTN_WG=1",
              seed++);
}

std::string kernel_ir(const std::string& expr, const std::string& knobs,
                      const std::string& arch = "sm_90a") {
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse(knobs);
  s.target = Target::for_arch(arch);
  run_pipeline(s);
  return print(s.kernel);
}

// The kernel's shape: TMA tensor maps over [B, H, S, D] (S its own dimension: ragged
// blocks read the map's zero fill, never the next head), the ss wgmma for S with scale-d
// off on its first k-step, the rs wgmma reading P straight from S's accumulator.
TEST(AttentionWgmma, KernelShape) {
  // ATTN_PRODUCER=0 (the default at D = 64): thread 0 issues block kb+1 at the top of kb.
  const std::string ir = kernel_ir(attention(8, 2, 1000, 1000, 128, "true"),
                                   "ATTN_MMA=wgmma,ATTN_PRODUCER=0");
  EXPECT_NE(ir.find("kernel k_attention<<<grid(8, 8, 1), block(256)>>>(Q, K, V, out, lse)"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("tensor map K_s_tmap: K -> K_s box[64, 128, 1, 1] (innermost first) swizzle 128B"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("tma.load K_s[(kb + 1) % 2 * 16384 + 64] <- K[b, h / 4, (kb + 1) * 128, 64]"),
            std::string::npos) << ir;
  // ATTN_PRODUCER=1 (the default from D = 128 on): a producer warpgroup; slot kb % 2 is
  // refilled once both consumer warpgroups released it.
  const std::string pr = kernel_ir(attention(8, 2, 1000, 1000, 128, "true"), "ATTN_MMA=wgmma");
  EXPECT_NE(pr.find("tma.load K_s[kb % 2 * 16384 + 64] <- K[b, h / 4, kb * 128, 64]"),
            std::string::npos) << pr;
  EXPECT_NE(pr.find("block(384)"), std::string::npos) << pr;
  EXPECT_NE(pr.find("setmaxnreg.dec 24"), std::string::npos) << pr;
  EXPECT_NE(pr.find("setmaxnreg.inc 240"), std::string::npos) << pr;
  EXPECT_NE(pr.find("mbar.wait [kb % 2 + 5] parity=(kb / 2 + 1) % 2"), std::string::npos) << pr;
  EXPECT_NE(pr.find("mbar.arrive [kb % 2 + 5]"), std::string::npos) << pr;
  EXPECT_NE(ir.find("s_acc <- wgmma_m64n128k16_f32_bf16_ss(Q_s[wg * 8192 + d_k * 16, 128, 1], "
                    "K_s[kb % 2 * 16384 + d_k * 16, 1, 128]) scale_d 0 < d_k"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("o_acc <- wgmma_m64n128k16_f32_bf16_rs(s_acc[kk], V_s[kb % 2 * 16384 + kk * 2048, 128, 1])"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("let qb = 7 - blockIdx.x"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("ldmatrix"), std::string::npos) << ir;
  // wgmma is the default on sm_90a for D = 64..256; mma_sync on sm_80, for other head dims,
  // and when asked for.
  const std::string e = attention(8, 2, 1000, 1000, 128, "true");
  EXPECT_EQ(kernel_ir(e, ""), pr);
  EXPECT_NE(kernel_ir(attention(8, 2, 1000, 1000, 64, "true"), "").find("block(256)"),
            std::string::npos);  // D = 64: no producer
  EXPECT_NE(kernel_ir(e, "ATTN_MMA=mma_sync").find("ldmatrix"), std::string::npos);
  EXPECT_NE(kernel_ir(e, "", "sm_80").find("ldmatrix"), std::string::npos);
  EXPECT_NE(kernel_ir(attention(2, 2, 64, 64, 48, "true"), "").find("ldmatrix"), std::string::npos);
}

TEST(AttentionWgmma, NoMaskWhereNothingIsMasked) {
  const std::string ir = kernel_ir(attention(2, 2, 256, 256, 64, "false"), "ATTN_MMA=wgmma");
  EXPECT_EQ(ir.find("s_acc[n2, hf, e] = -inf"), std::string::npos) << ir;
  const std::string ragged = kernel_ir(attention(2, 2, 256, 200, 64, "false"), "ATTN_MMA=wgmma");
  EXPECT_NE(ragged.find("s_acc[n2, hf, e] = -inf"), std::string::npos) << ragged;
}

void expect_refused(const std::string& expr, const std::string& knobs, const std::string& what,
                    const std::string& arch = "sm_90a") {
  try {
    kernel_ir(expr, knobs, arch);
    ADD_FAILURE() << "no error for " << knobs;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(AttentionWgmma, KnobLimitsAreNamed) {
  const std::string e128 = attention(2, 2, 128, 128, 128, "false");
  expect_refused(e128, "ATTN_MMA=wgmma", "need sm_90a; the target is sm_80", "sm_80");
  expect_refused(e128, "ATTN_MMA=wgmma,ATTN_WG=4", "ATTN_WG");  // the registry's range
  expect_refused(e128, "ATTN_MMA=wgmma,BLOCK_M=64,ATTN_WG=2", "BLOCK_M = 64 x ATTN_WG = 128");
  expect_refused(e128, "ATTN_MMA=wgmma,WARPS=4", "4 warps per warpgroup, 8 for ATTN_WG=2");
  expect_refused(e128, "ATTN_MMA=wgmma,BLOCK_N=24", "a multiple of 16 from 16 to 256");
  expect_refused(e128, "ATTN_MMA=wgmma,KV_STAGES=1", "ring of 2 or 3");
  expect_refused(e128, "ATTN_MMA=wgmma,KV_STAGES=3,ATTN_WG=3", "B of shared memory");
  expect_refused(e128, "ATTN_MMA=mma_sync,KV_STAGES=3", "KV_STAGES=3: attention buffers");
  expect_refused(e128, "ATTN_MMA=wgmma,ATTN_PRODUCER=2", "ATTN_PRODUCER");
  expect_refused(e128, "ATTN_PRODUCER=0,ATTN_OVERLAP=1", "needs ATTN_PRODUCER=1");
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_PRODUCER=1,ATTN_OVERLAP=1"));
  expect_refused(e128, "ATTN_MMA=wgmma,ATTN_WG=3,ATTN_PRODUCER=1",
                 "leaves 160 registers per consumer thread");
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_MMA=wgmma,ATTN_WG=3,BLOCK_N=64,ATTN_PRODUCER=1"));
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_MMA=wgmma,ATTN_WG=3"));
  expect_refused(attention(2, 2, 128, 128, 48, "false"), "ATTN_MMA=wgmma", "head dims 64, 128");
  expect_refused(attention(2, 2, 128, 128, 256, "false"), "ATTN_MMA=wgmma,BLOCK_N=256",
                 "f32 accumulator registers");
  expect_refused(e128, "ATTN_MMA=wgmma,ATTN_WG=3,BLOCK_N=256", "B of shared memory");
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_MMA=wgmma,BLOCK_M=192"));
  EXPECT_NO_THROW(kernel_ir(attention(2, 2, 128, 128, 256, "false"), "ATTN_MMA=wgmma"));
  expect_refused(e128, "ATTN_MMA=tcgen05", "ATTN_MMA");
  // The mma.sync kernel's knobs under the default wgmma kernel: refused, naming the fix.
  expect_refused(e128, "SOFTMAX=exp", "add ATTN_MMA=mma_sync");
  expect_refused(e128, "Q_IN_REGS=0,BLOCK_M=128,WARPS=4,BLOCK_N=32", "add ATTN_MMA=mma_sync");
  expect_refused(e128, "BLOCK_M=96", "or use ATTN_MMA=mma_sync");
  // The reverse: the wgmma kernel's knobs where the mma.sync kernel is chosen, refused
  // naming the knob, the kernel and why it was chosen (never silently ignored).
  for (const char* k : {"ATTN_WG=1", "ATTN_PRODUCER=1", "ATTN_OVERLAP=0"}) {
    expect_refused(e128, std::string("ATTN_MMA=mma_sync,") + k,
                   std::string(k).substr(0, std::string(k).find('=')) +
                       " is a knob of attention's wgmma kernel (k:013), and this one is the "
                       "mma.sync kernel (k:012; ATTN_MMA=mma_sync asks for it): drop");
    expect_refused(e128, std::string("ATTN_MMA=mma_sync,") + k, ", or use ATTN_MMA=wgmma");
    expect_refused(e128, k, "the only attention kernel for sm_80", "sm_80");
    expect_refused(e128, k, "on an sm_90a target with D = 64, 128, 192 or 256", "sm_80");
    // D = 96 has no wgmma kernel: the mma.sync one is sm_90a's default there.
    expect_refused(attention(2, 2, 128, 128, 96, "false"), k, "the default for D = 96");
  }
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_MMA=mma_sync"));
  EXPECT_NO_THROW(kernel_ir(e128, "", "sm_80"));
  EXPECT_NE(kernel_ir(e128, "BLOCK_M=64").find("block(256)"), std::string::npos);  // 1 + producer
  EXPECT_NE(kernel_ir(e128, "BLOCK_M=192").find("block(384)"), std::string::npos);  // 3, none
}

}  // namespace
}  // namespace loom
