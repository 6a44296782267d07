// GEMMs with run-time sizes on wgmma, without a GPU: the sm_90a default for a run-time M
// (the large class's persistent schedule, the same knobs a large constant M gets) and
// where it stays SIMT; every case of tests/gpu/wgmma_symbolic_cases.h, kept symbolic,
// compiles with NVRTC for sm_90a without spills, its persistent grid an expression of M;
// stream-K's refusal of a run-time tile count names the fix; a run-time row length TMA
// cannot address is refused at launch naming the knob whose tensor map it is.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "../../gpu/wgmma_symbolic_cases.h"
#include "driver/compile.h"
#include "driver/executor.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "driver/size_variants.h"
#include "nvrtc_check.h"

namespace loom {
namespace {

// No spill stores or loads in any kernel of `p`. Not expect_no_spills' setmaxnreg check:
// the medium class's persistent form (the ranges 129..256 and 257..384 of a 4096 x 4096 weight, and
// f16 linear's 65..512 of a 1032 x 512 one) has ptxas ignore its setmaxnreg (C7508) as a
// bound M of 256 does with the same knobs: the range kernels are the bound defaults.
void expect_no_spill_bytes(const CompiledProgram& p, const CompileResult& r) {
  for (const auto& k : p.state.kernel.kernels) {
    ASSERT_TRUE(r.resources.count(k.name)) << r.log;
    EXPECT_EQ(r.resources.at(k.name).spill_store_bytes, 0) << k.name;
    EXPECT_EQ(r.resources.at(k.name).spill_load_bytes, 0) << k.name;
  }
}

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

TEST(WgmmaSymbolicCompile, RunTimeNAndKGetTheLargeSchedule) {
  // A run-time N or K (dynamic shapes under torch.compile) takes the run-time M's
  // schedule: N a persistent tile count, K the slab loop's trip count ceil(K / 64), both
  // kernel parameters; the tensor maps are made from them at launch.
  const CompiledProgram big = compile_symbolic("matmul(A[M,4096]:bf16, B[4096,4096]:bf16)", "");
  for (const std::string expr : {"matmul(A[M,K]:bf16, B[K,4096]:bf16)",
                                 "matmul(A[M,4096]:bf16, B[4096,N]:bf16)",
                                 "matmul(A[M,K]:bf16, B[K,N]:bf16)",
                                 "matmul(A[1000,K]:bf16, B[K,N]:bf16)",
                                 "gelu(linear(X[M,K]:f16, W[N,K]:f16, bias[N]:f16))"}) {
    SCOPED_TRACE(expr);
    const CompiledProgram p = compile_symbolic(expr, "");
    EXPECT_NE(p.knob_source.find("class symbolic, wgmma schedule"), std::string::npos)
        << p.knob_source;
    for (const char* k : {"BN", "BK", "STAGE", "STAGES", "WARP_SPECIALIZE", "PERSISTENT",
                          "EPILOGUE"})
      EXPECT_EQ(knob(p, k), knob(big, k)) << k;
    // A bound M of 1000 rows is one wave of 128 x 256 tiles: no clusters (the large
    // class's rule); a run-time M counts as 8192 rows.
    EXPECT_EQ(knob(p, "CLUSTER_M"), expr.find("[1000,") == std::string::npos ? "2" : "1");
    EXPECT_EQ(knob(p, "ATOM").rfind("wgmma_", 0), 0u) << knob(p, "ATOM");
    std::set<std::string> vars;
    for (const Expr& e : p.state.kernel.kernels.at(0).grid) e.collect_vars(vars);
    const bool runtime_tiles = expr.find("[M,") != std::string::npos ||
                               expr.find(",N]") != std::string::npos ||
                               expr.find("[N,") != std::string::npos;
    EXPECT_EQ(!vars.empty(), runtime_tiles) << "the persistent grid is sized from M and N";
  }
}

TEST(WgmmaSymbolicCompile, OtherRunTimeSizesKeepTheSimtClass) {
  // A transposed A with a run-time M (its rows are M: any token count, which TMA cannot
  // address), f32, a small N and K, and sm_80 keep ATOM=fma.
  for (const auto& [expr, arch] : std::vector<std::pair<std::string, std::string>>{
           {"matmul(A[4096,M]:bf16.T, B[4096,4096]:bf16)", "sm_90a"},
           {"matmul(A[M,4096]:f32, B[4096,4096]:f32)", "sm_90a"},
           {"matmul(A[M,K]:f32, B[K,N]:f32)", "sm_90a"},
           {"matmul(A[M,64]:bf16, B[64,64]:bf16)", "sm_90a"},
           {"matmul(A[M,4096]:bf16, B[4096,4096]:bf16)", "sm_80"},
           {"matmul(A[M,K]:bf16, B[K,N]:bf16)", "sm_80"}}) {
    SCOPED_TRACE(expr + " " + arch);
    CompileOptions opt;
    opt.target = Target::for_arch(arch);
    const CompiledProgram p = compile_graph(parse_expression(expr), opt, expr);
    EXPECT_EQ(knob(p, "ATOM"), "fma");
    EXPECT_NE(p.knob_source.find("class symbolic"), std::string::npos) << p.knob_source;
  }
}

// The kernels of a run-time M: one per range, each with the defaults of a bound M at the
// range's top (M still a parameter), picked by M at launch (defaults.cpp,
// kRuntimeMRangeTops; driver/size_variants.h).
TEST(WgmmaSymbolicCompile, RunTimeMRangesTakeTheBoundDefaultsOfTheirTop) {
  const std::string expr = "matmul(A[M,4096]:bf16, B[4096,4096]:bf16)";
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  const SizeVariants v = compile_size_variants(parse_expression(expr), opt, expr);
  // The tops 16, 48, 64, 80, 95, 128, 256, 384, 512; 384's knobs are 512's (BN = 128 for
  // 3 and 4 rows of tiles), so one kernel serves 257..512.
  ASSERT_EQ(v.variants.size(), 9u) << v.describe();
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {1, 16},    {17, 48},   {49, 64},   {65, 80},         {81, 95},
      {96, 128},  {129, 256}, {257, 512}, {513, INT64_MAX}};
  for (size_t i = 0; i < ranges.size(); ++i) {
    const SizeVariant& x = v.variants[i];
    SCOPED_TRACE(range_string(x.range));
    EXPECT_EQ(x.range.symbol, "M");
    EXPECT_EQ(x.range.lo, ranges[i].first);
    EXPECT_EQ(x.range.hi, ranges[i].second);
    EXPECT_NE(x.program.cuda.find("loom_d_M"), std::string::npos) << "M is no kernel parameter";
    if (i + 1 == ranges.size()) {
      EXPECT_NE(x.program.knob_source.find("class symbolic"), std::string::npos);
      continue;
    }
    // The knobs of the bound M at the top, M left to run time.
    const int64_t top = ranges[i].second;
    const CompiledProgram bound = compile_symbolic(
        "matmul(A[" + std::to_string(top) + ",4096]:bf16, B[4096,4096]:bf16)", "");
    for (const char* k : {"ATOM", "SWAP_AB", "BN", "BK", "STAGES", "WM", "PERSISTENT",
                          "CLUSTER_M", "CLUSTER_K", "EPILOGUE", "WARP_SPECIALIZE"})
      EXPECT_EQ(knob(x.program, k), knob(bound, k)) << k;
    EXPECT_NE(x.program.knob_source.find("as if M = " + std::to_string(top)), std::string::npos)
        << x.program.knob_source;
  }
  // The schedules, by name: swapped decode (16, then 2 x 24, 32, 40 and 48 columns), one
  // row of 128 x 64 tiles, the medium persistent 64 and 128 columns, the large 256.
  EXPECT_EQ(knob(v.variants[0].program, "SWAP_AB"), "1");
  EXPECT_EQ(knob(v.variants[0].program, "BN"), "16");
  EXPECT_EQ(knob(v.variants[1].program, "BN"), "24");
  EXPECT_EQ(knob(v.variants[2].program, "BN"), "32");
  EXPECT_EQ(knob(v.variants[3].program, "BN"), "40");
  EXPECT_EQ(knob(v.variants[4].program, "SWAP_AB"), "1");
  EXPECT_EQ(knob(v.variants[4].program, "BN"), "48");
  EXPECT_EQ(knob(v.variants[5].program, "SWAP_AB"), "0");
  EXPECT_EQ(knob(v.variants[5].program, "PERSISTENT"), "0");
  EXPECT_EQ(knob(v.variants[6].program, "BN"), "64");
  EXPECT_EQ(knob(v.variants[7].program, "BN"), "128");
  EXPECT_EQ(knob(v.variants[8].program, "BN"), "256");
  // The rule: the first range whose top holds M.
  for (auto [m, i] : std::vector<std::pair<int64_t, size_t>>{
           {1, 0}, {16, 0}, {17, 1}, {48, 1}, {49, 2}, {64, 2}, {65, 3}, {80, 3}, {81, 4},
           {95, 4}, {96, 5}, {128, 5}, {129, 6}, {256, 6}, {257, 7}, {384, 7}, {512, 7},
           {513, 8}, {4096, 8}, {int64_t(1) << 40, 8}})
    EXPECT_EQ(v.index_for({{"M", m}}), i) << "M = " << m;
  EXPECT_NE(v.describe().find("M=1..16: "), std::string::npos) << v.describe();
  EXPECT_NE(v.describe().find("M=513..: "), std::string::npos) << v.describe();
  // Every kernel compiles for sm_90a without spills.
  for (const SizeVariant& x : v.variants) {
    SCOPED_TRACE(range_string(x.range));
    const CompileResult r = nvrtc_check::compile_source(x.program.cuda, "sm_90a");
    if (!r.resources.empty()) expect_no_spill_bytes(x.program, r);
  }
}

// A run-time M guards each stored row (`row < M`); the two elements of an accumulator's
// row pair share that guard and are stored as one 4-byte pair, as a bound M stores them
// (k:040 merges the equal guards k:026 gives each element, then folds the writes). Before,
// each element was its own 2-byte store: 1.15x the bound M's time at 128 x 4096 x 4096.
TEST(WgmmaSymbolicCompile, RunTimeMStoresRowPairsAsABoundMDoes) {
  const std::string knobs =
      "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=8,"
      "WARP_SPECIALIZE=1,EPILOGUE=direct,CONSUMER_REGS=0";
  const CompiledProgram sym = compile_symbolic("matmul(A[M,4096]:bf16, B[4096,4096]:bf16)", knobs);
  const CompiledProgram bound = compile_symbolic("matmul(A[128,4096]:bf16, B[4096,4096]:bf16)", knobs);
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(sym.cuda, "st_v2_bf16("), count(bound.cuda, "st_v2_bf16("));
  EXPECT_GT(count(sym.cuda, "st_v2_bf16("), 0u);
  EXPECT_EQ(count(sym.cuda, "st_bf16("), 0u) << "2-byte scalar stores under the row guards";
  EXPECT_NE(sym.cuda.find("< loom_d_M"), std::string::npos) << "the rows past M are guarded";
}

