// The CUDA driver API, reached through cudart's cudaGetDriverEntryPointByVersion instead
// of linking libcuda: CI and development machines have no libcuda.so.1, and a binary
// that links it does not even start there. Only what is called goes through here.
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>

namespace loom {

struct DriverApi {
  decltype(&::cuModuleLoadData) cuModuleLoadData;
  decltype(&::cuModuleUnload) cuModuleUnload;
  decltype(&::cuModuleGetFunction) cuModuleGetFunction;
  decltype(&::cuLaunchKernel) cuLaunchKernel;
  decltype(&::cuLaunchKernelEx) cuLaunchKernelEx;  // thread block clusters
  decltype(&::cuFuncGetAttribute) cuFuncGetAttribute;
  decltype(&::cuFuncSetAttribute) cuFuncSetAttribute;
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor)
      cuOccupancyMaxActiveBlocksPerMultiprocessor;
  decltype(&::cuOccupancyMaxActiveClusters) cuOccupancyMaxActiveClusters;
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled;
  decltype(&::cuGetErrorName) cuGetErrorName;
  decltype(&::cuGetErrorString) cuGetErrorString;
  decltype(&::cuCtxGetCurrent) cuCtxGetCurrent;
};

// Resolves the entry points once (thread-safe) after making sure the runtime has
// created the primary context. Throws loom::Error saying why when there is no driver
// or no GPU; a later call tries again.
const DriverApi& driver();

// Driver calls need a current context, and cudart binds its primary context to a
// thread only when that thread makes a runtime call: worker threads that go straight
// to the driver would see CUDA_ERROR_INVALID_CONTEXT. Cheap when already bound.
void ensure_context();

// Throw loom::Error naming the call and the error (name and description) on failure.
void check_cu(CUresult r, const char* what);
void check_cuda(cudaError_t e, const char* what);

}  // namespace loom
