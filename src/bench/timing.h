// The timing protocol of shared/BENCHMARK.md: CUDA events around each launch, warm-up
// first, L2 flushed before every timed repetition, candidates interleaved so that the
// reference and Loom see the same clocks, the median reported.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <optional>
#include <vector>

namespace loom {

struct TimingOptions {
  int warmup = 5;
  int reps = 50;
  double max_seconds = 10;  // stop early past this much wall time (after >= 5 reps)
  bool flush_l2 = true;
  bool graph_replay_if_short = true;
};

struct Timing {
  double median_us = 0, min_us = 0, p10_us = 0, p90_us = 0;
  int reps = 0;
  // CUDA-graph replay time per launch, measured only when the median is under
  // kGraphReplayBelowUs: there launch overhead is a visible share of an event timing.
  std::optional<double> graph_median_us;
};

constexpr double kGraphReplayBelowUs = 20.0;

// Times each candidate on `stream`, interleaved: every repetition runs fns[0], fns[1],
// ... in turn, each preceded by an L2 flush and bracketed by its own event pair. A
// candidate must only enqueue work on the stream it is given (no host synchronization),
// so that it can also be captured into a CUDA graph.
std::vector<Timing> time_interleaved(const std::vector<std::function<void(cudaStream_t)>>& fns,
                                     cudaStream_t stream, const TimingOptions& opt);

// Order statistics of a sample in microseconds (exposed for tests). Percentiles
// interpolate linearly between the closest ranks; the median of an even count is the
// mean of the middle two.
Timing summarize_samples(std::vector<double> samples_us);

}  // namespace loom
