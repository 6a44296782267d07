// l:005_online_softmax: the tiled online-softmax form computes what the unfused form of
// l:000 computes (both run on the interpreter, every output compared, LSE included) for
// every mask, GQA/MQA, lengths that are not multiples of the blocks, and both head dims;
// and its IR has the promised shape (one op, no Sq x Sk temp, causal key bound per
// query block). tests/cpu/driver/test_attention.cpp compares both forms with the fp64
// reference.
#include <gtest/gtest.h>

#include "attention_exprs.h"
#include "pass_check.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

// Batch 2 here: the loop form's b loop runs more than once.
std::string attention(int hq, int hkv, int sq, int sk, int d, const std::string& causal,
                      const char* dtype = "bf16", bool lse = true) {
  return attention_test::attention(hq, hkv, sq, sk, d, causal, dtype, lse, /*batch=*/2);
}
using attention_test::kMasks;

TEST(OnlineSoftmax, LengthsAndMasksMatchTheUnfusedForm) {
  const int lengths[][2] = {{1, 1}, {17, 17}, {33, 17}, {17, 33}, {1, 33}, {33, 1}};
  uint64_t seed = 1;
  for (const char* causal : kMasks)
    for (auto [sq, sk] : lengths)
      passcheck::check_loop_passes(attention(4, 2, sq, sk, 16, causal),
                                   Knobs::parse("BLOCK_M=16,BLOCK_N=16"), seed++);
}

TEST(OnlineSoftmax, BlockShapes) {
  for (const char* knobs : {"BLOCK_M=8,BLOCK_N=32", "BLOCK_M=32,BLOCK_N=8", "BLOCK_M=1,BLOCK_N=1",
                            "BLOCK_M=64,BLOCK_N=64"})
    for (const char* causal : kMasks)
      passcheck::check_loop_passes(attention(2, 2, 33, 17, 16, causal), Knobs::parse(knobs), 5);
}

TEST(OnlineSoftmax, GqaMqaHeadDim64AndF16) {
  for (const char* causal : kMasks) {
    passcheck::check_loop_passes(attention(4, 1, 17, 33, 64, causal),
                                 Knobs::parse("BLOCK_M=16,BLOCK_N=16"), 21);
    passcheck::check_loop_passes(attention(4, 2, 33, 17, 64, causal, "f16"),
                                 Knobs::parse("BLOCK_M=16,BLOCK_N=32"), 22);
    passcheck::check_loop_passes(attention(2, 2, 17, 17, 16, causal, "bf16", false),
                                 Knobs::parse("BLOCK_M=16,BLOCK_N=16"), 23);
  }
}

TEST(OnlineSoftmax, SymbolicSizes) {
  const std::string e = "attention(Q[B,4,S,16]:bf16, K[B,2,T,16]:bf16, V[B,2,T,16]:bf16, "
                        "causal=";
  for (const char* causal : kMasks)
    for (auto [s, t] : {std::pair{17, 33}, {33, 17}})
      passcheck::check_loop_passes(e + causal + ", lse=true)",
                                   Knobs::parse("BLOCK_M=16,BLOCK_N=16"), 31,
                                   {{"B", 1}, {"S", s}, {"T", t}});
}

CompileState loop_form(const std::string& expr, const std::string& knobs, bool fused) {
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse(knobs);
  run_pipeline(s, fused ? "l:005_online_softmax" : "l:000_lower_graph");
  return s;
}