TEST(WgmmaSymbolicCompile, OneKernelWhereRangesDoNotApply) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  auto count = [&](const std::string& expr, const std::string& knobs) {
    CompileOptions o = opt;
    o.knobs = Knobs::parse(knobs);
    const SizeVariants v = compile_size_variants(parse_expression(expr), o, expr);
    EXPECT_EQ(v.index_for({{"M", 1}}), 0u);
    EXPECT_EQ(v.variants.size() == 1, v.variants.front().range.symbol.empty());
    return v.variants.size();
  };
  // Explicit knobs, a run-time N or K too, f32 (SIMT): one kernel for every size.
  EXPECT_EQ(count("matmul(A[M,4096]:bf16, B[4096,4096]:bf16)", kSymbolicLarge), 1u);
  EXPECT_EQ(count("matmul(A[M,K]:bf16, B[K,4096]:bf16)", ""), 1u);
  EXPECT_EQ(count("matmul(A[M,4096]:f32, B[4096,4096]:f32)", ""), 1u);
  // A narrow weight: the bound small-M classes (mma.sync, split-K with its workspace that
  // grows with M) cannot serve a run-time M, so those ranges join the ranges above.
  const std::string narrow = "matmul(A[M,4096]:bf16, B[4096,1024]:bf16)";
  const SizeVariants v = compile_size_variants(parse_expression(narrow), opt, narrow);
  for (const SizeVariant& x : v.variants) {
    SCOPED_TRACE(range_string(x.range));
    EXPECT_EQ(knob(x.program, "ATOM"), "wgmma_bf16");
    for (const auto& t : x.program.state.kernel.tensors) EXPECT_NE(t.role, TensorRole::Temp);
  }
  EXPECT_EQ(v.variants.front().range.lo, 1);
  for (size_t i = 1; i < v.variants.size(); ++i)
    EXPECT_EQ(v.variants[i].range.lo, v.variants[i - 1].range.hi + 1);
}

