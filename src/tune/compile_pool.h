// Parallel compilation of candidates: expression -> pipeline -> CUDA -> NVRTC cubin, on a
// pool of threads, through the content-addressed cubin cache. Each candidate's kernels
// come back with ptxas' resource report, which static pruning reads (prune.h).
//
// Thread safety (checked for this pool): the pipeline works on a CompileState of its own
// per call, and the registry, pass list and atom table are function-local statics built
// once (C++ guarantees one thread-safe initialization) and only read afterwards; NVRTC
// calls each own their nvrtcProgram (runtime/nvrtc.h); CubinCache writes entries through
// unique temp files renamed into place and counts hits with atomics. Nothing is serialized.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/compile_result.h"
#include "runtime/cubin_cache.h"

namespace loom::tune {

struct Candidate;

struct KernelResources {
  std::string name;  // CUDA symbol
  int block_threads = 0;
  int64_t smem_bytes = 0;  // dynamic shared memory it launches with
  ResourceReport report;   // ptxas' numbers (registers -1 when ptxas printed none)
};

struct CompiledCandidate {
  Knobs knobs;
  std::string cuda;
  CompileResult nvrtc;                   // cubin, log, from_cache, compile_ms
  std::vector<KernelResources> kernels;  // in launch order
  std::string error;                     // loom::Error of the pipeline or NVRTC; empty = ok
  bool ok() const { return error.empty(); }
};

// Compiles every candidate for `target` (one result per candidate, same order) on
// `threads` threads (0 = hardware concurrency). A candidate that fails records the error
// and never stops the others. `cache` may be null (no caching).
std::vector<CompiledCandidate> compile_candidates(const Graph& g, const Target& target,
                                                  const std::vector<Candidate>& candidates,
                                                  int threads = 0, CubinCache* cache = nullptr);

// Runs fn(0) .. fn(n - 1) on up to `threads` threads (0 = hardware concurrency), each
// index once; returns when all are done. fn must not throw.
void parallel_for(size_t n, int threads, const std::function<void(size_t)>& fn);

}  // namespace loom::tune
