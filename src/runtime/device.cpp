#include "runtime/device.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "ir/error.h"

namespace loom {
namespace {

std::string cuda_error(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// cudart folds "no libcuda" and "no GPU" into similar errors; telling them apart gives
// the user the right fix (install a driver vs. check CUDA_VISIBLE_DEVICES).
bool driver_library_present() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!h) return false;
  dlclose(h);
  return true;
}

std::string no_device_reason(cudaError_t e) {
  if (!driver_library_present())
    return "no CUDA driver found (libcuda.so.1 is not installed): GPU steps are skipped";
  if (e == cudaErrorInsufficientDriver) {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    return "the CUDA driver supports CUDA " + version_string(driver) + " but Loom was built "
           "with CUDA " + version_string(runtime) + ": update the NVIDIA driver";
  }
  return "no CUDA device is visible (cudaGetDeviceCount: " + cuda_error(e) +
         "): check the GPU, its driver and CUDA_VISIBLE_DEVICES";
}

}  // namespace

std::string DeviceInfo::arch() const {
  std::string a = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  return cc_major == 9 && cc_minor == 0 ? a + "a" : a;
}

std::optional<DeviceInfo> probe_device(int ordinal, std::string* why_not) {
  auto fail = [&](std::string why) -> std::optional<DeviceInfo> {
    if (why_not) *why_not = std::move(why);
    return std::nullopt;
  };
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // the probe's failure must not leak into later runtime calls
    return fail(no_device_reason(e));
  }
  if (count == 0) return fail(no_device_reason(cudaErrorNoDevice));
  if (ordinal < 0 || ordinal >= count)
    return fail("CUDA device " + std::to_string(ordinal) + " does not exist: " +
                std::to_string(count) + " device(s) are visible (ordinals 0.." +
                std::to_string(count - 1) + ")");

  cudaDeviceProp p{};
  if ((e = cudaGetDeviceProperties(&p, ordinal)) != cudaSuccess)
    return fail("cannot read the properties of CUDA device " + std::to_string(ordinal) +
                " (cudaGetDeviceProperties: " + cuda_error(e) + ")");
  DeviceInfo d;
  d.ordinal = ordinal;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = p.l2CacheSize;
  d.smem_per_block_optin = int64_t(p.sharedMemPerBlockOptin);
  d.smem_per_sm = int64_t(p.sharedMemPerMultiprocessor);
  d.regs_per_sm = p.regsPerMultiprocessor;
  d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  d.max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
  d.mem_bus_width = p.memoryBusWidth;
  d.global_mem_bytes = int64_t(p.totalGlobalMem);
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain.
  if ((e = cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, ordinal)) != cudaSuccess ||
      (e = cudaDeviceGetAttribute(&d.mem_clock_khz, cudaDevAttrMemoryClockRate, ordinal)) !=
          cudaSuccess)
    return fail("cannot read the clocks of CUDA device " + std::to_string(ordinal) +
                " (cudaDeviceGetAttribute: " + cuda_error(e) + ")");
  cudaDriverGetVersion(&d.driver_version);
  cudaRuntimeGetVersion(&d.runtime_version);
  return d;
}

void make_device_current(int ordinal) {
  cudaError_t e = cudaSetDevice(ordinal);
  if (e == cudaSuccess) e = cudaFree(nullptr);  // creates the primary context, binds it
  if (e != cudaSuccess)
    throw Error("cannot make CUDA device " + std::to_string(ordinal) + " current (" +
                cuda_error(e) + ")");
}

int64_t device_free_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t e = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (e != cudaSuccess) throw Error("cannot read the GPU's free memory (" + cuda_error(e) + ")");
  return int64_t(free_bytes);
}

}  // namespace loom
