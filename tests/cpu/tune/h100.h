// A DeviceInfo for an H100 SXM built by hand, so the tuner's CPU tests size things as on
// the GPU machine without one (numbers from cudaGetDeviceProperties on an H100).
#pragma once
#include "frontend/parser.h"
#include "runtime/device.h"

namespace loom::tune::testing {

inline DeviceInfo h100() {
  DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9, d.cc_minor = 0;
  d.sm_count = 132;
  d.l2_bytes = 50 << 20;
  d.smem_per_block_optin = 232448;
  d.smem_per_sm = 233472;
  d.regs_per_sm = 65536;
  d.max_threads_per_sm = 2048;
  d.max_blocks_per_sm = 32;
  d.clock_khz = 1755000;
  d.mem_clock_khz = 2619000;
  d.mem_bus_width = 5120;
  return d;
}

inline Graph gemm(int64_t m, int64_t n, int64_t k, const char* dtype) {
  const std::string d = dtype;
  return parse_expression("matmul(A[" + std::to_string(m) + "," + std::to_string(k) + "]:" + d +
                          ", B[" + std::to_string(k) + "," + std::to_string(n) + "]:" + d + ")");
}

}  // namespace loom::tune::testing
