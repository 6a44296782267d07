// How a trial is timed: the way `loom run --bench` times (src/driver/run.cpp), so that a
// tuned winner holds up in the benchmark. The L2 is kept cold by the plan of
// bench/timing_plan.h: rotated input sets for a problem whose inputs fit under the L2, a
// read flush above; the write flush the trials used before (sessions 1-9) left an L2's
// worth of dirty lines for the timed launch to write back, which charged small launches
// up to twice their traffic and could rank candidates differently than the benchmark.
//
// Pure arithmetic (no CUDA): the trial runner calls it with the device's numbers, the
// tests with made-up ones.
#pragma once
#include <cstdint>
#include <string>

#include "bench/timing.h"
#include "bench/timing_plan.h"

namespace loom::tune {

struct TrialTiming {
  TimingOptions timing;  // `requested` with the plan's method and input sets
  L2Plan plan;
};

// `input_bytes`: one input set (every Input tensor); `free_bytes`: the device's free
// memory. Rotation may take half of it, as `loom run` allows (the rest is the
// candidate's outputs and workspace). An explicit request is honoured as plan_l2 does
// (rotate throws loom::Error where no rotation fits).
TrialTiming plan_trial_timing(const TimingOptions& requested, L2Request req,
                              int64_t input_bytes, int64_t l2_bytes, int64_t free_bytes);

// "auto", "off", ... (the inverse of parse_l2_request), for the worker protocol.
const char* l2_request_name(L2Request r);

}  // namespace loom::tune
