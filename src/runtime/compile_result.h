// The product of one NVRTC compilation, as compile() returns it and the cubin cache
// stores it.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "runtime/ptxas_report.h"

namespace loom {

struct CompileResult {
  std::vector<char> cubin;
  std::string log;  // NVRTC's program log, ptxas -v lines included
  std::map<std::string, ResourceReport> resources;  // by kernel symbol
  bool from_cache = false;
  std::string cache_key;  // empty when compiled without a cache
  double compile_ms = 0;  // wall time of this call (a cache lookup when from_cache)
};

}  // namespace loom
