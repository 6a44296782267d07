// Successive halving on synthetic spaces, with a fake clock: it finds the optimum (within
// 2%) of a noisy cost function with far fewer trials than exhaustive search, keeps to
// the time budget and the trial cap, drops failing candidates (the predicted-best one
// included) after one trial and never lets them win, and fails clearly when nothing
// verifies or the worker is broken.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include "ir/error.h"
#include "tune/strategy.h"

namespace loom::tune {
namespace {

// A space of `n` candidates whose true time is known; the ranking comes from a cost
// model that is off by a log-normal factor, and each measurement has noise that shrinks
// with the repetitions. Every trial costs fixed + per_rep · reps seconds of fake time.
struct Synthetic {
  std::vector<double> true_us;
  std::vector<RankedCandidate> ranked;
  std::map<std::string, size_t> index;
  std::map<size_t, TrialStatus> failing;  // by candidate id
  double now = 0, fixed_s = 0.3, per_rep_s = 0.02;
  double setup_s = 0;  // the problem's one-time set-up, paid (and reported) by the first trial
  bool reports_timing = true;  // fill Measurement::timing_seconds
  std::mt19937_64 rng{7};
  std::map<size_t, int> measured;  // trials per candidate id

  explicit Synthetic(size_t n, double model_error = 0.15) {
    std::mt19937_64 gen(42);
    std::uniform_real_distribution<double> u(100, 500);
    std::normal_distribution<double> err(0, model_error);
    for (size_t i = 0; i < n; ++i) {
      true_us.push_back(u(gen));
      ranked.push_back({"BM=" + std::to_string(i), true_us.back() * std::exp(err(gen))});
    }
    std::sort(ranked.begin(), ranked.end(),
              [](const auto& a, const auto& b) { return a.predicted_us < b.predicted_us; });
    for (size_t i = 0; i < n; ++i) index[ranked[i].knobs] = std::stoul(ranked[i].knobs.substr(3));
  }

  double best_true() const { return *std::min_element(true_us.begin(), true_us.end()); }
  size_t id(const std::string& knobs) const { return index.at(knobs); }

