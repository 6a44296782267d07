#include "tune/strategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "ir/error.h"
#include "tune/trial_timing.h"

namespace loom::tune {
namespace {

// Seconds a trial takes as a function of its repetitions: fixed + per_rep · reps (without
// a problem's one-time set-up, Measurement::setup_seconds, which only the first pays). Where
// the measurements say how long their timed repetitions took, the split is read off
// them (fixed: the rest of each trial's time, failed trials included; per_rep: timed
// seconds per repetition). Otherwise it is fitted (least squares over the mean of each
// repetition count), and with a single repetition count half is assumed fixed.
class CostModel {
 public:
  void add(int reps, double seconds, double timing_seconds) {
    auto& l = levels_[reps];
    l.first += seconds;
    l.second += 1;
    total_s_ += seconds;
    ++trials_;
    if (timing_seconds > 0) {
      timed_s_ += timing_seconds;
      timed_reps_ += reps;
    }
  }

  double estimate(int reps) const {
    if (trials_ == 0) return 0;
    if (timed_reps_ > 0) {
      double fixed = std::max(0.0, total_s_ - timed_s_) / trials_;
      return fixed + timed_s_ / timed_reps_ * reps;
    }
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& [r, l] : levels_) {
      double y = l.first / l.second;
      n += l.second;
      sx += l.second * r;
      sy += l.second * y;
      sxx += l.second * r * r;
      sxy += l.second * r * y;
    }
    double mx = sx / n, my = sy / n;
    double fixed, per_rep;
    if (levels_.size() < 2) {
      fixed = my / 2;
      per_rep = my / (2 * mx);
    } else {
      per_rep = (sxy - n * mx * my) / (sxx - n * mx * mx);
      fixed = my - per_rep * mx;
      if (per_rep < 0) per_rep = 0, fixed = my;
      if (fixed < 0) fixed = 0, per_rep = my / mx;
    }
    return fixed + per_rep * reps;
  }

 private:
  std::map<int, std::pair<double, double>> levels_;  // reps -> (sum of seconds, count)
  double total_s_ = 0, timed_s_ = 0;
  int trials_ = 0;
  int64_t timed_reps_ = 0;
};

// Plans fill this share of the budget: trial times vary, and a plan that fills all of it
// would see its last round cut short by any trial a little slower than estimated.
constexpr double kPlanShare = 0.9;

int survivors(int n, double keep) { return std::max(1, int(std::ceil(n * keep - 1e-9))); }

struct Plan {
  int trials = 0;
  double seconds = 0;
};

class Halving {
 public:
  Halving(const std::vector<RankedCandidate>& ranked, const MeasureFn& measure,
          const Budget& budget, ProgressBar* progress, const HalvingOptions& opt,
          const SecondsClock& clock)
      : ranked_(ranked),
        measure_(measure),
        budget_(budget),
        progress_(progress),
        opt_(opt),
        clock_(clock),
        state_(ranked.size()),
        start_(clock()) {}

  StrategyResult run();

 private:
  struct CandidateState {
    bool failed = false;
    int round = -1;  // the last round it measured ok in
    double us = 0;
    int reps = 0;
  };

  double elapsed() const { return clock_() - start_; }
  int next_reps(int reps) const {
    return std::min(opt_.max_reps, std::max(reps + 1, int(std::ceil(reps / opt_.keep))));
  }
  bool cap_reached() const {
    return budget_.max_trials > 0 && int(res_.trials.size()) >= budget_.max_trials;
  }
  // `remaining` more trials of a round of `total` candidates at `reps`, then the rounds
  // that follow it, assuming every trial is ok.
  Plan plan(int total, int remaining, int reps) const;
  // The largest round-0 size whose whole plan fits the time left and the trial cap.
  int round0_size(int done, int reps) const;
  void trial(size_t i, int round, int reps);
  ProgressState progress_state() const;
  [[noreturn]] void fail_no_winner() const;

