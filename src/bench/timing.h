// The timing protocol of docs/benchmarking.md: CUDA events around each launch, warm-up
// first, the L2 cold before every timed repetition (timing_plan.h: rotated input sets, or
// a read or write flush), candidates interleaved so that the reference and Loom see the
// same clocks, the median reported; short launches also replayed from CUDA graphs.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "bench/timing_plan.h"

namespace loom {

constexpr double kGraphReplayBelowUs = 20.0;

struct TimingOptions {
  int warmup = 5;
  int reps = 50;
  double max_seconds = 10;  // stop early past this much wall time (after >= 5 reps)
  L2Method l2 = L2Method::flush;
  // L2Method::rotate: the input sets every candidate has (launch c of the run uses set
  // c mod input_sets), and one set's bytes (for the report).
  int input_sets = 1;
  int64_t input_set_bytes = 0;
  bool graph_replay_if_short = true;
  // "Short": a comparison is replayed when any event median is under this. The benchmark
  // keeps kGraphReplayBelowUs; the tuner's trials, each a comparison of one whose partners
  // are timed in other trials, replay below a wider bound (tune/trial_timing.h).
  double graph_replay_below_us = kGraphReplayBelowUs;
};

struct Timing {
  double median_us = 0, min_us = 0, p10_us = 0, p90_us = 0;
  int reps = 0;
  // CUDA-graph replay time per launch, measured for every launch of a comparison when
  // any of their medians is under graph_replay_below_us: there launch overhead is a
  // visible share of an event timing.
  // With rotation the graph cycles through the input sets (cold L2 every launch);
  // otherwise its launches after the first reuse warm inputs.
  std::optional<double> graph_median_us;
};

// One candidate launch reading input set `set` (0 <= set < TimingOptions::input_sets).
// It must only enqueue work on the stream it is given (no host synchronization), so that
// it can also be captured into a CUDA graph.
using TimedLaunch = std::function<void(cudaStream_t, int set)>;

// Times each candidate on `stream`, interleaved: every repetition runs fns[0], fns[1],
// ... in turn, each bracketed by its own event pair and preceded by the L2 method's
// flush (none for rotate and off). With rotate, consecutive launches of the whole run
// (all candidates) take consecutive sets, so no launch finds its inputs in L2.
std::vector<Timing> time_candidates(const std::vector<TimedLaunch>& fns, cudaStream_t stream,
                                    const TimingOptions& opt);

// Candidates with one input set (opt.l2 must not be rotate).
std::vector<Timing> time_interleaved(const std::vector<std::function<void(cudaStream_t)>>& fns,
                                     cudaStream_t stream, const TimingOptions& opt);

// Launches a graph captures for the replay measurement: at least kLaunchesPerGraph (to
// amortize the graph's own launch), a whole number of passes over `sets` so that each
// replay starts again at set 0 without reusing a warm one. Exposed for tests.
constexpr int kLaunchesPerGraph = 20;
int graph_launches(int sets);

// The CUDA source of the read flush's kernel (NVRTC-compiled on first use, for the
// device's arch; exposed for the compile test).
const char* l2_read_flush_source();

// Order statistics of a sample in microseconds (exposed for tests). Percentiles
// interpolate linearly between the closest ranks; the median of an even count is the
// mean of the middle two.
Timing summarize_samples(std::vector<double> samples_us);

}  // namespace loom