  MeasureFn measure() {
    return [this](const RankedCandidate& c, int reps) {
      size_t i = id(c.knobs);
      ++measured[i];
      now += fixed_s + per_rep_s * reps;
      Measurement m;
      if (setup_s > 0) {
        now += setup_s;
        m.setup_seconds = setup_s;
        setup_s = 0;
      }
      auto f = failing.find(i);
      if (f != failing.end()) {
        m.status = f->second;
        m.reason = "planted failure of " + c.knobs;
        return m;
      }
      std::normal_distribution<double> noise(0, 0.05 / std::sqrt(double(reps)));
      m.status = TrialStatus::ok;
      m.median_us = true_us[i] * (1 + noise(rng));
      m.reps = reps;
      if (reports_timing) m.timing_seconds = per_rep_s * reps;
      return m;
    };
  }
  SecondsClock clock() {
    return [this] { return now; };
  }
};

TEST(SuccessiveHalving, FindsTheOptimumWithFarFewerTrialsThanExhaustive) {
  Synthetic s(1000);
  Budget budget{60, 0};
  StrategyResult r = successive_halving(s.ranked, s.measure(), budget, nullptr, {}, s.clock());
  double found = s.true_us[s.id(r.winner_knobs)];
  EXPECT_LE(found, 1.02 * s.best_true()) << "winner " << r.winner_knobs;
  EXPECT_LT(r.trials.size(), s.ranked.size() / 4) << "exhaustive is " << s.ranked.size();
  EXPECT_GT(r.rounds, 3);
  EXPECT_LE(s.now, budget.seconds);
  // Measured more than once, with more repetitions each round (up to the cap).
  int winner_trials = 0, first_reps = 0, last_reps = 0;
  for (const Trial& t : r.trials)
    if (t.knobs == r.winner_knobs) {
      ++winner_trials;
      EXPECT_GE(t.reps, last_reps);
      if (!first_reps) first_reps = t.reps;
      last_reps = t.reps;
    }
  EXPECT_GE(winner_trials, 3);
  EXPECT_EQ(first_reps, HalvingOptions{}.first_reps);
  EXPECT_EQ(last_reps, HalvingOptions{}.max_reps);
  EXPECT_EQ(r.winner_reps, last_reps);
  EXPECT_FALSE(r.cut_short);
}

TEST(SuccessiveHalving, UsesMoreOfALargerBudget) {
  Synthetic small(1000), large(1000);
  StrategyResult a =
      successive_halving(small.ranked, small.measure(), {20, 0}, nullptr, {}, small.clock());
  StrategyResult b =
      successive_halving(large.ranked, large.measure(), {200, 0}, nullptr, {}, large.clock());
  EXPECT_GT(b.trials.size(), 2 * a.trials.size());
  EXPECT_LE(small.now, 20);
  EXPECT_LE(large.now, 200);
  EXPECT_GT(large.now, 100) << "a budget ten times larger should mostly be used";
}

TEST(SuccessiveHalving, KeepsToTheTimeBudget) {
  for (bool timing : {true, false})
    for (double per_rep : {0.0005, 0.02, 0.2})
      for (double seconds : {1.0, 3.0, 7.5, 30.0}) {
        Synthetic s(200);
        s.fixed_s = 0.5;
        s.per_rep_s = per_rep;
        s.reports_timing = timing;
        StrategyResult r =
            successive_halving(s.ranked, s.measure(), {seconds, 0}, nullptr, {}, s.clock());
        // The first trial is always made: until then nothing says what one costs.
        double first = s.fixed_s + per_rep * HalvingOptions{}.first_reps;
        EXPECT_LE(s.now, std::max(seconds, first))
            << "budget " << seconds << " per rep " << per_rep << " timing " << timing;
        EXPECT_EQ(r.trials.back().result.status, TrialStatus::ok);
        if (timing && seconds >= 30 && per_rep <= 0.02) {
          EXPECT_GT(s.now, 0.6 * seconds) << "an exact cost model plans to use the budget";
        }
      }
}

// A 16384-token projection's first trial pays seconds of set-up (random inputs, their
// upload, the reference) that later trials do not: counted as every trial's fixed cost it
// left room for one trial in 20 s (H200, 2026-11-30). The strategy takes it off.
TEST(SuccessiveHalving, AProblemsOneTimeSetUpIsNotEveryTrialsCost) {
  Synthetic s(60);
  s.setup_s = 12;
  StrategyResult r = successive_halving(s.ranked, s.measure(), {20, 0}, nullptr, {}, s.clock());
  EXPECT_GE(r.trials.size(), 8u);  // 11 with the set-up taken off; 1 without
  EXPECT_LE(s.now, 20.0 + 1e-9) << "kept to the budget, the set-up included";
  EXPECT_EQ(r.trials.front().result.setup_seconds, 12);
}

TEST(SuccessiveHalving, KeepsToTheTrialCap) {
  for (int cap : {1, 2, 7, 40}) {
    Synthetic s(500);
    StrategyResult r =
        successive_halving(s.ranked, s.measure(), {1e9, cap}, nullptr, {}, s.clock());
    EXPECT_LE(int(r.trials.size()), cap) << "cap " << cap;
    EXPECT_GE(int(r.trials.size()), std::min(cap, 2)) << "cap " << cap;
  }
}

TEST(SuccessiveHalving, FailingCandidatesAreDroppedAndNeverWin) {
  Synthetic s(300);
  // The predicted best faults; the truly best of the top of the ranking (sure to be
  // measured) answers wrong.
  size_t predicted_best = s.id(s.ranked[0].knobs);
  size_t true_best = s.id(s.ranked[3].knobs);
  for (size_t k = 3; k < 20; ++k)
    if (s.true_us[s.id(s.ranked[k].knobs)] < s.true_us[true_best])
      true_best = s.id(s.ranked[k].knobs);
  s.failing[predicted_best] = TrialStatus::fault;
  s.failing[true_best] = TrialStatus::wrong_answer;
  s.failing[s.id(s.ranked[1].knobs)] = TrialStatus::timeout;
  s.failing[s.id(s.ranked[2].knobs)] = TrialStatus::compile_error;
  StrategyResult r = successive_halving(s.ranked, s.measure(), {60, 0}, nullptr, {}, s.clock());
  for (const auto& [id, status] : s.failing) {
    EXPECT_NE(s.id(r.winner_knobs), id);
    EXPECT_EQ(s.measured[id], 1) << "a failed candidate is never measured again";
  }
  EXPECT_EQ(r.failures(), 4);
  int reported = 0;
  for (const Trial& t : r.trials)
    if (t.result.status != TrialStatus::ok) {
      ++reported;
      EXPECT_NE(t.result.reason.find(t.knobs), std::string::npos);
    }
  EXPECT_EQ(reported, 4);
  // The best of what is left.
  double second_best = 1e9;
  for (size_t i = 0; i < s.true_us.size(); ++i)
    if (!s.failing.count(i)) second_best = std::min(second_best, s.true_us[i]);
  EXPECT_LE(s.true_us[s.id(r.winner_knobs)], 1.02 * second_best);
}

TEST(SuccessiveHalving, SearchesOnWhileNothingVerifies) {
  Synthetic s(50);
  for (size_t k = 0; k < 45; ++k) s.failing[s.id(s.ranked[k].knobs)] = TrialStatus::wrong_answer;
  StrategyResult r = successive_halving(s.ranked, s.measure(), {1e9, 0}, nullptr, {}, s.clock());
  EXPECT_FALSE(s.failing.count(s.id(r.winner_knobs)));
  EXPECT_EQ(r.failures(), 45);
}

TEST(SuccessiveHalving, AllFailingIsAClearError) {
  Synthetic s(20);
  for (size_t i = 0; i < 20; ++i)
    s.failing[i] = i % 2 ? TrialStatus::compile_error : TrialStatus::fault;
  try {
    successive_halving(s.ranked, s.measure(), {1e9, 0}, nullptr, {}, s.clock());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("no candidate passed verification: 20 trials failed"), std::string::npos) << m;
    EXPECT_NE(m.find("10 compile_error"), std::string::npos) << m;
    EXPECT_NE(m.find("10 fault"), std::string::npos) << m;
    EXPECT_NE(m.find("planted failure of " + s.ranked[0].knobs), std::string::npos) << m;
  }
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(s.measured[i], 1);
}

TEST(SuccessiveHalving, BrokenWorkerStopsTheSearchWithItsReason) {
  Synthetic s(100);
  int calls = 0;
  MeasureFn broken = [&](const RankedCandidate&, int) {
    ++calls;
    Measurement m;
    m.status = TrialStatus::worker_error;
    m.reason = "no GPU: cudaGetDeviceCount: no CUDA-capable device is detected";
    return m;
  };
  try {
    successive_halving(s.ranked, broken, {1e9, 0}, nullptr, {}, s.clock());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA-capable device"), std::string::npos) << e.what();
  }
  EXPECT_EQ(calls, kWorkerErrorStreak);
}

TEST(SuccessiveHalving, RejectsNonsense) {
  Synthetic s(3);
  EXPECT_THROW(successive_halving({}, s.measure(), {}, nullptr, {}, s.clock()), Error);
  HalvingOptions keep_all;
  keep_all.keep = 1;
  EXPECT_THROW(successive_halving(s.ranked, s.measure(), {}, nullptr, keep_all, s.clock()), Error);
  EXPECT_THROW(successive_halving(s.ranked, s.measure(), {0, 0}, nullptr, {}, s.clock()), Error);
}

// Two kernels of the same true time, measured on a GPU whose clock drifts down as it
// warms (each measurement 1.5 % slower than the one before): measured apart, the one
// measured first looks 10 % faster; in interleaved pairs the medians differ by one step
// of the drift, and a real 8 % win still shows.
TEST(CompareInterleaved, DriftDoesNotMakeAWinner) {
  int calls = 0;
  std::map<std::string, double> true_us = {{"default", 40.0}, {"same", 40.0}, {"faster", 36.8}};
  MeasureFn drifting = [&](const RankedCandidate& c, int reps) {
    Measurement m;
    m.status = TrialStatus::ok;
    m.reps = reps;
    m.median_us = true_us.at(c.knobs) * std::pow(1.015, calls++);
    return m;
  };
  // Apart: the search's winner measured first, the default after six other trials.
  Measurement apart_winner = drifting({"same", 0}, 50);
  calls += 6;
  Measurement apart_default = drifting({"default", 0}, 50);
  EXPECT_GT(apart_default.median_us / apart_winner.median_us, 1.09) << "the trap";

  calls = 0;
  PairedComparison same = compare_interleaved({"default", 0}, {"same", 0}, drifting, 50, 3);
  ASSERT_TRUE(same.ok) << same.note;
  EXPECT_EQ(same.pairs, 3);
  EXPECT_EQ(calls, 6);
  EXPECT_NEAR(same.default_us / same.winner_us, 1.0, 0.02);

  calls = 0;
  PairedComparison win = compare_interleaved({"default", 0}, {"faster", 0}, drifting, 50, 3);
  ASSERT_TRUE(win.ok);
  EXPECT_GT(win.default_us / win.winner_us, 1.06);
  EXPECT_EQ(win.winner_last.median_us, 36.8 * std::pow(1.015, 5));
}

TEST(CompareInterleaved, AFailureSaysWhichSideAndStops) {
  int calls = 0;
  MeasureFn flaky_winner = [&](const RankedCandidate& c, int reps) {
    ++calls;
    Measurement m;
    m.reps = reps;
    m.median_us = 10;
    m.status = (c.knobs == "winner" && calls == 4) ? TrialStatus::wrong_answer : TrialStatus::ok;
    if (m.status != TrialStatus::ok) m.reason = "max error 3.2 > 2e-2";
    return m;
  };
  PairedComparison c = compare_interleaved({"default", 0}, {"winner", 0}, flaky_winner, 5, 3);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(c.winner_failed);
  EXPECT_EQ(calls, 4) << "stops at the failure";
  EXPECT_EQ(c.pairs, 1);
  EXPECT_NE(c.note.find("the winner in pair 2: wrong_answer: max error 3.2"), std::string::npos)
      << c.note;
  EXPECT_EQ(c.default_last.status, TrialStatus::ok) << "the default's pair-2 time is kept";
  EXPECT_THROW(compare_interleaved({"default", 0}, {"winner", 0}, flaky_winner, 5, 0), Error);
}

TEST(Progress, ShortKnobsLeadWithTheTile) {
  EXPECT_EQ(short_knobs("BM=128,BN=256,BK=32,WM=2,STAGES=4", 100), "128x256x32 WM=2 STAGES=4");
  EXPECT_EQ(short_knobs("BM=64,FM=4", 100), "BM=64 FM=4");
  EXPECT_EQ(short_knobs("BM=128,BN=256,BK=32,WM=2,STAGES=4", 14), "128x256x32 ...");
}

TEST(Progress, LineShowsCountsBestAndEta) {
  ProgressState p;
  p.done = 12;
  p.planned = 40;
  p.failures = 2;
  p.round = 1;
  p.elapsed_s = 41;
  p.eta_s = 95;
  EXPECT_NE(format_progress(p, 120).find("no verified result yet"), std::string::npos);
  p.best_us = 812.4;
  p.best_knobs = "BM=128,BN=256,BK=32,WM=2";
  std::string line = format_progress(p, 120);
  EXPECT_NE(line.find("[######..............] 12/40 trials"), std::string::npos) << line;
  EXPECT_NE(line.find("2 failed"), std::string::npos) << line;
  EXPECT_NE(line.find("best 812 us 128x256x32 WM=2"), std::string::npos) << line;
  EXPECT_NE(line.find("0:41 elapsed, ETA 1:35"), std::string::npos) << line;
  EXPECT_LE(format_progress(p, 100).size(), 100u);
  EXPECT_LT(format_progress(p, 100).size(), line.size()) << "the knobs are cut to fit";
  EXPECT_EQ(format_summary(p, 120),
            "tuned: 12 trials (2 failed) in 0:41, best 812 us 128x256x32 WM=2");
}

// Short launches are ranked by graph replay: a candidate whose event median is the
// lowest (launch overhead, the unsplit kernel of 2026-11-22) but whose replay is slower loses
// to the one that replays faster; a candidate without a replay time is ranked by its
// event median.
TEST(SuccessiveHalving, RanksReplayedTrialsByTheirReplayTime) {
  const std::vector<RankedCandidate> ranked = {{"unsplit", 1}, {"split", 2}, {"long", 3}};
  MeasureFn measure = [](const RankedCandidate& c, int reps) {
    Measurement m;
    m.status = TrialStatus::ok;
    m.reps = reps;
    if (c.knobs == "unsplit") m.median_us = 11.81, m.graph_us = 10.9;
    if (c.knobs == "split") m.median_us = 11.95, m.graph_us = 7.3;
    if (c.knobs == "long") m.median_us = 41.0;
    return m;
  };
  double now = 0;
  SecondsClock clock = [&] { return now += 0.01; };
  StrategyResult r = successive_halving(ranked, measure, {60, 0}, nullptr, {}, clock);
  EXPECT_EQ(r.winner_knobs, "split");
  EXPECT_EQ(r.winner_us, 7.3);
}

TEST(Progress, LogGetsALinePerRoundTerminalGetsRedraws) {
  Synthetic a(200), b(200);
  std::ostringstream log, tty;
  ProgressBar log_bar(log, false), tty_bar(tty, true);
  StrategyResult r = successive_halving(a.ranked, a.measure(), {60, 0}, &log_bar, {}, a.clock());
  successive_halving(b.ranked, b.measure(), {60, 0}, &tty_bar, {}, b.clock());
  std::string l = log.str();
  EXPECT_EQ(std::count(l.begin(), l.end(), '\n'), r.rounds + 1) << l;  // rounds, then the end
  EXPECT_EQ(l.find('\r'), std::string::npos);
  std::string t = tty.str();
  EXPECT_GE(size_t(std::count(t.begin(), t.end(), '\r')), r.trials.size());
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 1);
  EXPECT_NE(l.find("best "), std::string::npos);
  EXPECT_NE(l.find("tuned: " + std::to_string(r.trials.size()) + " trials"), std::string::npos)
      << l;
}

}  // namespace
}  // namespace loom::tune
