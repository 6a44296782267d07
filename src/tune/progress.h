// The tuner's progress report on stderr: trials done of planned, failures, the best so
// far (µs and its knobs in short form), elapsed time and ETA. On a terminal one line is
// redrawn in place after every trial; in a log (CI) a line is printed per round, so
// the log stays short and readable.
#pragma once
#include <cstddef>
#include <optional>
#include <ostream>
#include <string>

namespace loom::tune {

struct ProgressState {
  int done = 0;      // trials measured
  int planned = 0;   // trials done + still planned (changes as the plan adapts)
  int failures = 0;  // trials with a non-ok status
  int round = 0;     // successive-halving round (0 = the first, widest)
  double elapsed_s = 0;
  double eta_s = 0;  // estimated seconds still to go
  std::optional<double> best_us;
  std::string best_knobs;
};

// "BM=128,BN=256,BK=32,WM=2,..." -> "128x256x32 WM=2 ...", cut to `max_chars` with "...".
std::string short_knobs(const std::string& knobs, size_t max_chars);

// One line, at most `width` characters (the knobs are cut to fit).
std::string format_progress(const ProgressState& s, size_t width);

// The closing line: "tuned: 30 trials (2 failed) in 0:15, best 812 us 128x256x32 ...".
std::string format_summary(const ProgressState& s, size_t width);

class ProgressBar {
 public:
  ProgressBar(std::ostream& out, bool tty, size_t width = 100);
  // On stderr: a terminal's width from $COLUMNS (else 100), redrawing when stderr is one.
  static ProgressBar on_stderr();

  void trial(const ProgressState& s);   // after every trial
  void round(const ProgressState& s);   // after every round
  void finish(const ProgressState& s);  // once, at the end

 private:
  std::ostream& out_;
  bool tty_;
  size_t width_;
};

}  // namespace loom::tune
