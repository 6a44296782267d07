#include "runtime/driver.h"

#include <atomic>
#include <mutex>
#include <optional>
#include <string>

#include "ir/error.h"
#include "runtime/device.h"

namespace loom {
namespace {

// Asking for the ABI of the toolkit we compiled against makes each pointer's type (from
// this <cuda.h>) match the function the driver hands back.
template <class Fn>
void resolve(Fn& fn, const char* symbol) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &p, CUDA_VERSION, cudaEnableDefault,
                                                   &status);
  if (e != cudaSuccess || status != cudaDriverEntryPointSuccess || !p) {
    std::string why = status == cudaDriverEntryPointVersionNotSufficent
                          ? "the installed driver is older than CUDA " +
                                std::to_string(CUDA_VERSION / 1000) + "." +
                                std::to_string(CUDA_VERSION % 1000 / 10) +
                                ": update the NVIDIA driver"
                          : std::string(cudaGetErrorString(e));
    throw Error(std::string("cannot get the driver entry point ") + symbol + ": " + why);
  }
  fn = reinterpret_cast<Fn>(p);
}

DriverApi load_driver() {
  std::string why;
  if (!probe_device(0, &why)) throw Error(why);
  check_cuda(cudaFree(nullptr), "cudaFree(0) (creating the primary context)");
  DriverApi d{};
#define LOOM_RESOLVE(name) resolve(d.name, #name)
  LOOM_RESOLVE(cuModuleLoadData);
  LOOM_RESOLVE(cuModuleUnload);
  LOOM_RESOLVE(cuModuleGetFunction);
  LOOM_RESOLVE(cuLaunchKernel);
  LOOM_RESOLVE(cuLaunchKernelEx);
  LOOM_RESOLVE(cuFuncGetAttribute);
  LOOM_RESOLVE(cuFuncSetAttribute);
  LOOM_RESOLVE(cuOccupancyMaxActiveBlocksPerMultiprocessor);
  LOOM_RESOLVE(cuOccupancyMaxActiveClusters);
  LOOM_RESOLVE(cuTensorMapEncodeTiled);
  LOOM_RESOLVE(cuGetErrorName);
  LOOM_RESOLVE(cuGetErrorString);
  LOOM_RESOLVE(cuCtxGetCurrent);
#undef LOOM_RESOLVE
  return d;
}

}  // namespace

const DriverApi& driver() {
  // Not std::call_once: a failed load (no GPU yet, say) must be retried by a later call.
  static std::mutex mu;
  static std::optional<DriverApi> api;
  static std::atomic<const DriverApi*> ready{nullptr};
  if (const DriverApi* p = ready.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> lock(mu);
  if (!api) {
    api = load_driver();
    ready.store(&*api, std::memory_order_release);
  }
  return *api;
}

void ensure_context() {
  CUcontext ctx = nullptr;
  check_cu(driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx) check_cuda(cudaFree(nullptr), "cudaFree(0) (binding the primary context)");
}

void check_cu(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* desc = nullptr;
  const DriverApi& d = driver();
  d.cuGetErrorName(r, &name);
  d.cuGetErrorString(r, &desc);
  std::string msg = std::string(what) + " failed: " + (name ? name : "unknown CUresult") +
                    " (" + (desc ? desc : std::to_string(int(r))) + ")";
  if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE ||
      r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    msg += ": the cubin was built for another GPU; compile for this device's arch "
           "(DeviceInfo::arch())";
  throw Error(msg);
}

void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  throw Error(std::string(what) + " failed: " + cudaGetErrorName(e) + " (" +
              cudaGetErrorString(e) + ")");
}

}  // namespace loom
