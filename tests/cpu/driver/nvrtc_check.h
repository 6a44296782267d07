// What the driver tests that compile generated kernels with NVRTC (no GPU needed) share:
// the compile itself, and the check that ptxas spilled nothing in any kernel of a program.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "codegen/cuda.h"
#include "driver/compile.h"
#include "runtime/nvrtc.h"

namespace loom::nvrtc_check {

inline CompileResult compile_source(const std::string& source, const std::string& arch,
                                    const std::string& name = "generated.cu") {
  CompileRequest req;
  req.name = name;
  req.source = source;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = arch;
  return compile(req, nullptr);
}

// ptxas carried out every setmaxnreg Loom emitted: it drops them, with only an info line
// (C7508), in a kernel whose register count at entry it is not given.
inline void expect_setmaxnreg_honoured(const CompileResult& r) {
  EXPECT_EQ(r.log.find("'setmaxnreg' ignored"), std::string::npos) << r.log;
}

// ptxas issued the wgmmas asynchronously as written: short of registers it serializes them
// (a wait after each), with only an info line (C7512 "Potential Performance Loss"), and the
// kernel runs correct but without any overlap of the tensor cores with the rest.
inline void expect_wgmma_not_serialized(const CompileResult& r) {
  EXPECT_EQ(r.log.find("wgmma.mma_async instructions are serialized"), std::string::npos) << r.log;
}

// Every kernel of `p` has a ptxas report in `r`, without spill stores or loads, and no
// setmaxnreg was ignored. The caller skips first where NVRTC's cache left no report
// (r.resources empty).
inline void expect_no_spills(const CompiledProgram& p, const CompileResult& r) {
  expect_setmaxnreg_honoured(r);
  for (const auto& k : p.state.kernel.kernels) {
    ASSERT_TRUE(r.resources.count(k.name)) << r.log;
    EXPECT_EQ(r.resources.at(k.name).spill_store_bytes, 0) << k.name;
    EXPECT_EQ(r.resources.at(k.name).spill_load_bytes, 0) << k.name;
  }
}

}  // namespace loom::nvrtc_check
