// attention end to end on a machine without a GPU: both loop forms (l:000's unfused one
// and l:005's online softmax) run on the interpreter and match the fp64 reference, O and
// LSE; so does the mma.sync kernel (k:012), judged by the rule `loom run` applies on the
// GPU (bench/verify_attention.h); `loom compile` prints the fused form at --ir loop and
// the kernel's passes with -vv.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>

#include "bench/reference_attention.h"
#include "bench/verify_attention.h"
#include "frontend/parser.h"
#include "ir/interpreter.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

struct Case {
  int64_t hq, hkv, sq, sk, d;
  const char* causal;
  const char* dtype;
};

std::string expr(const Case& c) {
  auto t = [&](const char* n, int64_t h, int64_t s) {
    return std::string(n) + "[2," + std::to_string(h) + "," + std::to_string(s) + "," +
           std::to_string(c.d) + "]:" + c.dtype;
  };
  return "attention(" + t("Q", c.hq, c.sq) + ", " + t("K", c.hkv, c.sk) + ", " +
         t("V", c.hkv, c.sk) + ", causal=" + c.causal + ", lse=true)";
}

// Interprets the Loop IR after pass `last` on seeded inputs; compares with the reference.
void check_against_reference(const Case& c, const std::string& last, const std::string& knobs) {
  SCOPED_TRACE(expr(c) + " after " + last + " " + knobs);
  CompileState s;
  s.graph = parse_expression(expr(c));
  s.knobs = Knobs::parse(knobs);
  run_pipeline(s, last);
  Bindings b;
  make_random_inputs(s.loop, b, uint64_t(c.sq * 131 + c.sk));
  const Node& n = *s.graph.attention();
  AttentionResult want =
      reference_attention({2, c.hq, c.hkv, c.sq, c.sk, c.d}, n.attention, b.tensors.at("Q").data,
                          b.tensors.at("K").data, b.tensors.at("V").data);
  interpret(s.loop, b);
  // One rounding of O to the output type (half an ulp: 2^-9 for bf16, 2^-12 for f16)
  // on top of f32 temps; |O| <= 1 since it averages values in [-1, 1].
  const double tol = std::string(c.dtype) == "bf16" ? 4e-3 : 6e-4;
  const HostTensor& out = b.tensors.at("out");
  ASSERT_EQ(out.data.size(), want.out.size());
  for (size_t i = 0; i < out.data.size(); ++i)
    ASSERT_NEAR(out.data[i], want.out[i], tol) << "out[" << i << "]";
  const HostTensor& lse = b.tensors.at("lse");
  ASSERT_EQ(lse.data.size(), want.lse.size());
  for (size_t i = 0; i < lse.data.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      ASSERT_EQ(lse.data[i], want.lse[i]) << "lse[" << i << "]";
      continue;
    }
    ASSERT_NEAR(lse.data[i], want.lse[i], 1e-5 * std::max(1.0, std::fabs(want.lse[i])))
        << "lse[" << i << "]";
  }
}

const Case kCases[] = {
    {4, 2, 17, 17, 16, "false", "bf16"},   {4, 2, 17, 17, 16, "true", "bf16"},
    {4, 2, 17, 17, 16, "top_left", "bf16"}, {4, 2, 33, 17, 16, "true", "bf16"},
    {4, 2, 33, 17, 16, "top_left", "bf16"}, {4, 2, 17, 33, 16, "true", "bf16"},
    {4, 2, 17, 33, 16, "top_left", "f16"},  {4, 1, 33, 17, 64, "false", "f16"},
    {4, 1, 1, 33, 64, "true", "bf16"},      {2, 2, 33, 1, 16, "true", "bf16"},
    {2, 2, 33, 1, 16, "top_left", "f16"},   {2, 2, 1, 1, 64, "false", "bf16"},
};

TEST(AttentionLoops, UnfusedFormMatchesTheReference) {
  for (const Case& c : kCases) check_against_reference(c, "l:000_lower_graph", "");
}

TEST(AttentionLoops, OnlineSoftmaxFormMatchesTheReference) {
  for (const Case& c : kCases) {
    check_against_reference(c, "l:005_online_softmax", "BLOCK_M=16,BLOCK_N=16");
    check_against_reference(c, "l:005_online_softmax", "BLOCK_M=8,BLOCK_N=32");
  }
}

