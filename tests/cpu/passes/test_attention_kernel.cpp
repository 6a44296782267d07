// t:012_partition_attention and k:012_lower_attention: every pass of an attention program,
// run on the CPU interpreter, computes what the naive loop form of l:000 computes — O and
// LSE — for odd lengths (1, 17, 33), Sq != Sk, GQA 4/2 and MQA, the three masks, f16 and
// bf16, head dims 16 and 64, several block shapes (one key block, several with a ragged
// last one, two m16 atoms per warp). The kernel level runs per lane: its ldmatrix, mma
// fragments, lane_reduce shuffles, cp.async zero fill and barriers are all interpreted, so
// a wrong fragment map, a missing mask or a race fails here, on a machine with no GPU.
// tests/cpu/driver/test_attention.cpp compares the loop forms with the fp64 reference.
#include <gtest/gtest.h>

#include "attention_exprs.h"
#include "atoms/atoms.h"
#include "pass_check.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

using attention_test::attention;
using attention_test::kMasks;

// Runs the pipeline pass by pass; after each pass that changed the IR (from l:005 on),
// interprets it and compares every output with the naive loop form's. Returns the state.
CompileState check_attention(const std::string& expr, const std::string& knobs, uint64_t seed,
                             const std::string& arch = "sm_90a",
                             const std::map<std::string, int64_t>& sizes = {}) {
  SCOPED_TRACE(expr + " knobs=" + knobs + " " + arch);
  CompileState s;
  s.graph = parse_expression(expr);
  // k:012's kernel (ATTN_MMA=wgmma, k:013, is the default on sm_90a for D = 64..256).
  s.knobs = Knobs::parse("ATTN_MMA=mma_sync" + (knobs.empty() ? "" : "," + knobs));
  s.target = Target::for_arch(arch);
  Bindings inputs, reference;
  inputs.symbols = sizes;
  const DType out = s.graph.node(s.graph.result()).dtype;
  for (const auto& p : pipeline()) {
    // A lowering that did nothing (t:010 and k:010 on attention) prints as before.
    const std::string before = print_level(s, p.to);
    p.run(s);
    passcheck::verify_level(s, p.to);
    if (reference.tensors.empty()) {
      make_random_inputs(s.loop, inputs, seed);
      reference = inputs;
      interpret(s.loop, reference);
      continue;
    }
    if (print_level(s, p.to) == before) continue;
    Bindings got = inputs;
    switch (p.to) {
      case Level::Loop: interpret(s.loop, got); break;
      case Level::Tile: interpret(s.tile, got); break;
      case Level::Kernel: interpret(s.kernel, got); break;
      case Level::Graph: break;
    }
    passcheck::expect_outputs_close(p.to == Level::Kernel ? static_cast<const ProgramBase&>(s.kernel)
                                                          : static_cast<const ProgramBase&>(s.loop),
                                    got, reference, out, "after " + p.id);
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_EQ(s.level, Level::Kernel);
  return s;
}

TEST(AttentionKernel, LengthsAndMasks) {
  const int lengths[][2] = {{1, 1}, {17, 17}, {33, 17}, {17, 33}, {1, 33}, {33, 1}};
  uint64_t seed = 1;
  for (const char* causal : kMasks)
    for (auto [sq, sk] : lengths)
      check_attention(attention(4, 2, sq, sk, 16, causal), "BLOCK_M=32,BLOCK_N=16,WARPS=2",
                      seed++);
}

TEST(AttentionKernel, HeadDim64GqaMqaF16) {
  for (const char* causal : kMasks) {
    check_attention(attention(4, 1, 17, 33, 64, causal), "", 21);
    check_attention(attention(4, 2, 33, 17, 64, causal, "f16"), "BLOCK_M=32,BLOCK_N=32", 22);
    check_attention(attention(2, 2, 33, 33, 64, causal, "bf16", false, 2),
                    "BLOCK_M=16,BLOCK_N=16,WARPS=1", 23);
  }
}

// Two m16 atoms per warp (BLOCK_M = 32 WARPS), a single key block longer than Sk, and the
// sm_80 target (the same kernel: mma.sync and cp.async are sm_80 instructions).
TEST(AttentionKernel, BlockShapesAndSm80) {
  for (const char* causal : kMasks) {
    check_attention(attention(2, 1, 33, 17, 16, causal), "BLOCK_M=64,BLOCK_N=16,WARPS=2", 31);
    check_attention(attention(2, 2, 17, 33, 32, causal, "f16"), "BLOCK_M=16,BLOCK_N=64,WARPS=1",
                    32, "sm_80");
  }
}

std::string kernel_ir(const std::string& expr, const std::string& knobs);

// Q_IN_REGS=0: Q's fragments re-read from Q_s at each k-step, two m16 atoms per warp.
TEST(AttentionKernel, QFragmentsFromSharedMemory) {
  for (const char* causal : kMasks) {
    check_attention(attention(4, 2, 33, 17, 32, causal), "Q_IN_REGS=0,BLOCK_M=64,BLOCK_N=16,WARPS=2", 61);
    check_attention(attention(2, 1, 17, 33, 64, causal, "f16"), "Q_IN_REGS=0,BLOCK_M=32,BLOCK_N=32,WARPS=1", 62);
  }
  const std::string ir = kernel_ir(attention(2, 2, 128, 128, 128, "false"),
                                   "Q_IN_REGS=0,BLOCK_M=128,WARPS=4,BLOCK_N=32");
  EXPECT_NE(ir.find("alloc q_frag[2, 8]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("s_acc[m_a, n2, hf] <- mma_m16n8k16_f32_bf16(q_frag[m_a], k_frag[hf])"),
            std::string::npos) << ir;
}

// The unswizzled base (SWIZZLE=none) and a head dim that is no power of two (48: three
// k-steps, no swizzle by default) compute the same.
TEST(AttentionKernel, SwizzleNoneAndHeadDim48) {
  for (const char* causal : kMasks) {
    check_attention(attention(2, 1, 33, 17, 64, causal), "SWIZZLE=none,BLOCK_M=32,BLOCK_N=16", 35);
    check_attention(attention(2, 2, 17, 33, 48, causal, "f16"), "BLOCK_M=32,BLOCK_N=32", 36);
  }
}

// KV_STAGES=2 (the default): K and V rings of two, the next block's copies issued under
// this block's math; KV_STAGES=1: one buffer each, loaded at each block. The interpreter's
// cp.async group tracking and race checks see every hand-over of either.
TEST(AttentionKernel, KvStagesOneAndTwo) {
  for (const char* stages : {"KV_STAGES=1,", "KV_STAGES=2,"})
    for (const char* causal : kMasks) {
      const std::string k = stages;
      check_attention(attention(4, 2, 33, 17, 16, causal), k + "BLOCK_M=32,BLOCK_N=16,WARPS=2", 51);
      check_attention(attention(4, 2, 17, 33, 16, causal), k + "BLOCK_M=32,BLOCK_N=16,WARPS=2", 52);
      check_attention(attention(2, 1, 33, 33, 64, causal, "f16"), k + "BLOCK_N=16", 53);
    }
  check_attention(attention(2, 2, 1, 1, 16, "true"), "KV_STAGES=2,BLOCK_M=16,BLOCK_N=16,WARPS=1", 54);
}

// The articles' ladder as knobs (docs/attention.md): the whole key block's K/V fragments
// first (INTERLEAVE_LOADS=0), k-step s+1's fragments loaded before s's mmas
// (FRAG_BUFFERS=2, with Q re-read too under Q_IN_REGS=0), the plain exp softmax, S zeroed
// by an Init loop instead of the mma's zero C, and O staged through Q_s — each against the naive form over the masks, odd and unequal lengths,
// GQA and MQA, f16 and bf16, head dims 16 to 64, one and two row atoms per warp.
TEST(AttentionKernel, LadderKnobs) {
  const char* const sets[] = {
      "INTERLEAVE_LOADS=0", "FRAG_BUFFERS=2", "SOFTMAX=exp", "ZERO_INIT=init", "STAGE_OUTPUT=1",
      // The articles' base kernel, every step off.
      "SWIZZLE=none,KV_STAGES=1,INTERLEAVE_LOADS=0,SOFTMAX=exp,ZERO_INIT=init,STAGE_OUTPUT=0",
  };
  uint64_t seed = 70;
  for (const std::string k : sets)
    for (const char* causal : kMasks) {
      check_attention(attention(4, 2, 33, 17, 32, causal), k + ",BLOCK_M=32,BLOCK_N=16,WARPS=2", seed++);
      check_attention(attention(2, 1, 17, 33, 64, causal, "f16"), k + ",BLOCK_M=32,BLOCK_N=32", seed++);
    }
  // Two row atoms per warp sharing each K/V fragment, Q re-read per k-step and double
  // buffered with K; one key block with D = 16 (a single k-step: nothing to prefetch).
  for (const char* causal : kMasks) {
    check_attention(attention(2, 2, 33, 33, 32, causal, "bf16", true, 2),
                    "FRAG_BUFFERS=2,Q_IN_REGS=0,STAGE_OUTPUT=1,BLOCK_M=64,BLOCK_N=32,WARPS=2", seed++);
    check_attention(attention(2, 1, 17, 33, 32, causal, "f16"),
                    "INTERLEAVE_LOADS=0,Q_IN_REGS=0,BLOCK_M=64,BLOCK_N=16,WARPS=2", seed++);
    check_attention(attention(2, 1, 17, 9, 16, causal), "FRAG_BUFFERS=2,SOFTMAX=exp,BLOCK_M=16,WARPS=1", seed++);
    // The zero-C mma with Q re-read (where ZERO_INIT defaults to init).
    check_attention(attention(4, 2, 33, 17, 32, causal), "ZERO_INIT=mma,Q_IN_REGS=0,BLOCK_M=64,BLOCK_N=16,WARPS=2", seed++);
  }
}

// What the ladder knobs put in the Kernel IR.
TEST(AttentionKernel, LadderKnobsShape) {
  const std::string e = attention(2, 2, 128, 128, 128, "false");
  const std::string def = kernel_ir(e, "");
  // ZERO_INIT=mma: the first k-step peeled, its mmas with a zero C; no zeroing of s_acc.
  EXPECT_NE(def.find("s_acc[m_a, n2, hf] <- mma_m16n8k16_f32_bf16(q_frag[m_a, 0], k_frag[hf]) scale_d 0"),
            std::string::npos) << def;
  EXPECT_NE(def.find("for d_k in 0..7 register reduce"), std::string::npos) << def;
  EXPECT_EQ(def.find("s_acc[m_a, n2, hf, e] = 0"), std::string::npos) << def;
  EXPECT_NE(def.find("exp2("), std::string::npos) << def;
  EXPECT_NE(def.find("store.v2 out["), std::string::npos) << def;
  // STAGE_OUTPUT=1: O into Q_s, a barrier, 16-byte stores of whole rows.
  const std::string staged = kernel_ir(e, "STAGE_OUTPUT=1");
  EXPECT_NE(staged.find("store.v2 Q_s["), std::string::npos) << staged;
  EXPECT_NE(staged.find("store.v8 out["), std::string::npos) << staged;
  EXPECT_EQ(staged.find("store.v2 out["), std::string::npos) << staged;

  const std::string base = kernel_ir(e, "INTERLEAVE_LOADS=0,BLOCK_N=32,SOFTMAX=exp,ZERO_INIT=init,STAGE_OUTPUT=0");
  EXPECT_NE(base.find("alloc k_all[8, 2, 2, 4]"), std::string::npos) << base;
  EXPECT_NE(base.find("alloc v_all[2, 8, 2, 4]"), std::string::npos) << base;
  EXPECT_NE(base.find("s_acc[m_a, n2, hf, e] = 0"), std::string::npos) << base;
  EXPECT_EQ(base.find("scale_d 0"), std::string::npos) << base;
  EXPECT_NE(base.find("store.v2 out["), std::string::npos) << base;
  EXPECT_EQ(base.find("exp2("), std::string::npos) << base;
  EXPECT_NE(base.find("exp("), std::string::npos) << base;

  // ZERO_INIT's default is init where the kernel is at the register limit.
  EXPECT_EQ(kernel_ir(e, "Q_IN_REGS=0,BLOCK_M=128,WARPS=4,BLOCK_N=32").find("scale_d 0"), std::string::npos);
  EXPECT_EQ(kernel_ir(attention(2, 2, 128, 128, 256, "false"), "").find("scale_d 0"), std::string::npos);

  const std::string fb = kernel_ir(e, "FRAG_BUFFERS=2");
  EXPECT_NE(fb.find("alloc k_buf[2, 4, 2, 4]"), std::string::npos) << fb;
  EXPECT_NE(fb.find("alloc v_buf[2, 8, 2, 4]"), std::string::npos) << fb;
  EXPECT_NE(fb.find("k_buf[(d_k + 2) % 2, n2] <- ldmatrix_x4(K_s["), std::string::npos) << fb;
}

TEST(AttentionKernel, SymbolicLengths) {
  const std::string e = "attention(Q[B,4,S,16]:bf16, K[B,2,T,16]:bf16, V[B,2,T,16]:bf16, causal=";
  for (const char* causal : kMasks)
    for (auto [sq, sk] : {std::pair{17, 33}, {33, 17}})
      check_attention(e + causal + ", lse=true)", "BLOCK_M=32,BLOCK_N=16,WARPS=2", 41, "sm_90a",
                      {{"B", 1}, {"S", sq}, {"T", sk}});
}

std::string kernel_ir(const std::string& expr, const std::string& knobs) {
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse("ATTN_MMA=mma_sync" + (knobs.empty() ? "" : "," + knobs));
  run_pipeline(s);
  return print(s.kernel);
}

// The kernel of the plan: one CTA per (query block, head, batch), Q by ldmatrix.x4 from
// its staging, K by ldmatrix.x4 and V by .trans, the quad reductions, P read in place as
// the A fragment (s_acc[m_a, kk]), no memory stand-ins for the registers.
TEST(AttentionKernel, KernelShape) {
  const std::string ir =
      kernel_ir(attention(8, 2, 1000, 1000, 128, "true", "bf16"), "BLOCK_M=64,BLOCK_N=64");
  EXPECT_NE(ir.find("kernel k_attention<<<grid(16, 8, 1), block(128)>>>(Q, K, V, out, lse)"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("q_frag[m_a, d_k] <- ldmatrix_x4(Q_s["), std::string::npos) << ir;
  EXPECT_NE(ir.find("k_frag <- ldmatrix_x4(K_s["), std::string::npos) << ir;
  EXPECT_NE(ir.find("v_frag <- ldmatrix_x4_trans(V_s["), std::string::npos) << ir;
  EXPECT_NE(ir.find("m_q = lane_reduce.max.x4(m_t)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("l_q = lane_reduce.add.x4(l_i[m_a, r2])"), std::string::npos) << ir;
  EXPECT_NE(ir.find("o_acc[m_a, dn2, hf] <- mma_m16n8k16_f32_bf16(s_acc[m_a, kk], v_frag[hf])"),
            std::string::npos) << ir;
  // Swizzled rings of two K/V tiles (rows of 256 bytes: Swizzle<3,3,4>), launch bounds
  // with a minimum.
  EXPECT_NE(ir.find("K_s: bf16[2, 64, 128] shared swizzle<3,3,4>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("(Q, K, V, out, lse) min_blocks=1"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("attn_s"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("attn_o"), std::string::npos) << ir;
  // Causal: the longest query blocks first, and the key loop stops at the diagonal.
  EXPECT_NE(ir.find("let qb = 15 - blockIdx.x"), std::string::npos) << ir;
  EXPECT_NE(ir.find("for kb in 0..(min(1000, (qb + 1) * 64) + 63) / 64 reduce"),
            std::string::npos) << ir;
}

// Without a mask and with Sk a multiple of BLOCK_N no element is masked: no predicate.
TEST(AttentionKernel, NoMaskWhereNothingIsMasked) {
  const std::string ir = kernel_ir(attention(2, 2, 128, 128, 64, "false"), "");
  EXPECT_EQ(ir.find("s_acc[m_a, n2, hf, e] = -inf"), std::string::npos) << ir;
  const std::string ragged = kernel_ir(attention(2, 2, 128, 100, 64, "false"), "");
  EXPECT_NE(ragged.find("s_acc[m_a, n2, hf, e] = -inf"), std::string::npos) << ragged;
}

void expect_refused(const std::string& expr, const std::string& knobs, const std::string& what) {
  try {
    kernel_ir(expr, knobs);
    ADD_FAILURE() << "no error for " << knobs;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(AttentionKernel, KnobLimitsAreNamed) {
  const std::string e128 = attention(2, 2, 128, 128, 128, "false");
  expect_refused(e128, "BLOCK_M=64,WARPS=8", "BLOCK_M=64 must be a multiple of 16*WARPS = 128");
  expect_refused(e128, "BLOCK_N=24", "BLOCK_N=24 must be a multiple of 16");
  expect_refused(attention(2, 2, 128, 128, 256, "false"), "BLOCK_M=256,BLOCK_N=256,WARPS=16",
                 "B of shared memory");
  expect_refused(attention(2, 2, 128, 128, 256, "false"), "BLOCK_M=64,BLOCK_N=32,WARPS=4",
                 "registers of fragments per thread");
  EXPECT_NO_THROW(kernel_ir(attention(2, 2, 128, 128, 256, "false"), ""));  // BLOCK_N = 16
  expect_refused(e128, "Q_IN_REGS=0,BLOCK_M=128,WARPS=4", "registers of fragments per thread");
  EXPECT_NO_THROW(kernel_ir(e128, "Q_IN_REGS=0,BLOCK_M=128,WARPS=4,BLOCK_N=32"));
  expect_refused(attention(2, 2, 128, 128, 40, "false"), "", "multiples of 16");
  expect_refused(e128, "KV_STAGES=5", "KV_STAGES");  // rings of 1 to 4
  expect_refused(attention(2, 2, 128, 128, 256, "false"), "BLOCK_N=64,KV_STAGES=4",
                 "B of shared memory");
  EXPECT_NO_THROW(kernel_ir(e128, "KV_STAGES=4"));
  expect_refused(attention(2, 2, 128, 128, 48, "false"), "SWIZZLE=xor", "power-of-two head dim");
  expect_refused(e128, "SWIZZLE=128B", "SWIZZLE=128B");
  expect_refused(e128, "INTERLEAVE_LOADS=0,FRAG_BUFFERS=2", "FRAG_BUFFERS=2 with INTERLEAVE_LOADS=0");
  expect_refused(e128, "FRAG_BUFFERS=2,Q_IN_REGS=0,BLOCK_M=128,WARPS=4,BLOCK_N=32",
                 "registers of fragments per thread");
  expect_refused(e128, "SOFTMAX=exp3", "SOFTMAX");
}

}  // namespace
}  // namespace loom