  const std::vector<RankedCandidate>& ranked_;
  const MeasureFn& measure_;
  Budget budget_;
  ProgressBar* progress_;
  HalvingOptions opt_;
  const SecondsClock& clock_;
  std::vector<CandidateState> state_;
  double start_;
  CostModel model_;
  StrategyResult res_;
  int failures_ = 0, worker_error_streak_ = 0;
  // The round in progress, for the plan shown as progress.
  int round_ = 0, round_total_ = 1, round_done_ = 0, reps_ = 0;
};

Plan Halving::plan(int total, int remaining, int reps) const {
  Plan p{remaining, remaining * model_.estimate(reps)};
  for (int n = survivors(total, opt_.keep); n >= 2; n = survivors(n, opt_.keep)) {
    reps = next_reps(reps);
    p.trials += n;
    p.seconds += n * model_.estimate(reps);
  }
  return p;
}

int Halving::round0_size(int done, int reps) const {
  const int n = int(ranked_.size());
  const int made = int(res_.trials.size());
  int size = done;
  for (int total = done + 1; total <= n; ++total) {
    Plan p = plan(total, total - done, reps);
    if (budget_.max_trials > 0 && made + p.trials > budget_.max_trials) break;
    if (elapsed() + p.seconds > kPlanShare * budget_.seconds) break;
    size = total;
  }
  return size;
}

void Halving::trial(size_t i, int round, int reps) {
  double t0 = clock_();
  Measurement m = measure_(ranked_[i], reps);
  double seconds = clock_() - t0;
  // A problem's one-time set-up (the first trial in a worker) is not every trial's cost.
  model_.add(reps, std::max(0.0, seconds - m.setup_seconds), m.timing_seconds);
  res_.trials.push_back({i, ranked_[i].knobs, round, reps, m, seconds});
  ++round_done_;
  CandidateState& s = state_[i];
  if (m.status == TrialStatus::ok) {
    s.round = round;
    s.us = trial_us(m);  // graph replay for a short launch, as the benchmark compares
    s.reps = m.reps;
    worker_error_streak_ = 0;
  } else {
    s.failed = true;
    ++failures_;
    worker_error_streak_ = m.status == TrialStatus::worker_error ? worker_error_streak_ + 1 : 0;
    if (worker_error_streak_ >= kWorkerErrorStreak)
      throw Error("the measurement worker failed on " + std::to_string(kWorkerErrorStreak) +
                  " candidates in a row, so tuning stops: " + m.reason);
  }
  if (progress_) progress_->trial(progress_state());
}

ProgressState Halving::progress_state() const {
  ProgressState p;
  p.done = int(res_.trials.size());
  Plan left = plan(round_total_, std::max(0, round_total_ - round_done_), reps_);
  p.planned = p.done + left.trials;
  if (budget_.max_trials > 0) p.planned = std::min(p.planned, budget_.max_trials);
  p.failures = failures_;
  p.round = round_;
  p.elapsed_s = elapsed();
  p.eta_s = std::max(0.0, std::min(left.seconds, budget_.seconds - p.elapsed_s));
  for (size_t i = 0; i < state_.size(); ++i) {
    const CandidateState& s = state_[i];
    if (s.failed || s.round < 0 || (p.best_us && *p.best_us <= s.us)) continue;
    p.best_us = s.us;
    p.best_knobs = ranked_[i].knobs;
  }
  return p;
}

void Halving::fail_no_winner() const {
  if (res_.trials.empty())
    throw Error("the tuning budget (" + std::to_string(budget_.seconds) + " s, " +
                std::to_string(budget_.max_trials) +
                " trials) ended before any candidate was measured: give it more");
  std::map<std::string, int> by_status;
  for (const Trial& t : res_.trials) ++by_status[trial_status_name(t.result.status)];
  std::string counts;
  for (const auto& [s, c] : by_status)
    counts += (counts.empty() ? "" : ", ") + std::to_string(c) + " " + s;
  std::string msg = "no candidate passed verification: " + std::to_string(res_.trials.size()) +
                    " trials failed (" + counts + ")";
  for (size_t i = 0; i < res_.trials.size() && i < 3; ++i) {
    const Trial& t = res_.trials[i];
    std::string reason = t.result.reason.substr(0, t.result.reason.find('\n'));
    msg += "\n  " + t.knobs + ": " + trial_status_name(t.result.status) + ": " + reason;
  }
  throw Error(msg);
}

StrategyResult Halving::run() {
  const int n = int(ranked_.size());
  reps_ = opt_.first_reps;
  res_.rounds = 1;

  // Round 0: the top of the ranking, in order, as many as the plan affords. Until one
  // candidate is verified the search goes on down the ranking while time is left.
  int done0 = 0, ok0 = 0;
  for (size_t next = 0; next < size_t(n); ++next) {
    if (cap_reached() || elapsed() >= budget_.seconds) {
      res_.cut_short = true;
      break;
    }
    if (done0 > 0) {
      round_total_ = std::max(round0_size(done0, reps_), done0);
      if (done0 >= round_total_) {
        if (ok0 > 0) break;
        if (elapsed() + model_.estimate(reps_) > budget_.seconds) {
          res_.cut_short = true;
          break;
        }
      }
    }
    trial(next, 0, reps_);
    ++done0;
    if (state_[next].round == 0) ++ok0;
  }
  round_total_ = done0;
  if (progress_) progress_->round(progress_state());

  std::vector<size_t> alive;
  for (size_t i = 0; i < state_.size(); ++i)
    if (!state_[i].failed && state_[i].round == 0) alive.push_back(i);
  auto by_time = [&](size_t a, size_t b) { return state_[a].us < state_[b].us; };
  std::sort(alive.begin(), alive.end(), by_time);
  alive.resize(std::min(alive.size(), size_t(survivors(int(alive.size()), opt_.keep))));

  // Later rounds: the survivors, best first, with more repetitions each round.
  while (alive.size() > 1 && !res_.cut_short) {
    ++round_;
    res_.rounds = round_ + 1;
    reps_ = next_reps(reps_);
    round_total_ = int(alive.size());
    round_done_ = 0;
    std::vector<size_t> measured;
    for (size_t i : alive) {
      if (cap_reached() || elapsed() + model_.estimate(reps_) > budget_.seconds) {
        res_.cut_short = true;
        break;
      }
      trial(i, round_, reps_);
      if (state_[i].round == round_) measured.push_back(i);
    }
    if (progress_) progress_->round(progress_state());
    std::sort(measured.begin(), measured.end(), by_time);
    measured.resize(std::min(measured.size(), size_t(survivors(int(measured.size()), opt_.keep))));
    alive = measured;
  }

  // The winner: verified in every trial, furthest round reached, then fastest there.
  bool found = false;
  for (size_t i = 0; i < state_.size(); ++i) {
    const CandidateState& s = state_[i];
    if (s.failed || s.round < 0) continue;
    const CandidateState& w = state_[res_.winner];
    if (!found || s.round > w.round || (s.round == w.round && s.us < w.us)) {
      res_.winner = i;
      found = true;
    }
  }
  if (!found) fail_no_winner();
  res_.winner_knobs = ranked_[res_.winner].knobs;
  res_.winner_us = state_[res_.winner].us;
  res_.winner_reps = state_[res_.winner].reps;
  round_total_ = round_done_ = 0;
  if (progress_) progress_->finish(progress_state());
  return std::move(res_);
}

}  // namespace

