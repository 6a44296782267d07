// NVRTC -> cubin -> module load -> launch on a real GPU. Skips, printing why, elsewhere.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "ir/error.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"
#include "runtime/watchdog.h"

namespace loom {
namespace {

const char* kSource = R"(#include "mix.cuh"
extern "C" __global__ void write_ids(int* out, int scale) {
  extern __shared__ int stage[];
  int flat = threadIdx.z * blockDim.y * blockDim.x + threadIdx.y * blockDim.x + threadIdx.x;
  int block = blockIdx.y * gridDim.x + blockIdx.x;
  stage[flat] = loom_mix(threadIdx.x, threadIdx.y, threadIdx.z) * scale;
  __syncthreads();
  int n = blockDim.x * blockDim.y * blockDim.z;
  out[block * n + flat] = stage[n - 1 - flat] + block;
}
)";

int mix(int x, int y, int z) { return x + 100 * y + 10000 * z; }

class GpuRuntime : public testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    dev_ = probe_device(0, &why);
    if (!dev_) GTEST_SKIP() << why;
  }
  std::optional<DeviceInfo> dev_;
};

TEST_F(GpuRuntime, CompileLoadLaunchAndReadBack) {
  CompileRequest req;
  req.arch = dev_->arch();
  req.source = kSource;
  req.headers = {{"mix.cuh",
                  "__device__ inline int loom_mix(int x, int y, int z) { "
                  "return x + 100 * y + 10000 * z; }\n"}};
  CompileResult compiled = compile(req, nullptr);
  Module mod = Module::load(compiled.cubin);
  CUfunction f = mod.function("write_ids");

  FuncAttributes attrs = func_attributes(f);
  EXPECT_EQ(attrs.registers, compiled.resources.at("write_ids").registers);
  EXPECT_GE(attrs.max_threads, 1024);

  const unsigned bx = 8, by = 4, bz = 2, gx = 3, gy = 2;
  const int threads = bx * by * bz, blocks = gx * gy, scale = 3;
  const unsigned smem = threads * sizeof(int);
  EXPECT_GT(occupancy_blocks_per_sm(f, threads, int(smem)), 0);

  int* out = nullptr;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&out), threads * blocks * sizeof(int)), "cudaMalloc");
  check_cuda(cudaMemset(out, 0xff, threads * blocks * sizeof(int)), "cudaMemset");
  LaunchConfig cfg;
  cfg.grid[0] = gx, cfg.grid[1] = gy;
  cfg.block[0] = bx, cfg.block[1] = by, cfg.block[2] = bz;
  cfg.dynamic_smem = smem;
  int scale_arg = scale;
  void* args[] = {&out, &scale_arg};
  launch(f, cfg, args);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<int> host(threads * blocks);
  check_cuda(cudaMemcpy(host.data(), out, host.size() * sizeof(int), cudaMemcpyDeviceToHost),
             "cudaMemcpy");
  cudaFree(out);

  for (int b = 0; b < blocks; ++b)
    for (unsigned z = 0; z < bz; ++z)
      for (unsigned y = 0; y < by; ++y)
        for (unsigned x = 0; x < bx; ++x) {
          int flat = (z * by + y) * bx + x;
          int src = threads - 1 - flat;
          int sx = src % bx, sy = src / bx % by, sz = src / (bx * by);
          ASSERT_EQ(host[b * threads + flat], mix(sx, sy, sz) * scale + b)
              << "block " << b << " thread (" << x << "," << y << "," << z << ")";
        }
}

TEST_F(GpuRuntime, LargeDynamicSmemNeedsOptIn) {
  CompileRequest req;
  req.arch = dev_->arch();
  req.source = R"(extern "C" __global__ void big(int* out) {
  extern __shared__ int s[];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
})";
  Module mod = Module::load(compile(req, nullptr).cubin);
  CUfunction f = mod.function("big");
  int* out = nullptr;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&out), 128 * sizeof(int)), "cudaMalloc");
  void* args[] = {&out};
  LaunchConfig cfg;
  cfg.block[0] = 128;
  cfg.dynamic_smem = unsigned(dev_->smem_per_block_optin);
  EXPECT_THROW(launch(f, cfg, args), Error);
  set_dynamic_smem(f, int(cfg.dynamic_smem));
  launch(f, cfg, args);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cudaFree(out);
}

TEST_F(GpuRuntime, BadLaunchShapesAndNamesAreClearErrors) {
  CompileRequest req;
  req.arch = dev_->arch();
  req.source = "extern \"C\" __global__ void nop() {}\n";
  Module mod = Module::load(compile(req, nullptr).cubin);
  EXPECT_THROW(mod.function("missing"), Error);
  CUfunction f = mod.function("nop");
  LaunchConfig cfg;
  cfg.grid[1] = 70000;
  try {
    launch(f, cfg, nullptr);
    FAIL() << "grid.y = 70000 must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grid.y = 70000"), std::string::npos) << e.what();
  }
  cfg.grid[1] = 1;
  cfg.block[0] = 2048;
  EXPECT_THROW(launch(f, cfg, nullptr), Error);
}

TEST_F(GpuRuntime, ModulesMoveWithoutDoubleUnload) {
  CompileRequest req;
  req.arch = dev_->arch();
  req.source = "extern \"C\" __global__ void nop() {}\n";
  CompileResult r = compile(req, nullptr);
  Module a = Module::load(r.cubin);
  Module b = std::move(a);
  EXPECT_EQ(a.handle(), nullptr);
  Module c = Module::load(r.cubin);
  c = std::move(b);
  EXPECT_NE(c.function("nop"), nullptr);
}

TEST_F(GpuRuntime, HungKernelBecomesAnErrorNotAHang) {
  // The kernel spins until the host releases it through mapped host memory: a hang the
  // test can end, so the context stays usable after the watchdog has fired.
  CompileRequest req;
  req.arch = dev_->arch();
  req.source =
      "extern \"C\" __global__ void spin(volatile int* release) {\n"
      "  while (*release == 0) asm volatile(\"nanosleep.u32 1000;\");\n"
      "}\n";
  CompileResult r = compile(req, nullptr);
  Module mod = Module::load(r.cubin);
  int* host_flag = nullptr;
  check_cuda(cudaHostAlloc(reinterpret_cast<void**>(&host_flag), sizeof(int), cudaHostAllocMapped),
             "cudaHostAlloc");
  *static_cast<volatile int*>(host_flag) = 0;
  int* dev_flag = nullptr;
  check_cuda(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_flag), host_flag, 0),
             "cudaHostGetDevicePointer");
  cudaStream_t stream;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  LaunchConfig cfg;
  cfg.stream = stream;
  void* args[] = {&dev_flag};
  launch(mod.function("spin"), cfg, args);
  try {
    sync_with_timeout(stream, 0.5, "the spin kernel");
    FAIL() << "a kernel that never ends must time out";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the spin kernel did not finish within 0.5 s"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("hung"), std::string::npos) << e.what();
  }
  *static_cast<volatile int*>(host_flag) = 1;
  sync_with_timeout(stream, 30, "the released spin kernel");  // ends once released
  check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  check_cuda(cudaFreeHost(host_flag), "cudaFreeHost");
}

}  // namespace
}  // namespace loom
