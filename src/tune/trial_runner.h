// One measurement inside the worker process: compile the candidate (through the cubin
// cache), run it once on the problem's inputs with its output poisoned, verify it as
// `loom run` does, then time it by the docs/benchmarking.md protocol.
//
// The problem (expression, sizes, seed) stays resident across jobs: its inputs are
// generated and uploaded once and its fp64 reference computed once, because doing that
// per candidate (a 4096³ GEMM's reference, 100+ MB of uploads) would eat the budget.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "runtime/cubin_cache.h"
#include "runtime/device.h"
#include "tune/measurement.h"

namespace loom::tune {

class TrialRunner {
 public:
  explicit TrialRunner(int device_ordinal);
  ~TrialRunner();

  // `phase` is called as each phase begins ("compile", the set-up's "setup: inputs",
  // "setup: reference" and "setup: input sets", "run", "time") so the supervisor can time
  // each separately; its second argument is the host work a set-up phase expects beyond
  // the supervisor's limit (proportional to the inputs' elements: a 2 GB weight takes
  // seconds to fill with random values), 0 otherwise. `poisoned` is set when a CUDA error left the
  // context unusable: the result is then `fault` and the process must exit.
  // The result carries the problem set-up's seconds when this job paid them
  // (Measurement::setup_seconds).
  Measurement run(const MeasureJob& job,
                  const std::function<void(const std::string&, double host_seconds)>& phase,
                  bool& poisoned);

 private:
  Measurement run_trial(const MeasureJob& job,
                        const std::function<void(const std::string&, double)>& phase,
                        bool& poisoned);
  double setup_seconds_ = 0;  // the set-up run_trial made for this job, 0 when none
  struct Problem;
  std::optional<DeviceInfo> dev_;
  std::string no_device_;
  CubinCache cache_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Problem> problem_;
};

}  // namespace loom::tune
