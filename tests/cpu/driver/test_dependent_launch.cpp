// k:065_dependent_launch without a GPU: which programs get programmatic dependent launch,
// what the generated CUDA does with it (griddepcontrol.wait before anything else in the
// waiting kernel), that it assembles for sm_90a, that sm_80 and DEPENDENT_LAUNCH=0 are left
// alone, that the program still computes the same on the interpreter, and the verifier's
// rule that a program's first kernel never waits. The GPU run of the split-K default
// (tests/gpu split-K cases, `loom run --bench`) checks the launches themselves.
#include <gtest/gtest.h>

#include "../passes/pass_check.h"
#include "driver/compile.h"
#include "ir/error.h"
#include "nvrtc_check.h"

namespace loom {
namespace {

const char* kSplitK = "matmul(A[128,16384]:bf16, B[16384,128]:bf16)";

CompiledProgram compiled(const std::string& expr, const std::string& knobs = "",
                         const std::string& arch = "sm_90a") {
  CompileOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.target = Target::for_arch(arch);
  return compile_expression(expr, opt);
}

// The body of kernel `name` in `cuda`, from its opening brace to the next kernel.
std::string kernel_body(const std::string& cuda, const std::string& name) {
  size_t at = cuda.find("\n" + name + "(");
  EXPECT_NE(at, std::string::npos) << name;
  size_t open = cuda.find(") {\n", at);
  size_t next = cuda.find("extern \"C\" __global__", open);
  return cuda.substr(open, next == std::string::npos ? std::string::npos : next - open);
}

TEST(DependentLaunch, SplitKReduceWaitsForTheSplitKernel) {
  CompiledProgram c = compiled(kSplitK);  // the sm_90a default: SPLITK=11, reduce kernel
  const auto& ks = c.state.kernel.kernels;
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_TRUE(ks[0].trigger_dependents);
  EXPECT_FALSE(ks[0].wait_prior_grid);
  EXPECT_TRUE(ks[1].wait_prior_grid);
  EXPECT_FALSE(ks[1].trigger_dependents);
  EXPECT_EQ(c.state.used_knobs.at("DEPENDENT_LAUNCH"), "1");
  // The wait is the reduce kernel's first statement: nothing reads the partials before it.
  const std::string reduce = kernel_body(c.cuda, ks[1].name);
  EXPECT_EQ(reduce.find("asm volatile(\"griddepcontrol.wait;\""), reduce.find('\n') + 3)
      << reduce.substr(0, 300);
  EXPECT_NE(kernel_body(c.cuda, ks[0].name).find("griddepcontrol.launch_dependents"),
            std::string::npos);
  EXPECT_NE(print(c.state.kernel).find("waits_prior_grid"), std::string::npos);
  CompileResult r = nvrtc_check::compile_source(c.cuda, "sm_90a");
  ASSERT_GT(r.cubin.size(), 0u) << r.log;
  if (!r.resources.empty()) nvrtc_check::expect_no_spills(c, r);
}

TEST(DependentLaunch, OffByKnobOnSm80AndForOneKernel) {
  CompiledProgram off = compiled(kSplitK, "DEPENDENT_LAUNCH=0");
  for (const auto& k : off.state.kernel.kernels) {
    EXPECT_FALSE(k.wait_prior_grid || k.trigger_dependents) << k.name;
  }
  EXPECT_EQ(off.cuda.find("griddepcontrol"), std::string::npos);
  // sm_80 has no griddepcontrol: the same two-kernel program launches in stream order.
  CompiledProgram ampere =
      compiled(kSplitK, "BM=64,BN=64,FM=8,FN=4,BK=16,SPLITK=4,SPLITK_MODE=reduce", "sm_80");
  ASSERT_EQ(ampere.state.kernel.kernels.size(), 2u);
  EXPECT_EQ(ampere.cuda.find("griddepcontrol"), std::string::npos);
  EXPECT_GT(nvrtc_check::compile_source(ampere.cuda, "sm_80").cubin.size(), 0u);
  CompiledProgram one = compiled("matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)");
  ASSERT_EQ(one.state.kernel.kernels.size(), 1u);
  EXPECT_FALSE(one.state.kernel.kernels[0].trigger_dependents);
  EXPECT_FALSE(one.state.used_knobs.count("DEPENDENT_LAUNCH"));
}

// The atomic combine's program is a zero fill then the split kernel: the split kernel
// waits for the fill. Every pass, the last included, still computes the same.
TEST(DependentLaunch, ProgramsStillComputeTheSameOnTheInterpreter) {
  for (const char* mode : {"reduce", "atomic"}) {
    CompileState s = passcheck::check_every_pass(
        "matmul(A[40,96]:f32, B[96,24]:f32)",
        Knobs::parse(std::string("BM=16,BN=16,FM=2,FN=2,BK=8,SPLITK=3,SPLITK_MODE=") + mode),
        7);
    ASSERT_EQ(s.kernel.kernels.size(), 2u) << mode;
    EXPECT_TRUE(s.kernel.kernels[1].wait_prior_grid) << mode;
  }
}

TEST(DependentLaunch, VerifierRefusesAFirstKernelThatWaits) {
  CompiledProgram c = compiled(kSplitK);
  KernelProgram p = c.state.kernel;
  p.kernels[0].wait_prior_grid = true;
  try {
    verify(p);
    FAIL() << "verified";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("first kernel"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
