// Every line of the benchmark case files compiles to CUDA for sm_90a with the knobs the
// driver resolves for it (defaults, or the line's `@KNOBS` over them), without a GPU. The
// defaults are rules from several hands (the large-grid, split-K, decode and epilogue rules
// of the kernel families, src/passes/families/); this is where a combination one rule makes and a pass
// refuses shows up on the CPU instead of on the device (2026-11-22: the swapped tf32
// default met the strip epilogue, which k:053 refuses for a transposed tile).
#include <gtest/gtest.h>

#include <fstream>

#include "driver/compile.h"
#include "ir/error.h"

namespace loom {
namespace {

std::vector<std::string> case_lines(const std::string& file) {
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/" + file);
  EXPECT_TRUE(in.good()) << file;
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l[0] != '#') lines.push_back(l);
  return lines;
}

TEST(BenchCases, EveryHopperGemmCaseCompilesForSm90a) {
  const std::vector<std::string> lines = case_lines("bench/cases/hopper-gemm-defaults.txt");
  ASSERT_GE(lines.size(), 16u);
  for (const std::string& line : lines) {
    SCOPED_TRACE(line);
    const size_t at = line.find('@');
    CompileOptions opt;
    opt.target = Target::for_arch("sm_90a");
    if (at != std::string::npos) opt.knobs = Knobs::parse(line.substr(at + 1));
    try {
      const CompiledProgram p = compile_expression(line.substr(0, at), opt);
      EXPECT_NE(p.cuda.find("wgmma"), std::string::npos) << "not a wgmma kernel";
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

}  // namespace
}  // namespace loom
