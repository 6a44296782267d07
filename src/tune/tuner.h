// `loom tune`: the tuner's pieces in order, for one expression or a suite.
//
//   space     generate_space (space.h): candidates from the knob registry's search lists
//             and the atom table, pruned by rules, ranked by the cost model;
//   compile   compile_candidates (compile_pool.h) on a thread pool through the cubin
//             cache, which the worker then hits; ptxas' report prunes spills and
//             candidates no SM can hold (prune.h, stage 3);
//   measure   successive_halving (strategy.h) over the survivors, each trial verified and
//             timed in an isolated worker process (worker.h), inside the time budget;
//   confirm   the winner re-runs as `loom run --bench` would run it, timed against cuBLAS;
//   remember  the winner goes into the tuning database (database.h) under its key (GPU,
//             op signature, shape), where `loom run` and `loom compile` find it.
//
// The budget covers the whole run, space and compilation included: the strategy gets
// what is left when measuring starts. The shipped default for the shape is always a
// candidate (space.h), so a tuned result is never slower than the default as measured.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "tune/db_file.h"
#include "tune/measurement.h"
#include "tune/strategy.h"

namespace loom::tune {

struct TuneOptions {
  std::map<std::string, int64_t> sizes;  // values of symbolic dims
  Budget budget;                         // per expression
  int max_candidates = 48;               // the space's cap (the shipped defaults on top)
  // ATOM values to search; empty = those the operands' dtype allows without changing the
  // numeric contract: f32 operands get fma only (mma_tf32 rounds the inputs to tf32, a
  // different contract that a person opts into, e.g. {"fma", "mma_tf32"}).
  std::vector<std::string> atoms;
  int compile_threads = 0;               // 0 = hardware concurrency
  double trial_timeout_s = 20;           // per worker phase; past it the child is killed
  uint64_t seed = 1;
  bool record = true;                    // write the winner into the tuning database
  std::string db_path;                   // empty = the default database
  std::string loom_binary = "/proc/self/exe";  // the worker's executable
  bool progress = true;                  // the progress bar on stderr
  // Re-run the winner through `loom run --bench` (verified, timed interleaved with
  // cuBLAS) in this process: the time `loom run` will see, and cuBLAS's for the record.
  // Device 0 only (run_expression's device).
  bool confirm = true;
  // Stop before measuring: build, compile and prune the space and rank it with the cost
  // model for `profile` (a device_profiles.h name) or the GPU present; no GPU is needed.
  bool dry_run = false;
  bool show_pruned = false;  // the report gives one example (reason and knobs) per kind
  std::string profile;  // empty: the GPU present, else h100
  // Measure with this L2 method (tests, comparisons); auto = the plan `loom run --bench`
  // makes for the problem (trial_timing.h), which is what the database records.
  L2Request l2 = L2Request::automatic;
  // A shipped defaults file (tune/shipped/h100.db): every winner is also merged into it
  // (export_shipped, shipped.h), so one tuning run on the GPU produces the file to commit.
  std::string export_shipped;
};

struct TuneOutcome {
  std::string expression;
  int device = 0;
  std::string device_name;
  std::string error;               // non-empty: this expression could not be tuned (why)
  std::string best_knobs;
  double best_us = 0;
  std::string best_l2;             // the L2 method the winner was timed with ("rotate", ...)
  std::string best_timed;          // "graph" (replayed: a short launch) or "event" (trial_timing.h)
  std::optional<double> default_us;  // the default (no knobs) at the winner's repetitions
  // Interleaved default/winner pairs behind default_us and best_us when the search's winner
  // is not the default (strategy.h, compare_interleaved); 0 when none were needed or made.
  int final_pairs = 0;
  std::string default_knobs;         // what `loom run` compiles without knobs or a record
  std::string default_note;          // why the default has no time (it failed: how)
  std::optional<double> confirm_us;  // the winner under `loom run --bench` (confirm)
  std::optional<double> cublas_us;   // cuBLAS in the same confirmation run
  std::string confirm_note;          // why there was no confirmation, or what failed
  // The search's own winner when the default took its place (default_won): its knobs
  // and time, for the report. Empty when the search's winner stands.
  std::string search_best_knobs;
  double search_best_us = 0;
  double flops = 0;
  size_t candidates = 0;           // measured-eligible after compilation
  size_t pruned = 0;               // by the space's rules, the pipeline or ptxas
  size_t enumerated = 0;           // knob sets the space's rules were asked about
  size_t searched = 0;             // of those, points that passed stage 1 (before the cap)
  // The shipped defaults whose atom the space enumerates, and how many of them are
  // points of it (space.h: Candidate::in_search).
  int defaults_searchable = 0, defaults_in_search = 0;
  std::vector<std::pair<std::string, double>> ranked;  // knobs, predicted us (best first)
  struct PrunedKind {
    int count = 0;
    std::string example_reason, example_knobs;  // the first candidate pruned this way
  };
  std::map<std::string, PrunedKind> pruned_by_reason;  // reason_kind(reason) -> kind
  bool show_pruned = false;  // TuneOptions::show_pruned, for the report
  StrategyResult search;           // every trial
  double seconds = 0;              // wall time of the whole tune
  std::string recorded;            // "added to <db>", "kept: <db> has a faster record", ...
  // The winner as a database entry (key and record), when its key could be made: what
  // the database and the shipped export take.
  std::optional<DbEntry> entry;
  std::string shipped;             // "added to tune/shipped/h100.db", or why not
};

// Whether the default is the tune's result: the search's winner is the default, or the
// default re-measured at the winner's repetitions was no slower. A record that does not
// beat the default would pin the shape to other knobs for nothing (H100, 128x128x16384,
// 2026-11-23: a split-16 winner at 7.7 us against the default's 7.2), so then nothing is
// recorded or shipped and `loom run` keeps compiling the default.
bool default_won(const TuneOutcome& o);

// Tunes one expression on one device. Never throws for a candidate's failure; returns an
// outcome with `error` set when the expression cannot be tuned (parse error, symbolic
// size, no GPU, every candidate failed).
TuneOutcome tune_expression(const std::string& expression, int device, const TuneOptions& opt);

// Tunes every expression, one worker per device in `devices` (a queue: each device takes
// the next expression when it is done with one).
std::vector<TuneOutcome> tune_suite(const std::vector<std::string>& expressions,
                                    const std::vector<int>& devices, const TuneOptions& opt);

// A pruning reason with its numbers replaced by '#' (and cut to 90 characters): the
// report counts pruned candidates by kind.
std::string reason_kind(const std::string& reason);

// A suite file: one expression per line; '#' starts a comment, blank lines are skipped.
// Throws loom::Error naming the file when it cannot be read or holds no expression.
std::vector<std::string> read_suite(const std::string& path);

// The report: per expression, the winner, its time, TFLOP/s, the default's time and the
// gain over it, trials and failures (with their reasons), and where it was recorded.
std::string format_tune_report(const std::vector<TuneOutcome>& outcomes);

}  // namespace loom::tune