TEST(OnlineSoftmax, UnfusedFormIsTwoContractionsAndASoftmax) {
  CompileState s = loop_form(attention(4, 2, 33, 17, 16, "true"), "", false);
  ASSERT_EQ(s.loop.ops.size(), 3u);
  EXPECT_EQ(s.loop.ops[0].name, "attention_scores");
  EXPECT_EQ(s.loop.ops[1].name, "attention_softmax");
  EXPECT_EQ(s.loop.ops[2].name, "attention_pv");
  std::string ir = print(s.loop);
  EXPECT_NE(ir.find("attn_scores: f32[2, 4, 33, 17]"), std::string::npos) << ir;
  // Bottom-right with Sq - Sk = 16: row i keeps j <= i - 16; rows < 16 keep nothing.
  EXPECT_NE(ir.find("if j + 16 <= i:"), std::string::npos) << ir;
  EXPECT_NE(ir.find("if i < 16:"), std::string::npos) << ir;
  EXPECT_NE(ir.find("k = load K[b, h / 2, j, d]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("m <- max(m, s)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("p = exp(e)"), std::string::npos) << ir;
}

TEST(OnlineSoftmax, FusedFormShape) {
  // The unsplit, unpacked form (Sq <= 64 defaults to GQA_PACK and SPLIT_KV: decode).
  CompileState s = loop_form(attention(4, 2, 33, 33, 16, "true"),
                             "BLOCK_M=16,BLOCK_N=16,GQA_PACK=0,SPLIT_KV=1", true);
  ASSERT_EQ(s.loop.ops.size(), 1u);
  EXPECT_EQ(s.loop.ops[0].name, "attention");
  EXPECT_FALSE(s.loop.has_tensor("attn_scores"));
  EXPECT_FALSE(s.loop.has_tensor("attn_probs"));
  EXPECT_EQ(s.loop.tensor("attn_s").shape[3].const_value(), 16);
  EXPECT_EQ(s.loop.tensor("lse").role, TensorRole::Output);
  EXPECT_EQ(s.used_knobs.at("BLOCK_M"), "16");
  EXPECT_EQ(s.used_knobs.at("BLOCK_N"), "16");
  std::string ir = print(s.loop);
  EXPECT_NE(ir.find("p = exp2(e)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("alpha = exp2(m_diff)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("l <- multiply(l, alpha)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("o_scaled = multiply(o, alpha)"), std::string::npos) << ir;
  // The key-block loop's bound depends on the query block only when causal.
  const Stmt* kb = nullptr;
  walk(s.loop.ops[0].body, [&](const Stmt& st) {
    if (st.kind == StmtKind::For && st.var == "kb") kb = &st;
  });
  ASSERT_TRUE(kb);
  EXPECT_TRUE(kb->extent.uses("qb")) << kb->extent.str();
  EXPECT_EQ(kb->loop_kind, LoopKind::Reduce);
  // Query block 0 (rows 0..15) needs one key block of 16, the last (row 32) three.
  EXPECT_EQ(kb->extent.eval({{"qb", 0}}), 1);
  EXPECT_EQ(kb->extent.eval({{"qb", 2}}), 3);

  s = loop_form(attention(4, 2, 33, 33, 16, "false"),
                "BLOCK_M=16,BLOCK_N=16,GQA_PACK=0,SPLIT_KV=1", true);
  kb = nullptr;
  walk(s.loop.ops[0].body, [&](const Stmt& st) {
    if (st.kind == StmtKind::For && st.var == "kb") kb = &st;
  });
  ASSERT_TRUE(kb);
  EXPECT_TRUE(kb->extent.is_const());
  EXPECT_EQ(kb->extent.const_value(), 3);
}

TEST(OnlineSoftmax, CausalBoundSkipsBlocksAboveTheDiagonal) {
  // Bottom-right, Sq = 16 < Sk = 64: query block 0 (BLOCK_M=8, rows 0..7) keeps keys up
  // to 7 + 48 = 55, 7 of the 8 key blocks of 8; top-left keeps keys 0..7, one block.
  // One split (Sq <= 64 defaults to SPLIT_KV: decode; test_attention_decode.cpp).
  CompileState br =
      loop_form(attention(1, 1, 16, 64, 16, "true"), "BLOCK_M=8,BLOCK_N=8,SPLIT_KV=1", true);
  CompileState tl =
      loop_form(attention(1, 1, 16, 64, 16, "top_left"), "BLOCK_M=8,BLOCK_N=8,SPLIT_KV=1", true);
  auto extent = [](const CompileState& s) {
    Expr e;
    walk(s.loop.ops[0].body, [&](const Stmt& st) {
      if (st.kind == StmtKind::For && st.var == "kb") e = st.extent;
    });
    return e;
  };
  EXPECT_EQ(extent(br).eval({{"qb", 0}}), 7);
  EXPECT_EQ(extent(br).eval({{"qb", 1}}), 8);
  EXPECT_EQ(extent(tl).eval({{"qb", 0}}), 1);
  EXPECT_EQ(extent(tl).eval({{"qb", 1}}), 2);
}

TEST(OnlineSoftmax, LeavesGemmsAlone) {
  CompileState s = loop_form("matmul(A[16,8]:f16, B[8,4]:f16)", "", false);
  std::string before = print(s.loop);
  CompileState t = loop_form("matmul(A[16,8]:f16, B[8,4]:f16)", "", true);
  EXPECT_EQ(print(t.loop), before);
  EXPECT_EQ(t.used_knobs.count("BLOCK_N"), 0u);
}

TEST(OnlineSoftmax, IsInThePipelineRightAfterLowering) {
  const auto& p = pipeline();
  ASSERT_GT(p.size(), 2u);
  EXPECT_EQ(p[0].id, "l:000_lower_graph");
  EXPECT_EQ(p[1].id, "l:005_online_softmax");
  EXPECT_EQ(p[1].knobs,
            (std::vector<std::string>{"BLOCK_M", "BLOCK_N", "SPLIT_KV", "GQA_PACK"}));
}

}  // namespace
}  // namespace loom
