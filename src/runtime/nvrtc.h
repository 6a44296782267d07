// In-process CUDA C++ -> cubin with NVRTC. Needs no GPU, so generated kernels are
// compiled and resource-checked on CPU-only machines too. Thread-safe: each call owns
// its nvrtcProgram, and the tuner compiles candidates in parallel.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "runtime/compile_result.h"

namespace loom {

class CubinCache;

struct CompileRequest {
  std::string source;
  std::string name = "loom_kernel.cu";  // appears in NVRTC's diagnostics
  std::vector<std::pair<std::string, std::string>> headers;  // (include name, contents)
  std::string arch = "sm_90a";  // a real arch: sm_80, sm_86, sm_89, sm_90, sm_90a, ...
  std::vector<std::string> extra_options;
};

// With a cache, a hit returns the stored result (from_cache = true) and a miss compiles
// and stores. Throws loom::Error on a compile error, with NVRTC's log and the source
// lines each error points at.
CompileResult compile(const CompileRequest& req, CubinCache* cache);

// Every option NVRTC is given: the fixed ones (arch, C++17, ptxas -v, line info,
// -default-device) followed by req.extra_options.
std::vector<std::string> compile_options(const CompileRequest& req);

// SHA-256 (hex) over everything that determines the cubin: source, headers, options,
// arch and the NVRTC version.
std::string compile_cache_key(const CompileRequest& req);

std::string nvrtc_version_string();  // e.g. "13.0"

}  // namespace loom
