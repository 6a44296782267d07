// What the GPU can do, read once from cudart: the resource model, the knob checker and
// the benchmark reports all size things by these numbers instead of assuming an H100.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace loom {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t smem_per_block_optin = 0;  // the most dynamic smem a block may opt in to
  int64_t smem_per_sm = 0;
  int regs_per_sm = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int clock_khz = 0;
  int mem_clock_khz = 0;
  int mem_bus_width = 0;  // bits
  int driver_version = 0;   // e.g. 13000 for CUDA 13.0
  int runtime_version = 0;
  int64_t global_mem_bytes = 0;

  // The NVRTC target: "sm_90a" for cc 9.0, because wgmma and setmaxnreg exist only in
  // the arch-specific variant; "sm_<major><minor>" otherwise.
  std::string arch() const;
  // Peak DRAM bandwidth in bytes/s (double data rate over the bus); 0 when unknown.
  int64_t dram_bytes_per_s() const { return int64_t(mem_clock_khz) * 1000 * 2 * (mem_bus_width / 8); }
};

// Probes a GPU through cudart. With no driver or no GPU returns nullopt and, through
// why_not, a sentence a user can act on. Never crashes or exits: CPU machines run the
// same binaries and skip GPU steps with that sentence.
std::optional<DeviceInfo> probe_device(int ordinal = 0, std::string* why_not = nullptr);

// Makes GPU `ordinal` this thread's current device and its primary context current, so
// the driver-API calls that follow (module load, launch) and cudart's allocations land
// on it. A thread per GPU (`loom tune --devices 0,1`) calls this once per run.
void make_device_current(int ordinal);

// Bytes free on the current device (cudaMemGetInfo), what a run may still allocate.
// Throws loom::Error when cudart cannot say.
int64_t device_free_bytes();

}  // namespace loom
