// What the tuner asks a measurement worker to do (MeasureJob) and what comes back
// (Measurement): the vocabulary shared by the worker process (worker.h), its wire
// protocol (worker_protocol.h) and the search strategy (strategy.h).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "bench/timing.h"

namespace loom::tune {

// One candidate on one problem. The problem is (expression, sizes, seed): jobs of the
// same problem share its inputs and its fp64 reference inside the worker.
struct MeasureJob {
  std::string expression;
  std::map<std::string, int64_t> sizes;  // values of the symbolic dims
  std::string knobs;                     // the candidate: a full knob string
  TimingOptions timing;                  // reps, warm-up (docs/benchmarking.md)
  // How the timed launches meet a cold L2: the worker plans it for the problem as
  // `loom run --bench` does (trial_timing.h) and overrides timing.l2 / input_sets; auto
  // unless a test asks for a method.
  L2Request l2 = L2Request::automatic;
  uint64_t seed = 1;
  // Test hook only: CUDA source that replaces the generated kernel source (same kernel
  // names and signatures), so tests can plant a faulting or hanging kernel. The tuner
  // never sets it.
  std::string cuda_override;
};

enum class TrialStatus {
  ok,             // verified, then timed
  compile_error,  // the knobs do not compile, or the kernel cannot launch on this GPU
  wrong_answer,   // ran, failed verification against the fp64 reference
  fault,          // CUDA error at run time (the worker's context is poisoned) or a crash
  timeout,        // no answer within the time limit: killed
  worker_error,   // the worker itself failed (no GPU, cannot start, protocol): not the candidate
};

const char* trial_status_name(TrialStatus s);
TrialStatus parse_trial_status(const std::string& name);  // throws loom::Error

struct Measurement {
  TrialStatus status = TrialStatus::worker_error;
  std::string reason;    // empty when ok; else what failed, for the tuner's report
  double median_us = 0;  // event-timed median of the timed repetitions (ok only)
  // CUDA-graph replay time per launch (bench/timing.h), 0 when not replayed: a launch
  // whose event median is short is replayed, and ranked by this (trial_us in
  // trial_timing.h), since its event time is mostly host launch overhead.
  double graph_us = 0;
  int reps = 0;          // repetitions actually timed
  double rel_error = 0;  // ‖out − ref‖_F / ‖ref‖_F of the checked run
  double threshold = 0;  // the verification threshold it was judged by
  // Wall seconds of the timed repetitions (warm-up included): what a trial costs per
  // repetition, against its fixed part (compile, load, checked run, verify), so the
  // strategy can plan rounds with more repetitions. 0 when not timed.
  double timing_seconds = 0;
  // Wall seconds of the problem's one-time set-up that this trial paid (random inputs,
  // their upload, the reference: the first trial of a problem in a worker; 0 after): seconds
  // on a 16384-token projection, which the strategy must not take for every trial's fixed
  // cost (it planned one trial for such shapes at a 20 s budget, H200 2026-11-30).
  double setup_seconds = 0;
  // The L2 method the timing used ("rotate", "read", ...; l2_method_name) and the input
  // sets it rotated over: recorded with a winner, since times taken by different methods
  // do not compare (database.h). Empty when not timed.
  std::string l2;
  int input_sets = 0;
};

inline Measurement failed_measurement(TrialStatus s, std::string reason) {
  Measurement m;
  m.status = s;
  m.reason = std::move(reason);
  return m;
}

}  // namespace loom::tune
