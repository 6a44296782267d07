// The H100 profile (src/tune/device_profiles.h), so the tuner's CPU tests size things as
// on the GPU machine without one, and a GEMM graph builder.
#pragma once
#include "frontend/parser.h"
#include "runtime/device.h"
#include "tune/device_profiles.h"

namespace loom::tune::testing {

inline DeviceInfo h100() { return *device_profile("h100"); }

inline Graph gemm(int64_t m, int64_t n, int64_t k, const char* dtype) {
  const std::string d = dtype;
  return parse_expression("matmul(A[" + std::to_string(m) + "," + std::to_string(k) + "]:" + d +
                          ", B[" + std::to_string(k) + "," + std::to_string(n) + "]:" + d + ")");
}

}  // namespace loom::tune::testing
