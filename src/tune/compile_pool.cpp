#include "tune/compile_pool.h"

#include "driver/run.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "codegen/cuda.h"
#include "driver/compile.h"
#include "driver/run.h"
#include "ir/error.h"
#include "runtime/nvrtc.h"
#include "tune/space.h"

namespace loom::tune {

void parallel_for(size_t n, int threads, const std::function<void(size_t)>& fn) {
  size_t workers =
      threads > 0 ? size_t(threads) : std::max(1u, std::thread::hardware_concurrency());
  workers = std::min(workers, n);
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) fn(i);
    });
  for (auto& t : pool) t.join();
}

namespace {

CompiledCandidate compile_one(const Graph& g, const Target& target, const Knobs& knobs,
                              CubinCache* cache) {
  CompiledCandidate c;
  c.knobs = knobs;
  try {
    CompileOptions opt;
    opt.knobs = knobs;
    opt.target = target;
    CompiledProgram prog = compile_graph(g, opt);
    c.cuda = prog.cuda;
    // The request `loom run` and the tuner's worker make, so the worker hits the cache.
    c.nvrtc = compile(nvrtc_request(prog.cuda, target.arch), cache);
    const KernelProgram& kp = prog.state.kernel;
    for (const auto& k : kp.kernels) {
      KernelResources r;
      r.name = k.name;
      r.block_threads = k.block_threads;
      r.smem_bytes = kernel_smem_bytes(shared_layout(kp, k), k);
      auto it = c.nvrtc.resources.find(k.name);
      if (it != c.nvrtc.resources.end()) r.report = it->second;
      c.kernels.push_back(r);
    }
  } catch (const Error& e) {
    c.error = e.what();
  } catch (const std::exception& e) {
    c.error = std::string("internal error: ") + e.what();
  }
  return c;
}

}  // namespace

std::vector<CompiledCandidate> compile_candidates(const Graph& g, const Target& target,
                                                  const std::vector<Candidate>& candidates,
                                                  int threads, CubinCache* cache) {
  std::vector<CompiledCandidate> out(candidates.size());
  parallel_for(candidates.size(), threads,
               [&](size_t i) { out[i] = compile_one(g, target, candidates[i].knobs, cache); });
  return out;
}

}  // namespace loom::tune
