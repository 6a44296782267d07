#include "tune/device_profiles.h"

namespace loom::tune {
namespace {

DeviceInfo hopper(const char* name, int64_t global_mem, int mem_clock_khz, int bus_width) {
  DeviceInfo d;
  d.name = name;
  d.cc_major = 9, d.cc_minor = 0;
  d.sm_count = 132;
  d.l2_bytes = 50 << 20;
  d.smem_per_block_optin = 232448;
  d.smem_per_sm = 233472;
  d.regs_per_sm = 65536;
  d.max_threads_per_sm = 2048;
  d.max_blocks_per_sm = 32;
  d.clock_khz = 1980000;
  d.mem_clock_khz = mem_clock_khz;
  d.mem_bus_width = bus_width;
  d.global_mem_bytes = global_mem;
  return d;
}

}  // namespace

std::optional<DeviceInfo> device_profile(const std::string& name) {
  if (name == "h100") return hopper("NVIDIA H100 80GB HBM3", 85520809984, 2619000, 5120);
  if (name == "h200") return hopper("NVIDIA H200", 150110011392, 3201000, 6144);
  return std::nullopt;
}

std::string device_profile_names() { return "h100, h200"; }

}  // namespace loom::tune
