// How a trial is timed: the way `loom run --bench` times (src/driver/run.cpp), so that a
// tuned winner holds up in the benchmark. The L2 is kept cold by the plan of
// bench/timing_plan.h: rotated input sets for a problem whose inputs fit under the L2, a
// read flush above; the write flush the trials used before (until 2026-11-22) left an L2's
// worth of dirty lines for the timed launch to write back, which charged small launches
// up to twice their traffic and could rank candidates differently than the benchmark.
//
// Short launches are ranked by CUDA-graph replay, as `loom run --bench` compares them: at
// ~10 us an event time is mostly host launch overhead (2026-11-22: at 128x128x16384 the
// tuner ranked an unsplit kernel first at 11.81 us event against the split default's
// 11.7, which replays at 7.3 us). The benchmark replays a comparison when any of its event
// medians is under kGraphReplayBelowUs. A tuner's comparison is spread over trials (one
// candidate each), so a trial replays below twice that bound: an event median of a short
// launch can come out well above 20 us from host noise alone (small cuBLAS launches: 11-32
// us event for 8 us replayed, 2026-11-22), and a candidate that competes with replayed
// ones must have a replay time of its own. One left without it (event >= 40 us) is ranked
// by its event time, an upper bound on its replay time (replay removes launch overhead,
// nothing else), so it is never favoured by the mix.
//
// Pure arithmetic (no CUDA): the trial runner calls it with the device's numbers, the
// tests with made-up ones.
#pragma once
#include <cstdint>
#include <string>

#include "bench/timing.h"
#include "bench/timing_plan.h"
#include "tune/measurement.h"

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

// Trials replay below this event median (see above).
constexpr double kTrialGraphReplayBelowUs = 2 * kGraphReplayBelowUs;

// The time a trial is ranked by: its graph replay time when it has one, else its event
// median.
double trial_us(const Measurement& m);

// How that time was taken: "graph" (replayed) or "event". Recorded with a winner
// (db_file.h `timed`), since the two do not compare.
const char* trial_timed(const Measurement& m);

// "auto", "off", ... (the inverse of parse_l2_request), for the worker protocol.
const char* l2_request_name(L2Request r);

}  // namespace loom::tune