// The kernel on the interpreter (fragments, shuffles and all), O and LSE judged by the
// GPU's rule: within twice the 16-bit pipeline's error of the fp64 reference. Both
// kernels: mma.sync (k:012) and, for head dims it takes, wgmma (k:013).
TEST(AttentionKernel, InterpretedKernelPassesTheGpuRule) {
  for (const Case& c : kCases)
    for (const char* knobs : {"ATTN_MMA=mma_sync,BLOCK_M=32,BLOCK_N=16,WARPS=2",
                              "ATTN_MMA=wgmma,ATTN_WG=1,BLOCK_N=16"}) {
      if (c.d % 64 != 0 && std::string(knobs).find("wgmma") != std::string::npos) continue;
      SCOPED_TRACE(expr(c) + " " + knobs);
      CompileState s;
      s.graph = parse_expression(expr(c));
      s.knobs = Knobs::parse(knobs);
      run_pipeline(s);
      ASSERT_EQ(s.level, Level::Kernel);
      Bindings b;
      make_random_inputs(s.kernel, b, uint64_t(c.sq * 7 + c.sk));
      std::map<std::string, HostTensor> inputs;
      for (const char* t : {"Q", "K", "V"}) inputs[t] = b.tensors.at(t);
      interpret(s.kernel, b);
      AttentionVerify v = verify_attention(s.graph, inputs, b.tensors.at("out"), &b.tensors.at("lse"));
      EXPECT_TRUE(v.passed()) << v.message();
    }
}

struct Result {
  int rc;
  std::string out;
};

Result loom_cmd(const std::string& args) {
  std::string cmd = std::string(LOOM_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const char* const kExpr =
    "-c 'attention(Q[1,8,256,64]:bf16, K[1,2,256,64]:bf16, V[1,2,256,64]:bf16, causal=true)'";

TEST(AttentionCli, CompileShowsTheKernelPasses) {
  // sm_90a: the wgmma kernel (k:013, the default there); sm_80: the mma.sync kernel.
  for (const char* target : {"", " --target sm_80"}) {
    Result r = loom_cmd(std::string("compile ") + kExpr + target + " --ir cuda -vv");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(has(r.out, ">>> t:012_partition_attention")) << r.out;
    EXPECT_TRUE(has(r.out, *target ? ">>> k:012_lower_attention"
                                   : ">>> k:013_lower_attention_wgmma")) << r.out;
    // The GEMM lowerings leave the program alone, and -vv shows them unchanged.
    EXPECT_FALSE(has(r.out, ">>> t:010_partition_loops")) << r.out;
    EXPECT_FALSE(has(r.out, ">>> k:010_bind_hardware")) << r.out;
    EXPECT_TRUE(has(r.out, "k_attention(")) << r.out;
    EXPECT_FALSE(has(r.out, "internal error")) << r.out;
  }
}

TEST(AttentionCli, LoopLevelPrintsTheFusedForm) {
  Result r = loom_cmd(std::string("compile ") + kExpr + " --ir loop --knobs BLOCK_M=128,BLOCK_N=64");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(has(r.out, "attention = LoopOp(Q, K, V) -> out")) << r.out;
  EXPECT_TRUE(has(r.out, "for qb in 0..2")) << r.out;
  EXPECT_TRUE(has(r.out, "alpha = exp2(m_diff)")) << r.out;
  EXPECT_FALSE(has(r.out, "attn_scores")) << r.out;
  r = loom_cmd(std::string("compile ") + kExpr + " --ir loop -vv");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(has(r.out, ">>> l:005_online_softmax")) << r.out;
  EXPECT_TRUE(has(r.out, "-attention_scores = LoopOp")) << r.out;
  EXPECT_TRUE(has(r.out, "+attention = LoopOp(Q, K, V) -> out")) << r.out;
}

TEST(AttentionCli, PassesAndKnobsListTheFusion) {
  Result r = loom_cmd("passes");
  EXPECT_TRUE(has(r.out, "l:005_online_softmax")) << r.out;
  EXPECT_TRUE(has(r.out, "t:012_partition_attention")) << r.out;
  EXPECT_TRUE(has(r.out, "k:012_lower_attention")) << r.out;
  r = loom_cmd("knobs");
  EXPECT_TRUE(has(r.out, "BLOCK_M")) << r.out;
  EXPECT_TRUE(has(r.out, "BLOCK_N")) << r.out;
  EXPECT_TRUE(has(r.out, "WARPS")) << r.out;
}

}  // namespace
}  // namespace loom
