#include "tune/trial_timing.h"

namespace loom::tune {

TrialTiming plan_trial_timing(const TimingOptions& requested, L2Request req,
                              int64_t input_bytes, int64_t l2_bytes, int64_t free_bytes) {
  TrialTiming t;
  t.plan = plan_l2(req, input_bytes, l2_bytes, free_bytes / 2);
  t.timing = requested;
  t.timing.l2 = t.plan.method;
  t.timing.input_sets = t.plan.method == L2Method::rotate ? t.plan.sets : 1;
  t.timing.input_set_bytes = input_bytes;
  t.timing.graph_replay_below_us = kTrialGraphReplayBelowUs;
  return t;
}

double trial_us(const Measurement& m) { return m.graph_us > 0 ? m.graph_us : m.median_us; }

const char* trial_timed(const Measurement& m) { return m.graph_us > 0 ? "graph" : "event"; }

const char* l2_request_name(L2Request r) {
  switch (r) {
    case L2Request::automatic: return "auto";
    case L2Request::off: return "off";
    case L2Request::flush: return "flush";
    case L2Request::read: return "read";
    case L2Request::rotate: return "rotate";
  }
  return "auto";
}

}  // namespace loom::tune
