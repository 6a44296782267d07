// The wgmma family's declared default candidates (src/passes/families/wgmma_candidates.h)
// compile with NVRTC for sm_90a without spills on every shape of the model suite
// (bench/suites/models.txt) they would take, so neither their defaults (the H200's) nor a
// GEMM_FORM measurement ships a kernel that spills: the one-row pairs (128-row linears as
// 2-CTA clusters along M of 64-row CTAs sharing W's slab: one 2-CTA cluster launch whose
// W half is multicast). The H200 target's defaults for those shapes compile the same way.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "ir/error.h"
#include "frontend/parser.h"
#include "nvrtc_check.h"
#include "passes/families/gemm_shape.h"
#include "passes/families/wgmma_candidates.h"

namespace loom {
namespace {

// The suite's shapes that `applies` takes.
template <typename Applies>
std::vector<std::string> suite_shapes(Applies applies) {
  std::vector<std::string> out;
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/bench/suites/models.txt");
  const Target t = Target::for_arch("sm_90a");
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (!line.empty() && applies(gemm_shape_of(parse_expression(line)), t))
      out.push_back(line);
  }
  return out;
}

TEST(OneRowPairsCompile, EveryOneRowSuiteShapeCompilesWithoutSpills) {
  const std::vector<std::string> shapes = suite_shapes(wgmma_one_row_pairs_apply);
  ASSERT_GE(shapes.size(), 8u) << "the suite's 128-row linears";
  for (const std::string& e : shapes) {
    SCOPED_TRACE(e);
    const GemmShape s = gemm_shape_of(parse_expression(e));
    CompileOptions opt;
    opt.target = Target::for_arch("sm_90a");
    opt.knobs = wgmma_one_row_pairs(s, opt.target);
    opt.knobs.set("ATOM", atom_16bit(s, "wgmma"));
    const CompiledProgram p = compile_expression(e, opt);
    EXPECT_NE(p.cuda.find("__cluster_dims__(2, 1, 1)"), std::string::npos);
    EXPECT_NE(p.cuda.find("tma_load_2d_multicast(&loom_t_W_s"), std::string::npos)
        << "W's half multicast to both CTAs";
    const CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a", "test_one_row_pairs.cu");
    ASSERT_GT(r.cubin.size(), 0u) << r.log;
    if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache skipped ptxas' report";
    nvrtc_check::expect_no_spills(p, r);
  }
}

// The H200's defaults where they pair CTAs along M and the H100's do not (the one-row
// pairs at N = 8192 and 10240, CLUSTER_M=2 on the K = 4096 medium grids): those kernels
// compile without spills.
TEST(FastDramDefaultsCompile, EverySuiteShapePairedOnlyThereCompilesWithoutSpills) {
  CompileOptions h100, h200;
  h100.target = h200.target = Target::for_arch("sm_90a");
  h200.target.dram_bytes_per_s = int64_t(3201000) * 1000 * 2 * 768;
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/bench/suites/models.txt");
  int differing = 0, pairs = 0;
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.empty()) continue;
    SCOPED_TRACE(line);
    // The rules of this change: 2-CTA clusters along M on the H200 only (the card's other
    // differences, the bmm rings and the decode's K split, have their own compile tests).
    const CompiledProgram fast = compile_expression(line, h200);
    auto cluster_m = [](const CompiledProgram& p) {
      const auto it = p.state.used_knobs.find("CLUSTER_M");
      return it == p.state.used_knobs.end() ? std::string("1") : it->second;
    };
    if (cluster_m(fast) != "2" || cluster_m(compile_expression(line, h100)) == "2") continue;
    ++differing;
    EXPECT_NE(fast.cuda.find("__cluster_dims__(2, 1, 1)"), std::string::npos);
    if (fast.state.used_knobs.count("BM") && fast.state.used_knobs.at("BM") == "64") ++pairs;
    const CompileResult r =
        nvrtc_check::compile_source(fast.cuda, "sm_90a", "test_h200_defaults.cu");
    ASSERT_GT(r.cubin.size(), 0u) << r.log;
    if (r.resources.empty()) GTEST_SKIP() << "NVRTC's cache skipped ptxas' report";
    nvrtc_check::expect_no_spills(fast, r);
  }
  EXPECT_GE(differing, 3) << "128 x 8192 -> 8192 and 10240, 512 x 4096 -> 4096";
  EXPECT_GE(pairs, 2) << "128 x 8192 -> 8192 and 10240";
}

CompiledProgram compile_sm90a(const std::string& e, const std::string& knobs) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  opt.knobs = Knobs::parse(knobs);
  return compile_expression(e, opt);
}

// GEMM_FORM puts a candidate in place of the defaults (what the GPU measures it with): the
// same kernel as its knob set given explicitly, said in the knob source; explicit knobs
// still override it; refused, with the candidate's reach and the fix, where it does not
// take the shape or the target.
TEST(GemmForm, PutsTheCandidateInPlaceOfTheDefaults) {
  const std::string e = "linear(X[128,4096]:bf16, W[6144,4096]:bf16)";
  const GemmShape s = gemm_shape_of(parse_expression(e));
  Knobs k = wgmma_one_row_pairs(s, Target::for_arch("sm_90a"));
  k.set("ATOM", "wgmma_bf16");
  const CompiledProgram form = compile_sm90a(e, "GEMM_FORM=one_row_pairs");
  const CompiledProgram given = compile_sm90a(e, k.str());
  EXPECT_EQ(form.cuda.substr(form.cuda.find('\n')), given.cuda.substr(given.cuda.find('\n')));
  EXPECT_NE(form.knob_source.find("candidate GEMM_FORM=one_row_pairs"), std::string::npos)
      << form.knob_source;
  EXPECT_EQ(compile_sm90a(e, "GEMM_FORM=one_row_pairs,STAGES=6").state.used_knobs.at("STAGES"), "6");
  EXPECT_EQ(compile_sm90a(e, "GEMM_FORM=default").cuda, compile_sm90a(e, "").cuda);
}

TEST(GemmForm, RefusedWhereTheCandidateDoesNotTakeTheShape) {
  auto error_of = [](const std::string& e, const std::string& knobs, const std::string& arch) {
    CompileOptions opt;
    opt.target = Target::for_arch(arch);
    opt.knobs = Knobs::parse(knobs);
    try {
      compile_expression(e, opt);
    } catch (const Error& err) {
      return std::string(err.what());
    }
    return std::string();
  };
  const std::string e = "linear(X[128,4096]:bf16, W[6144,4096]:bf16)";
  std::string err =
      error_of("linear(X[512,4096]:bf16, W[4096,4096]:bf16)", "GEMM_FORM=one_row_pairs", "sm_90a");
  EXPECT_NE(err.find("65 to 128 rows (M is 512)"), std::string::npos) << err;
  EXPECT_NE(err.find("use GEMM_FORM=default"), std::string::npos) << err;
  err = error_of(e, "GEMM_FORM=one_row_pairs", "sm_80");
  EXPECT_NE(err.find("on sm_90a"), std::string::npos) << err;
  EXPECT_EQ(error_of(e, "GEMM_FORM=default", "sm_80"), "");
  err = error_of(e, "GEMM_FORM=one_row_pairs,ATOM=mma_bf16", "sm_90a");
  EXPECT_NE(err.find("cannot run with the explicit ATOM=mma_bf16"), std::string::npos) << err;
}

}  // namespace
}  // namespace loom
