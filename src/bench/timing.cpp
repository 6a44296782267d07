#include "bench/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "bench/cuda_call.h"
#include "ir/error.h"
#include "runtime/cubin_cache.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"

namespace loom {
namespace {

// Graph replays timed: 10 give a stable median without costing much.
constexpr int kGraphReplays = 10;
// The protocol's floor: a median of fewer samples says little.
constexpr int kMinReps = 5;

struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    LOOM_CUDA_RT(cudaEventCreate(&start));
    LOOM_CUDA_RT(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  double elapsed_us() const {
    LOOM_CUDA_RT(cudaEventSynchronize(stop));
    float ms = 0;
    LOOM_CUDA_RT(cudaEventElapsedTime(&ms, start, stop));
    return double(ms) * 1e3;
  }
};

// Reads every 16 bytes of the buffer through L2 (ld.global.cg: L1 bypassed, the line
// allocated in L2 as a normal load would). The XOR keeps the loads alive; the buffer is
// zero, so the store never happens.
constexpr const char* kReadFlushSource = R"(
extern "C" __global__ void loom_l2_read_flush(const uint4* __restrict__ p, unsigned long long n,
                                              unsigned* sink) {
  unsigned acc = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    uint4 v = __ldcg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}
)";

// Evicts whatever the previous launch left in L2 by moving a buffer of twice its size
// through it: written (flush) or read (read). See timing_plan.h for what each leaves.
class L2Flusher {
 public:
  explicit L2Flusher(L2Method method) : method_(method) {
    if (method != L2Method::flush && method != L2Method::read) return;
    int dev = 0, l2 = 0, major = 0, minor = 0;
    LOOM_CUDA_RT(cudaGetDevice(&dev));
    LOOM_CUDA_RT(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    bytes_ = size_t(std::max(l2, 1 << 20)) * 2;
    LOOM_CUDA_RT(cudaMalloc(&buf_, bytes_ + 16));
    LOOM_CUDA_RT(cudaMemset(buf_, 0, bytes_ + 16));
    if (method != L2Method::read) return;
    LOOM_CUDA_RT(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    LOOM_CUDA_RT(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    LOOM_CUDA_RT(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev));
    CompileRequest req;
    req.source = l2_read_flush_source();
    req.name = "loom_l2_read_flush.cu";
    req.arch = "sm_" + std::to_string(major * 10 + minor);
    try {
      CubinCache cache;
      module_.emplace(Module::load(compile(req, &cache).cubin));
    } catch (const Error& e) {
      throw Error(std::string("the L2 read flush kernel did not build: ") + e.what() +
                  "; time with --l2 flush (or rotate) instead");
    }
    fn_ = module_->function("loom_l2_read_flush");
  }
  ~L2Flusher() {
    if (buf_) cudaFree(buf_);
  }
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
  void flush(cudaStream_t s) {
    if (!buf_) return;
    if (method_ == L2Method::flush) {
      // A changing byte value keeps the writes from being recognized as redundant.
      LOOM_CUDA_RT(cudaMemsetAsync(buf_, (++count_) & 0xff, bytes_, s));
      return;
    }
    const void* p = buf_;
    unsigned long long n = bytes_ / 16;
    void* sink = static_cast<char*>(buf_) + bytes_;
    void* args[] = {&p, &n, &sink};
    LaunchConfig cfg;
    cfg.grid[0] = unsigned(std::max(1, sms_) * 4);  // 4 x 256 threads per SM: enough loads in flight
    cfg.block[0] = 256;
    cfg.stream = s;
    launch(fn_, cfg, args);
  }

 private:
  L2Method method_;
  void* buf_ = nullptr;
  size_t bytes_ = 0;
  int count_ = 0;
  int sms_ = 0;
  std::optional<Module> module_;
  CUfunction fn_ = nullptr;
};

struct GraphDeleter {
  void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
};
using GraphPtr = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using GraphExecPtr = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;

GraphExecPtr capture(const TimedLaunch& fn, int sets, cudaStream_t s) {
  LOOM_CUDA_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const int launches = graph_launches(sets);
  for (int i = 0; i < launches; ++i) fn(s, i % sets);
  cudaGraph_t raw = nullptr;
  cudaError_t e = cudaStreamEndCapture(s, &raw);
  GraphPtr graph(raw);
  if (e != cudaSuccess)
    throw Error(std::string("capturing a timed candidate into a CUDA graph failed: ") +
                cudaGetErrorString(e) +
                "; a candidate must only enqueue work on the stream it is given (no "
                "synchronization, allocation or legacy-stream work), or set "
                "graph_replay_if_short = false");
  cudaGraphExec_t exec = nullptr;
  LOOM_CUDA_RT(cudaGraphInstantiate(&exec, graph.get(), 0));
  return GraphExecPtr(exec);
}

// A graph cannot be captured on the legacy default stream; use a private one there.
class CaptureStream {
 public:
  explicit CaptureStream(cudaStream_t s) : s_(s) {
    if (s == nullptr || s == cudaStreamLegacy) {
      LOOM_CUDA_RT(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
      owned_ = true;
    }
  }
  ~CaptureStream() {
    if (owned_) cudaStreamDestroy(s_);
  }
  CaptureStream(const CaptureStream&) = delete;
  CaptureStream& operator=(const CaptureStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
  bool owned_ = false;
};

void time_graph_replays(const std::vector<TimedLaunch>& fns, int sets, double below_us,
                        cudaStream_t stream, L2Flusher& flusher, std::vector<Timing>& out) {
  // The launches timed together are one comparison (Loom against cuBLAS on one problem):
  // when any of them is short, all are replayed. Deciding per launch left a library
  // whose event median came out long without a graph number — small cuBLAS launches'
  // event medians vary 11-32 us between runs (host work inside the timed interval), while
  // their graph replays hold at 8 us (2026-11-22).
  bool any_short = false;
  for (const Timing& t : out) any_short |= t.median_us < below_us;
  if (!any_short) return;
  std::vector<size_t> idx(fns.size());
  for (size_t i = 0; i < fns.size(); ++i) idx[i] = i;
  CaptureStream cs(stream);
  std::vector<GraphExecPtr> graphs;
  for (size_t i : idx) graphs.push_back(capture(fns[i], sets, cs.get()));
  for (auto& g : graphs) LOOM_CUDA_RT(cudaGraphLaunch(g.get(), cs.get()));  // upload, warm
  LOOM_CUDA_RT(cudaStreamSynchronize(cs.get()));

  // A replay ends on set sets-1 and the next one (of any candidate) starts on set 0,
  // last read `sets` launches before: rotation needs no flush between replays.
  const int launches = graph_launches(sets);
  std::vector<std::vector<double>> per_launch(idx.size());
  std::vector<EventPair> ev(idx.size());
  for (int r = 0; r < kGraphReplays; ++r) {
    for (size_t j = 0; j < idx.size(); ++j) {
      flusher.flush(cs.get());
      LOOM_CUDA_RT(cudaEventRecord(ev[j].start, cs.get()));
      LOOM_CUDA_RT(cudaGraphLaunch(graphs[j].get(), cs.get()));
      LOOM_CUDA_RT(cudaEventRecord(ev[j].stop, cs.get()));
    }
    for (size_t j = 0; j < idx.size(); ++j)
      per_launch[j].push_back(ev[j].elapsed_us() / launches);
  }
  for (size_t j = 0; j < idx.size(); ++j)
    out[idx[j]].graph_median_us = summarize_samples(per_launch[j]).median_us;
}

double percentile(const std::vector<double>& sorted, double q) {
  double pos = q * double(sorted.size() - 1);
  size_t lo = size_t(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

Timing summarize_samples(std::vector<double> s) {
  LOOM_CHECK(!s.empty(), "no timing samples to summarize");
  std::sort(s.begin(), s.end());
  Timing t;
  t.reps = int(s.size());
  t.min_us = s.front();
  t.median_us = percentile(s, 0.5);
  t.p10_us = percentile(s, 0.1);
  t.p90_us = percentile(s, 0.9);
  return t;
}

const char* l2_read_flush_source() { return kReadFlushSource; }

int graph_launches(int sets) {
  sets = std::max(1, sets);
  return (kLaunchesPerGraph + sets - 1) / sets * sets;
}

std::vector<Timing> time_candidates(const std::vector<TimedLaunch>& fns, cudaStream_t stream,
                                    const TimingOptions& opt) {
  if (fns.empty()) return {};
  if (opt.reps < 1 || opt.warmup < 0)
    throw Error("timing needs reps >= 1 and warmup >= 0 (got reps=" + std::to_string(opt.reps) +
                ", warmup=" + std::to_string(opt.warmup) + ")");
  const bool rotate = opt.l2 == L2Method::rotate;
  if (rotate && opt.input_sets < 2)
    throw Error("L2 rotation needs at least 2 input sets (got " + std::to_string(opt.input_sets) +
                "); plan them with plan_l2 or time with L2Method::flush");
  const int sets = rotate ? opt.input_sets : 1;
  const size_t n = fns.size();
  L2Flusher flusher(opt.l2);
  int64_t launch_count = 0;
  auto next_set = [&] { return int(launch_count++ % sets); };

  for (int w = 0; w < opt.warmup; ++w)
    for (auto& fn : fns) {
      flusher.flush(stream);
      fn(stream, next_set());
    }
  LOOM_CUDA_RT(cudaStreamSynchronize(stream));
  LOOM_CUDA_RT(cudaGetLastError());

  // Two sets of events: round r is enqueued before round r-1 is read back, so the GPU
  // never idles while the host collects timings.
  std::vector<EventPair> ev[2] = {std::vector<EventPair>(n), std::vector<EventPair>(n)};
  std::vector<std::vector<double>> samples(n);
  auto collect = [&](int round) {
    for (size_t i = 0; i < n; ++i) samples[i].push_back(ev[round % 2][i].elapsed_us());
  };
  const int min_reps = std::min(opt.reps, kMinReps);
  const auto t0 = std::chrono::steady_clock::now();
  int r = 0;
  while (r < opt.reps) {
    for (size_t i = 0; i < n; ++i) {
      flusher.flush(stream);
      const int set = next_set();
      LOOM_CUDA_RT(cudaEventRecord(ev[r % 2][i].start, stream));
      fns[i](stream, set);
      LOOM_CUDA_RT(cudaEventRecord(ev[r % 2][i].stop, stream));
    }
    if (r > 0) collect(r - 1);
    ++r;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r >= min_reps && elapsed > opt.max_seconds) break;
  }
  collect(r - 1);
  LOOM_CUDA_RT(cudaGetLastError());

  std::vector<Timing> out;
  for (auto& s : samples) out.push_back(summarize_samples(s));
  if (opt.graph_replay_if_short) time_graph_replays(fns, sets, opt.graph_replay_below_us, stream, flusher, out);
  return out;
}

std::vector<Timing> time_interleaved(const std::vector<std::function<void(cudaStream_t)>>& fns,
                                     cudaStream_t stream, const TimingOptions& opt) {
  if (opt.l2 == L2Method::rotate)
    throw Error("L2 rotation needs candidates that take an input set: use time_candidates");
  std::vector<TimedLaunch> one_set;
  for (const auto& fn : fns) one_set.push_back([fn](cudaStream_t s, int) { fn(s); });
  return time_candidates(one_set, stream, opt);
}

}  // namespace loom
