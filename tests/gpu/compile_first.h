// GPU test cases compile through the whole pipeline (parse, every pass, codegen for
// sm_90a) before a machine without a GPU skips them, so a malformed expression or knob
// set fails CPU CI instead of surfacing only on the GPU run (one did, on 2026-11-22).
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "driver/compile.h"
#include "driver/run.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "runtime/device.h"

namespace loom {

inline void expect_case_compiles(const std::string& expr, const std::string& knobs,
                                 const std::map<std::string, int64_t>& sizes = {}) {
  try {
    CompileOptions opt;
    opt.knobs = Knobs::parse(knobs);
    opt.target = Target::for_arch("sm_90a");
    opt.sizes = sizes;
    Graph g = parse_expression(expr);
    if (!sizes.empty()) g = bind_sizes(g, sizes);
    EXPECT_FALSE(compile_graph(g, opt, expr).cuda.empty()) << expr << " knobs " << knobs;
  } catch (const Error& e) {
    ADD_FAILURE() << "the case does not compile: " << expr << " knobs " << knobs << ": "
                  << e.what();
  }
}

// The SetUp of a parameterized GPU test: compile the case, then skip without a GPU (a
// case that failed to compile is reported failed, not skipped silently).
inline void compile_then_require_gpu(const std::string& expr, const std::string& knobs,
                                     const std::map<std::string, int64_t>& sizes = {}) {
  expect_case_compiles(expr, knobs, sizes);
  if (::testing::Test::HasFailure()) GTEST_SKIP() << "not run: the case does not compile";
  std::string why;
  if (!probe_device(0, &why)) GTEST_SKIP() << "no GPU: " << why;
}

}  // namespace loom
