#include "bench/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>

#include "bench/cuda_call.h"
#include "ir/error.h"

namespace loom {
namespace {

// Back-to-back launches captured into one graph, and graph replays timed, for the
// short-launch measurement: 20 launches amortize the graph launch itself, and 10
// replays give a stable median without costing much.
constexpr int kLaunchesPerGraph = 20;
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

// Writing a buffer twice the L2 size evicts whatever the previous launch left there,
// so every timed launch reads its operands from HBM as a cold call in a real model would.
class L2Flusher {
 public:
  explicit L2Flusher(bool enabled) {
    if (!enabled) return;
    int dev = 0, l2 = 0;
    LOOM_CUDA_RT(cudaGetDevice(&dev));
    LOOM_CUDA_RT(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    bytes_ = size_t(std::max(l2, 1 << 20)) * 2;
    LOOM_CUDA_RT(cudaMalloc(&buf_, bytes_));
  }
  ~L2Flusher() {
    if (buf_) cudaFree(buf_);
  }
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
  void flush(cudaStream_t s) {
    if (!buf_) return;
    // A changing byte value keeps the writes from being recognized as redundant.
    LOOM_CUDA_RT(cudaMemsetAsync(buf_, (++count_) & 0xff, bytes_, s));
  }

 private:
  void* buf_ = nullptr;
  size_t bytes_ = 0;
  int count_ = 0;
};

struct GraphDeleter {
  void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
};
using GraphPtr = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using GraphExecPtr = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;

GraphExecPtr capture(const std::function<void(cudaStream_t)>& fn, cudaStream_t s) {
  LOOM_CUDA_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kLaunchesPerGraph; ++i) fn(s);
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

void time_graph_replays(const std::vector<std::function<void(cudaStream_t)>>& fns,
                        cudaStream_t stream, L2Flusher& flusher, std::vector<Timing>& out) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < fns.size(); ++i)
    if (out[i].median_us < kGraphReplayBelowUs) idx.push_back(i);
  if (idx.empty()) return;
  CaptureStream cs(stream);
  std::vector<GraphExecPtr> graphs;
  for (size_t i : idx) graphs.push_back(capture(fns[i], cs.get()));
  for (auto& g : graphs) LOOM_CUDA_RT(cudaGraphLaunch(g.get(), cs.get()));  // upload, warm
  LOOM_CUDA_RT(cudaStreamSynchronize(cs.get()));

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
      per_launch[j].push_back(ev[j].elapsed_us() / kLaunchesPerGraph);
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

std::vector<Timing> time_interleaved(const std::vector<std::function<void(cudaStream_t)>>& fns,
                                     cudaStream_t stream, const TimingOptions& opt) {
  if (fns.empty()) return {};
  if (opt.reps < 1 || opt.warmup < 0)
    throw Error("timing needs reps >= 1 and warmup >= 0 (got reps=" + std::to_string(opt.reps) +
                ", warmup=" + std::to_string(opt.warmup) + ")");
  const size_t n = fns.size();
  L2Flusher flusher(opt.flush_l2);

  for (int w = 0; w < opt.warmup; ++w)
    for (auto& fn : fns) {
      flusher.flush(stream);
      fn(stream);
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
      LOOM_CUDA_RT(cudaEventRecord(ev[r % 2][i].start, stream));
      fns[i](stream);
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
  if (opt.graph_replay_if_short) time_graph_replays(fns, stream, flusher, out);
  return out;
}

}  // namespace loom
