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

// A realigned chunk load (ld_chunks16) never reads past its bound: for a view that is the
// footprint. A[1000,999|1001]'s last rows start past 1000 x 999 elements; bounded by the
// element count (999000) they were zero-filled on the GPU (2026-11-27 checkpoint: rows near
// M's end read 0), while the interpreter, which bounds by the footprint, was right.
TEST(PitchCompile, ChunkLoadsAreBoundedByTheFootprint) {
  const CompiledProgram p = compiled("matmul(A[1000,999|1001]:bf16, B[999,520|521]:bf16)",
                                     "ATOM=mma_bf16,WM=2,WN=2,FM=2,FN=2,BK=16,STAGE=sync,"
                                     "STAGES=2,REALIGN=1",
                                     "sm_90a");
  size_t at = 0;
  int calls = 0, a = 0, b = 0;
  while ((at = p.cuda.find("loom::ld_chunks16(", at)) != std::string::npos) {
    const std::string call = p.cuda.substr(at, p.cuda.find(';', at) - at);
    ++calls;
    // A: 999 x 1001 + 999 = 1000998 elements; B: 998 x 521 + 520 = 520478.
    a += call.find("loom_t_A") != std::string::npos && call.find("1000998") != std::string::npos;
    b += call.find("loom_t_B") != std::string::npos && call.find("520478") != std::string::npos;
    EXPECT_EQ(call.find("999000"), std::string::npos) << call;
    at += 1;
  }
  EXPECT_GT(calls, 0);
  EXPECT_GT(a, 0);
  EXPECT_GT(b, 0);
}

}  // namespace
}  // namespace loom
