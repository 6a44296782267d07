// The search strategy: successive halving over candidates ranked by a cost model.
//
// Measuring every candidate of a space at full repetitions costs minutes per shape; a
// cost model that ranks them, plus cheap first measurements, finds the best with a small
// fraction of that. Round 0 measures the top N predicted candidates with few
// repetitions; each round keeps the best fraction (HalvingOptions::keep) of those that
// measured ok and re-measures them with proportionally more repetitions (up to
// max_reps), until one is left. N and the depth come from the Budget: the cost of a
// trial (a fixed part — compile, load, checked run, verify — plus a part per repetition,
// read off Measurement::timing_seconds) is estimated from the trials already made, and
// N is re-planned after every round-0 trial so the whole plan fits the time left and the
// trial cap.
//
// A candidate whose trial fails (any non-ok status) is recorded with its reason and
// dropped: it is never measured again and never wins. The winner is a candidate whose
// every trial was ok (verified): among those, the one that survived the most rounds, by
// its latest time (trial_us: graph replay for a short launch, else the event median). A
// failing candidate costs one trial, not the search: only a
// worker that fails on kWorkerErrorStreak candidates in a row (no GPU, a broken
// install) stops it, with that error.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tune/measurement.h"
#include "tune/progress.h"

namespace loom::tune {

struct Budget {
  double seconds = 120;  // wall time for measuring, from the call on
  int max_trials = 0;    // 0 = no cap
};

struct RankedCandidate {
  std::string knobs;        // a full knob set
  double predicted_us = 0;  // the cost model's estimate (the ranking; not used further)
};

struct HalvingOptions {
  int first_reps = 5;  // repetitions in round 0
  int max_reps = 50;   // the cap as rounds multiply them by 1 / keep
  double keep = 0.5;   // fraction of a round's ok candidates that go on
};

struct Trial {
  size_t candidate = 0;  // index into the ranked list
  std::string knobs;
  int round = 0;
  int reps = 0;  // asked for
  Measurement result;
  double seconds = 0;  // wall time of the trial
};

struct StrategyResult {
  std::vector<Trial> trials;  // in the order measured
  size_t winner = 0;          // index into the ranked list
  std::string winner_knobs;
  double winner_us = 0;  // its latest time (trial_us)
  int winner_reps = 0;
  int rounds = 0;          // rounds started
  bool cut_short = false;  // the time budget or the trial cap ended the search early
  int failures() const;
};

// Seconds on a monotonic clock; the strategy only takes differences.
using SecondsClock = std::function<double()>;
SecondsClock steady_seconds();

// measure(candidate, reps): one trial. Must not throw for a candidate's failure (return
// a non-ok Measurement); an exception it throws ends the search and propagates.
using MeasureFn = std::function<Measurement(const RankedCandidate&, int reps)>;

constexpr int kWorkerErrorStreak = 3;

// Throws loom::Error when no candidate is verified ok (with a summary of the failures
// and their first reasons), when `ranked` is empty, and on a worker-error streak.
StrategyResult successive_halving(const std::vector<RankedCandidate>& ranked,
                                  const MeasureFn& measure, const Budget& budget,
                                  ProgressBar* progress = nullptr, const HalvingOptions& opt = {},
                                  const SecondsClock& clock = steady_seconds());

// The search's winner against the default, measured in interleaved pairs (default,
// winner, default, winner, ...) at `reps` each, each side's time the median of its
// pairs. Two measurements of one kernel taken apart differ by up to 10 % on a short
// launch (the GPU's clock and temperature after the candidates before it; H200,
// 2026-11-30: a variant whose generated code maps every CTA as the default does measured
// 37.4 µs in the search against the default's 41.3 re-measured after it, and 39.1-39.4 µs
// both in an interleaved A/B), so only pairs decide that a winner beats the default.
struct PairedComparison {
  bool ok = false;         // every measurement of both verified ok
  std::string note;        // why not, when !ok: the first failure's status and reason
  double default_us = 0;   // medians of the pairs' trial_us
  double winner_us = 0;
  Measurement default_last;  // the last measurement of each (its l2 method, graph or event)
  Measurement winner_last;
  int pairs = 0;             // pairs measured ok
  bool winner_failed = false;  // the winner failed a re-measurement (its note says how)
};
PairedComparison compare_interleaved(const RankedCandidate& default_candidate,
                                     const RankedCandidate& winner, const MeasureFn& measure,
                                     int reps, int pairs);

}  // namespace loom::tune
