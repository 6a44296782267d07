// A loaded cubin and launching its kernels through the driver API (see driver.h for why
// the driver is reached indirectly). cudaStream_t and CUstream are the same handle.
#pragma once
#include <cuda.h>

#include <string>
#include <vector>

namespace loom {

// Owns a CUmodule in the current context; unloads it on destruction.
class Module {
 public:
  static Module load(const std::vector<char>& cubin);
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  // `name` is the kernel's symbol: its plain name for extern "C" kernels.
  CUfunction function(const std::string& name) const;
  CUmodule handle() const { return module_; }

 private:
  explicit Module(CUmodule m) : module_(m) {}
  CUmodule module_ = nullptr;
};

struct FuncAttributes {
  int registers = 0;
  int static_smem_bytes = 0;
  int local_bytes = 0;  // per thread: stack frame and spills
  int max_threads = 0;  // the most threads per block this kernel can launch with
};
FuncAttributes func_attributes(CUfunction f);

// Kernels get 48 KiB of dynamic shared memory unless they opt in to more (up to
// DeviceInfo::smem_per_block_optin): call this before launching with more.
void set_dynamic_smem(CUfunction f, int bytes);

int occupancy_blocks_per_sm(CUfunction f, int block_threads, int dynamic_smem);

struct LaunchConfig {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned dynamic_smem = 0;
  CUstream stream = nullptr;
  // Launch as the programmatic dependent of the grid before it on the stream (sm_90): the
  // kernel must begin with griddepcontrol.wait (KernelOp::wait_prior_grid).
  bool programmatic_dependent = false;
};

// Checks the grid and block against the hardware limits first, so a bad tile choice
// reads as "grid.y = 70000 exceeds 65535" rather than CUDA_ERROR_INVALID_VALUE.
// Clusters of `cluster_x` CTAs (along x) of `f` that can be resident on the GPU at once
// with this launch's block and shared memory (cuOccupancyMaxActiveClusters): how many a
// persistent grid may count on.
int max_active_clusters(CUfunction f, const LaunchConfig& cfg, int cluster_x);

void launch(CUfunction f, const LaunchConfig& cfg, void** args);

}  // namespace loom