TEST(WgmmaSymbolicCompile, EveryGpuCaseCompilesWithoutSpills) {
  for (const SymbolicCase& c : symbolic_cases()) {
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    const SizeVariants v = compile_size_variants(parse_expression(c.expr), opt, c.expr);
    for (const SizeVariant& x : v.variants) {
      SCOPED_TRACE(c.expr + " knobs " + c.knobs + " " + range_string(x.range));
      const CompiledProgram& p = x.program;
      EXPECT_NE(p.cuda.find("wgmma"), std::string::npos);
      for (const auto& sym : c.runtime)
        EXPECT_NE(p.cuda.find("loom_d_" + sym), std::string::npos) << sym << " is no parameter";
      const CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a");
      if (r.resources.empty()) continue;  // NVRTC's cache left no report
      // The top range (the schedule a run-time size had before ranges) keeps every check.
      if (&x == &v.variants.back()) nvrtc_check::expect_no_spills(p, r);
      else expect_no_spill_bytes(p, r);
    }
  }
}

TEST(WgmmaSymbolicCompile, StreamKRefusesARunTimeK) {
  // Stream-K splits a tile's slab loop by its constant trip count; a run-time K has none.
  try {
    compile_symbolic("matmul(A[4096,K]:bf16, B[K,4096]:bf16)", kSymbolicLarge + ",STREAM_K=1");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("STREAM_K=1 needs a constant K"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--dims"), std::string::npos) << msg;
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

// The default for a run-time K: K = 1001 makes A's rows 2002 bytes, which no tensor map
// addresses; refused before the driver, naming the knob and the fix.
TEST(WgmmaSymbolicCompile, DefaultRunTimeKThatTmaCannotAddressIsRefused) {
  const CompiledProgram p = compile_symbolic("matmul(A[M,K]:bf16, B[K,4096]:bf16)", "");
  const KernelProgram& kp = p.state.kernel;
  std::string a_msg;
  for (const TmaDescriptor& d : kp.kernels.at(0).tma) {
    if (d.tensor != "A") continue;
    try {
      encode_tensor_map(d, kp.tensor(d.tensor), nullptr, {{"M", 64}, {"K", 1001}});
    } catch (const Error& e) {
      a_msg = e.what();
    }
  }
  EXPECT_NE(a_msg.find("STAGE=tma needs rows of A"), std::string::npos) << a_msg;
  EXPECT_NE(a_msg.find("run-time size K = 1001"), std::string::npos) << a_msg;
  EXPECT_NE(a_msg.find("a multiple of 8"), std::string::npos) << a_msg;
}

}  // namespace
}  // namespace loom
