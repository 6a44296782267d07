// Pitched operands without a GPU: every case of the GPU test (tests/gpu/pitch_cases.h)
// compiles with NVRTC for sm_90a, the mma.sync and SIMT ones for sm_80 too, without
// spills; the driver's defaults pick the copies from a view's strides (TMA only for
// strides of whole 16-byte units); the tensor map's legality is refused by name.
#include <gtest/gtest.h>

#include "../../gpu/pitch_cases.h"
#include "codegen/cuda.h"
#include "driver/compile.h"
#include "runtime/nvrtc.h"

namespace loom {
namespace {

CompileResult nvrtc(const CompiledProgram& c, const std::string& arch) {
  CompileRequest req;
  req.source = c.cuda;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = arch;
  return compile(req, nullptr);
}

CompiledProgram compiled(const std::string& expr, const std::string& knobs, const std::string& arch) {
  CompileOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.target = Target::for_arch(arch);
  return compile_expression(expr, opt);
}

TEST(PitchCompile, EveryGpuCaseCompilesWithoutSpills) {
  for (const PitchCase& c : pitch_cases()) {
    for (const char* arch : {"sm_90a", "sm_80"}) {
      if (std::string(arch) == "sm_80" && c.family == "wgmma") continue;
      SCOPED_TRACE(c.expr + " knobs " + c.knobs + " " + arch);
      CompiledProgram p = compiled(c.expr, c.knobs, arch);
      EXPECT_NE(p.cuda.find(c.family), std::string::npos);
      CompileResult r = nvrtc(p, arch);
      EXPECT_GT(r.cubin.size(), 0u) << r.log;
      for (const auto& [name, rep] : r.resources) {
        EXPECT_EQ(rep.spill_store_bytes, 0) << name;
        EXPECT_EQ(rep.spill_load_bytes, 0) << name;
      }
    }
  }
}

// The driver's defaults read a view's strides: TMA for a 16-byte-unit pitch, the threads'
// copies for a pitch of 4-byte units, realigned copies for a 2-byte one, and no TMA for a
// batch stride that is not 16-byte units (each of which the tensor map would refuse).
TEST(PitchCompile, DefaultsFollowTheStrides) {
  auto knob = [](const std::string& expr, const char* name) {
    const CompiledProgram p = compiled(expr, "", "sm_90a");
    auto it = p.state.used_knobs.find(name);
    return it == p.state.used_knobs.end() ? std::string("-") : it->second;
  };
  EXPECT_EQ(knob("matmul(A[4096,1024|1032]:bf16, B[1024,4096]:bf16)", "STAGE"), "tma");
  EXPECT_NE(knob("matmul(A[4096,1024|1028]:bf16, B[1024,4096]:bf16)", "STAGE"), "tma");
  EXPECT_EQ(knob("matmul(A[4096,1024|1025]:bf16, B[1024,4096]:bf16)", "REALIGN"), "1");
  EXPECT_EQ(knob("bmm(A[8,2048,2048|4194312,2048]:bf16, B[8,2048,2048]:bf16)", "STAGE"), "tma");
  EXPECT_NE(knob("bmm(A[8,2048,2048|4194308,2048]:bf16, B[8,2048,2048]:bf16)", "STAGE"), "tma");
}

// Offsets reach a view's footprint: 40000 rows of 1000 elements are 4e7 elements, but rows
// 60000 apart put the last one past 2^31, so the kernel indexes in 64 bits; the same rows
// 1024 apart stay in 32-bit indices.
TEST(PitchCompile, IndexWidthFollowsTheFootprint) {
  const std::string knobs = "ATOM=mma_bf16,WM=2,WN=2,FM=2,FN=2,BK=16,STAGE=cp_async,STAGES=2";
  EXPECT_EQ(index_ctype(compiled("matmul(A[40000,1000|1024]:bf16, B[1000,64]:bf16)", knobs,
                                 "sm_90a").state.kernel),
            std::string("int"));
  EXPECT_EQ(index_ctype(compiled("matmul(A[40000,1000|60000]:bf16, B[1000,64]:bf16)", knobs,
                                 "sm_90a").state.kernel),
            std::string("long long"));
  EXPECT_EQ(index_ctype(compiled("matmul(A[64,1000]:bf16, B[1000,64]:bf16, out_pitch=40000000)",
                                 knobs, "sm_90a").state.kernel),
            std::string("long long"));
}

}  // namespace
}  // namespace loom
