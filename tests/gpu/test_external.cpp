// driver/external.h on the GPU without Python: Loom's program launched on buffers it
// does not own (as the binding does with torch tensors) gives the verified answer, on
// a stream the caller created; new pointers rebind the launch. Also `loom run --bench`
// on attention plans its cold L2 like a GEMM (rotation or read flush, never the old
// write flush by default) and reports the kernel row. Skips without a GPU.
#include <gtest/gtest.h>

#include "bench/cuda_call.h"
#include "bench/verify_attention.h"
#include "driver/external.h"
#include "driver/run.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "runtime/device.h"

namespace loom {
namespace {

class ExternalGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto dev = probe_device(0, &why);
    if (!dev) GTEST_SKIP() << why;
    make_device_current(0);
    dev_ = *dev;
  }
  DeviceInfo dev_;
};

// The caller's buffers: a DeviceTensors of Loom's own stands in for torch's storage.
struct CallerBuffers {
  Bindings host;
  DeviceTensors dev;
  std::map<std::string, uintptr_t> ptrs;
  CallerBuffers(const ExternalProgram& p, uint64_t seed) {
    make_random_inputs(p.program.state.kernel, host, seed);
    dev.allocate(p.program.state.kernel, host);
    for (const auto& t : p.tensors) ptrs[t.name] = reinterpret_cast<uintptr_t>(dev.ptr(t.name));
  }
};

TEST_F(ExternalGpu, AttentionOnCallerBuffersAndStream) {
  const std::string e =
      "attention(Q[2,8,1000,128]:bf16, K[2,2,1000,128]:bf16, V[2,2,1000,128]:bf16, causal=true)";
  ExternalProgram p = compile_external(e, Knobs{}, target_for_device(dev_));
  Graph g = parse_expression(e);
  ExternalRunner runner(p, 0);
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  for (uint64_t seed : {1, 2}) {  // the second set rebinds the launcher
    SCOPED_TRACE(seed);
    CallerBuffers b(p, seed);
    b.dev.poison_outputs(p.program.state.kernel, s);
    runner.launch(b.ptrs, s);
    LOOM_CUDA_RT(cudaStreamSynchronize(s));
    std::map<std::string, HostTensor> inputs;
    for (const char* n : {"Q", "K", "V"}) inputs[n] = b.host.tensors.at(n);
    HostTensor out = b.dev.download(p.program.state.kernel, "out", {});
    AttentionVerify v = verify_attention(g, inputs, out, nullptr);
    EXPECT_TRUE(v.passed()) << v.message();
  }
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

TEST_F(ExternalGpu, ProgramForAnotherArchIsRefused) {
  const std::string other = dev_.arch() == "sm_80" ? "sm_90a" : "sm_80";
  ExternalProgram p = compile_external("matmul(A[64,64]:f16, B[64,64]:f16)", Knobs{},
                                       Target::for_arch(other));
  try {
    ExternalRunner r(p, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compile it for this GPU"), std::string::npos) << e.what();
  }
}

TEST_F(ExternalGpu, AttentionBenchPlansTheL2LikeGemm) {
  RunOptions opt;
  opt.bench = true;
  opt.timing.reps = 5;
  RunReport r = run_expression(
      "attention(Q[1,4,256,64]:bf16, K[1,4,256,64]:bf16, V[1,4,256,64]:bf16)", opt);
  ASSERT_TRUE(r.verify.passed) << r.verify.message;
  ASSERT_EQ(r.backends.size(), 1u);
  EXPECT_EQ(r.header.find("flush: write"), std::string::npos) << r.header;
  EXPECT_NE(r.header.find("L2:"), std::string::npos) << r.header;
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_TRUE(r.kernels[0].us.has_value());
  EXPECT_GT(r.kernels[0].regs, 0);
  EXPECT_NE(r.kernels[0].knobs.find("BLOCK_M="), std::string::npos);
}

}  // namespace
}  // namespace loom