int StrategyResult::failures() const {
  int f = 0;
  for (const Trial& t : trials) f += t.result.status != TrialStatus::ok;
  return f;
}

SecondsClock steady_seconds() {
  return [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
}

StrategyResult successive_halving(const std::vector<RankedCandidate>& ranked,
                                  const MeasureFn& measure, const Budget& budget,
                                  ProgressBar* progress, const HalvingOptions& opt,
                                  const SecondsClock& clock) {
  if (ranked.empty()) throw Error("nothing to tune: the search space has no candidate");
  if (!(opt.keep > 0 && opt.keep < 1))
    throw Error("successive halving keeps a fraction in (0, 1) of each round (got " +
                std::to_string(opt.keep) + ")");
  if (opt.first_reps < 1 || opt.max_reps < opt.first_reps)
    throw Error("successive halving needs 1 <= first_reps <= max_reps (got " +
                std::to_string(opt.first_reps) + ", " + std::to_string(opt.max_reps) + ")");
  return Halving(ranked, measure, budget, progress, opt, clock).run();
}

PairedComparison compare_interleaved(const RankedCandidate& default_candidate,
                                     const RankedCandidate& winner, const MeasureFn& measure,
                                     int reps, int pairs) {
  if (pairs < 1 || reps < 1) throw Error("compare_interleaved: pairs and reps must be >= 1");
  PairedComparison c;
  std::vector<double> d_us, w_us;
  for (int i = 0; i < pairs; ++i) {
    for (bool is_default : {true, false}) {
      Measurement m = measure(is_default ? default_candidate : winner, reps);
      if (m.status != TrialStatus::ok) {
        c.winner_failed = !is_default;
        c.note = std::string(is_default ? "the default" : "the winner") + " in pair " +
                 std::to_string(i + 1) + ": " + trial_status_name(m.status) + ": " + m.reason;
        return c;
      }
      (is_default ? d_us : w_us).push_back(trial_us(m));
      (is_default ? c.default_last : c.winner_last) = m;
    }
    c.pairs = i + 1;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  c.default_us = median(d_us);
  c.winner_us = median(w_us);
  c.ok = true;
  return c;
}

}  // namespace loom::tune
