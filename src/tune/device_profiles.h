// GPUs described by hand, for tuning work without the GPU: `loom tune --dry-run` builds
// the space, compiles and prunes it and ranks it with the cost model as it would on that
// GPU, and the CPU tests size things as on the GPU machine. Numbers are what
// cudaGetDeviceProperties reports on the machines Loom is measured on.
#pragma once
#include <optional>
#include <string>

#include "runtime/device.h"

namespace loom::tune {

// "h100" (H100 SXM 80GB HBM3) or "h200" (H200 141GB HBM3e); nullopt for other names.
std::optional<DeviceInfo> device_profile(const std::string& name);

// The names device_profile knows, comma-separated (for error messages).
std::string device_profile_names();

}  // namespace loom::tune
