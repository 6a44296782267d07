#include "tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <thread>

#include "driver/run.h"
#include "driver/run_memory.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "runtime/cubin_cache.h"
#include "tune/attention_space.h"
#include "tune/compile_pool.h"
#include "tune/database.h"
#include "tune/device_profiles.h"
#include "tune/problem.h"
#include "tune/prune.h"
#include "tune/space.h"
#include "tune/trial_timing.h"
#include "tune/tuning_key.h"
#include "tune/worker.h"

namespace loom::tune {
namespace {

// Interleaved pairs of the default and the winner that decide between them.
constexpr int kFinalPairs = 3;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The winner as a database entry; nullopt (why in `why`) when the graph has no key.
std::optional<DbEntry> winner_entry(const Graph& g, const DeviceInfo& dev, const TuneOutcome& out,
                                    const TuneOptions& opt, std::string& why) {
  std::optional<TuningKey> key = key_for(g, dev, &why);
  if (!key) return std::nullopt;
  TuningRecord rec;
  rec.knobs = out.best_knobs;
  rec.median_us = out.best_us;
  rec.cublas_us = out.cublas_us.value_or(0);
  rec.trials = int(out.search.trials.size());
  rec.date = utc_now_iso();
  rec.revision = build_revision();
  rec.l2 = out.best_l2;
  rec.timed = out.best_timed;
  std::ostringstream note;
  note << "loom tune --budget " << opt.budget.seconds;
  rec.note = note.str();
  return DbEntry{*key, rec};
}

}  // namespace

bool default_won(const TuneOutcome& o) {
  if (o.default_knobs.empty()) return false;
  return o.best_knobs == o.default_knobs || (o.default_us && *o.default_us <= o.best_us);
}

namespace {

// Records the winner; the database keeps the faster record per key (of those timed the
// same way), so a short tune never overwrites a better one from a longer tune.
std::string record_winner(const DbEntry& e, const TuneOptions& opt) {
  TuningDb db = opt.db_path.empty() ? TuningDb::open_default() : TuningDb::open(opt.db_path);
  if (!db.enabled()) return "not recorded: " + db.disabled_reason();
  switch (db.record(e.key, e.rec)) {
    case TuningDb::Outcome::added: return "added to " + db.path();
    case TuningDb::Outcome::improved: return "improved in " + db.path();
    case TuningDb::Outcome::replaced: return "replaced in " + db.path();
    case TuningDb::Outcome::kept: return "kept: " + db.path() + " has a faster record";
  }
  return "";
}

// The winner as `loom run --bench` runs it: verified again, timed interleaved with cuBLAS
// by the same protocol. A failure here is reported, not thrown: the search's verified
// result stands, and the report says what the confirmation saw.
void confirm_winner(const std::string& expression, TuneOutcome& out, const TuneOptions& opt) {
  try {
    RunOptions ro;
    ro.device = out.device;  // the GPU the search measured on (`--devices` gives each its own)
    ro.knobs = Knobs::parse(out.best_knobs);
    ro.sizes = opt.sizes;
    ro.seed = opt.seed;
    ro.bench = true;
    ro.l2 = opt.l2;  // the search's L2 method, so the two times compare
    // Replayed under the trials' bound, for the same reason: a winner ranked by its replay
    // time is confirmed by one (cuBLAS with it, in the same comparison).
    ro.timing.graph_replay_below_us = kTrialGraphReplayBelowUs;
    RunReport r = run_expression(expression, ro);
    if (!r.verify.passed) {
      out.confirm_note = "confirmation run failed verification: " + r.verify.message;
      return;
    }
    // Read as the search ranked the winner: its graph replay time when it was replayed.
    const bool graph = out.best_timed == "graph";
    for (const BackendResult& b : r.backends) {
      const double us = graph && b.timing.graph_median_us ? *b.timing.graph_median_us
                                                           : b.timing.median_us;
      if (b.name == "Loom") out.confirm_us = us;
      if (b.name == "cuBLAS") out.cublas_us = us;
    }
  } catch (const Error& e) {
    out.confirm_note = std::string("confirmation run failed: ") + e.what();
  }
}

}  // namespace

// What a reason says without its numbers, so that "smem 262144 B > 232448 B" and
// "smem 196608 B > 232448 B" count as one kind of pruning in the report.
std::string reason_kind(const std::string& reason) {
  std::string out;
  bool in_number = false;
  for (char ch : reason.substr(0, 90)) {
    bool digit = ch >= '0' && ch <= '9';
    if (digit && !in_number) out += '#';
    in_number = digit;
    if (!digit) out += ch;
  }
  return out;
}

namespace {

// Space, parallel compilation and static pruning: everything before the GPU measures.
// Fills the outcome's counts and ranking; returns the graph the candidates are for.
Graph prepare(const std::string& expression, const DeviceInfo& dev, const TuneOptions& opt,
              TuneOutcome& out) {
  Graph g = bind_sizes(parse_expression(expression), opt.sizes);
  const Target target = target_for_device(dev);
  SpaceOptions so;
  so.max_candidates = opt.max_candidates;
  so.threads = opt.compile_threads;
  so.atoms = opt.atoms;
  // Attention has a space of its own (attention_space.h): its families take the place
  // of the ATOM values (--atoms wgmma,mma_sync).
  const bool attention = g.attention() != nullptr;
  Space space;
  if (attention) {
    out.flops = expression_flops(g);
    space = generate_attention_space(g, dev, target, so);
  } else {
    const TuneProblem problem = tune_problem(g);
    out.flops = problem.flops();
    if (so.atoms.empty() && problem.in == DType::F32) so.atoms = {"fma"};
    space = generate_space(g, dev, target, so);
  }
  out.pruned = space.pruned.size();
  out.enumerated = space.enumerated;
  out.searched = space.searched;
  auto family = [&](const Knobs& k) {
    return attention ? attention_family_of(k) : k.get_str("ATOM", "fma");
  };
  for (const auto& c : space.kept)
    if (c.shipped_default && std::count(space.atoms.begin(), space.atoms.end(), family(c.knobs))) {
      ++out.defaults_searchable;
      out.defaults_in_search += c.in_search;
    }
  auto count = [&](const std::string& reason, const Knobs& knobs) {
    TuneOutcome::PrunedKind& kind = out.pruned_by_reason[reason_kind(reason)];
    if (kind.count++ == 0) kind.example_reason = reason, kind.example_knobs = knobs.str();
  };
  for (const auto& p : space.pruned) count(p.reason, p.knobs);

  // Compile every kept candidate in parallel now: the worker then finds each cubin in the
  // cache, so a trial costs loading, checking and timing.
  CubinCache cache;
  std::vector<CompiledCandidate> compiled =
      compile_candidates(g, target, space.kept, opt.compile_threads, &cache);
  for (size_t i = 0; i < compiled.size(); ++i) {
    std::string reason = compiled[i].ok() ? resource_violation(compiled[i], dev) : compiled[i].error;
    if (!reason.empty()) {
      ++out.pruned;
      count(reason, space.kept[i].knobs);
      continue;
    }
    out.ranked.emplace_back(space.kept[i].knobs.str(), space.kept[i].predicted_us);
    if (space.kept[i].plain_default) out.default_knobs = space.kept[i].knobs.str();
  }
  out.candidates = out.ranked.size();
  if (out.ranked.empty()) throw Error("no candidate survived compilation: every one was pruned");
  return g;
}

}  // namespace

TuneOutcome tune_expression(const std::string& expression, int device, const TuneOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  TuneOutcome out;
  out.expression = expression;
  out.device = device;
  try {
    // A database path that is not a tuning database (a directory, someone's file) would
    // refuse the record only after the whole search: say so before anything starts.
    if (opt.record && !opt.dry_run) {
      TuningDb db = opt.db_path.empty() ? TuningDb::open_default(false) : TuningDb::open(opt.db_path, false);
      if (!db.refused().empty())
        throw Error("cannot record into the tuning database: " + db.refused() + "; or tune with --no-record");
    }
    // A problem the host cannot hold is refused before the GPU is asked and the space
    // built, as `loom run` refuses it (driver/run_memory.h); each trial judges the GPU's side with its
    // candidate's workspace (trial_runner.cpp). A dry run allocates nothing.
    if (!opt.dry_run) {
      MemoryAvailable have;
      have.host = host_available_bytes();
      const Graph bound = bind_sizes(parse_expression(expression), opt.sizes);
      if (std::string why = memory_refusal(run_memory_need(bound, nullptr, false), have); !why.empty())
        throw Error("loom tune: " + why);
    }
    std::optional<DeviceInfo> dev;
    std::string why_not;
    if (!opt.profile.empty()) {
      dev = device_profile(opt.profile);
      if (!dev)
        throw Error("unknown GPU profile '" + opt.profile + "': use one of " + device_profile_names());
      if (!opt.dry_run)
        throw Error("--gpu " + opt.profile + " describes a GPU for --dry-run; measuring needs the GPU itself");
    } else {
      dev = probe_device(device, &why_not);
      if (!dev && opt.dry_run) dev = device_profile("h100");
      if (!dev)
        throw Error("loom tune needs a GPU: " + why_not +
                    " (--dry-run builds and ranks the space without one)");
    }
    out.device_name = dev->name;
    out.show_pruned = opt.show_pruned;
    Graph g = prepare(expression, *dev, opt, out);
    if (opt.dry_run) {
      out.seconds = seconds_since(t0);
      return out;
    }

    std::vector<RankedCandidate> ranked;
    for (const auto& [knobs, us] : out.ranked) ranked.push_back({knobs, us});
    {
      MeasureWorker worker(device, opt.loom_binary);
      MeasureFn measure = [&](const RankedCandidate& c, int reps) {
        MeasureJob job;
        job.expression = expression;
        job.sizes = opt.sizes;
        job.knobs = c.knobs;
        job.seed = opt.seed;
        job.timing.reps = reps;
        job.timing.warmup = std::min(reps, 5);
        job.l2 = opt.l2;
        return worker.measure(job, opt.trial_timeout_s);
      };
      Budget left = opt.budget;
      left.seconds = std::max(1.0, opt.budget.seconds - seconds_since(t0));
      std::optional<ProgressBar> bar;
      if (opt.progress) bar.emplace(ProgressBar::on_stderr());
      out.search = successive_halving(ranked, measure, left, bar ? &*bar : nullptr);
      out.best_knobs = out.search.winner_knobs;
      out.best_us = out.search.winner_us;
      for (const Trial& t : out.search.trials)
        if (t.knobs == out.best_knobs && t.result.status == TrialStatus::ok) {
          out.best_l2 = t.result.l2;
          out.best_timed = trial_timed(t.result);
        }
      // The default against the winner in interleaved pairs at the winner's repetitions
      // (compare_interleaved: measurements taken apart differ by more than the wins a
      // record is for): the tuned/default ratio compares like with like, and says how
      // far the shape-class heuristics are from the tuned result.
      std::optional<Measurement> at_default;
      if (out.best_knobs == out.default_knobs) {
        for (const Trial& t : out.search.trials)
          if (t.knobs == out.default_knobs && t.result.status == TrialStatus::ok)
            at_default = t.result;
        if (at_default) out.default_us = out.best_us;
      } else if (!out.default_knobs.empty()) {
        PairedComparison pc =
            compare_interleaved({out.default_knobs, 0}, {out.best_knobs, 0}, measure,
                                std::max(out.search.winner_reps, 1), kFinalPairs);
        if (pc.ok) {
          at_default = pc.default_last;
          out.default_us = pc.default_us;
          out.best_us = pc.winner_us;
          out.final_pairs = pc.pairs;
        } else if (pc.winner_failed) {
          // A winner that verified in the search and fails when measured again is not
          // one to record (a race shows this way): the default stands, with the reason.
          out.search_best_knobs = out.best_knobs;
          out.search_best_us = out.best_us;
          out.best_knobs = out.default_knobs;
          out.best_us = 0;
          out.default_note = pc.note;
          if (pc.default_last.status == TrialStatus::ok) {  // measured before the winner
            at_default = pc.default_last;
            out.default_us = out.best_us = trial_us(pc.default_last);
            out.best_l2 = at_default->l2;
            out.best_timed = trial_timed(*at_default);
          }
        } else {
          out.default_note = pc.note;
        }
      }
      // A winner no faster than the default gives way to it (default_won).
      if (default_won(out) && out.best_knobs != out.default_knobs) {
        out.search_best_knobs = out.best_knobs;
        out.search_best_us = out.best_us;
        out.best_knobs = out.default_knobs;
        out.best_us = *out.default_us;
        out.best_l2 = at_default->l2;
        out.best_timed = trial_timed(*at_default);
      }
    }  // the worker exits before the confirmation run takes the GPU
    if (opt.confirm) confirm_winner(expression, out, opt);
    std::string no_key;
    out.entry = winner_entry(g, *dev, out, opt, no_key);
    if (opt.record)
      out.recorded = !out.entry      ? "not recorded: " + no_key
                     : default_won(out) ? "not recorded: the default won (`loom run` compiles it "
                                          "without a record)"
                                        : record_winner(*out.entry, opt);
  } catch (const Error& e) {
    out.error = e.what();
  }
  out.seconds = seconds_since(t0);
  return out;
}

std::vector<TuneOutcome> tune_suite(const std::vector<std::string>& expressions,
                                    const std::vector<int>& devices, const TuneOptions& opt) {
  std::vector<TuneOutcome> outcomes(expressions.size());
  if (devices.size() <= 1) {
    for (size_t i = 0; i < expressions.size(); ++i)
      outcomes[i] = tune_expression(expressions[i], devices.empty() ? 0 : devices[0], opt);
    return outcomes;
  }
  // One thread per device takes the next expression off a shared index; each tune runs
  // its own worker process on its device. Progress bars of several devices would
  // overwrite each other's line, so they are off; the report says everything at the end.
  TuneOptions quiet = opt;
  quiet.progress = false;
  std::mutex m;
  size_t next = 0;
  std::vector<std::thread> threads;
  for (int d : devices)
    threads.emplace_back([&, d] {
      for (;;) {
        size_t i;
        {
          std::lock_guard<std::mutex> lock(m);
          if (next == expressions.size()) return;
          i = next++;
          std::fprintf(stderr, "loom tune: device %d: %s\n", d, expressions[i].c_str());
        }
        outcomes[i] = tune_expression(expressions[i], d, quiet);
      }
    });
  for (auto& t : threads) t.join();
  return outcomes;
}

std::vector<std::string> read_suite(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the suite file '" + path + "'");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b != std::string::npos) out.push_back(line.substr(b, e - b + 1));
  }
  if (out.empty())
    throw Error("the suite file '" + path + "' holds no expression (one per line, '#' comments)");
  return out;
}

std::string format_tune_report(const std::vector<TuneOutcome>& outcomes) {
  std::ostringstream o;
  o << std::fixed;
  for (const TuneOutcome& r : outcomes) {
    o << "== " << r.expression << "  (device " << r.device
      << (r.device_name.empty() ? "" : ": " + r.device_name) << ")\n";
    if (!r.error.empty()) {
      o << "  not tuned: " << r.error << "\n";
      continue;
    }
    if (r.best_knobs.empty()) {  // a dry run: the ranking and the pruning
      o << "  " << r.candidates << " candidates, " << r.pruned << " pruned, "
        << std::setprecision(1) << r.seconds << " s (no GPU measured: cost-model ranking)\n"
        << "  space    " << r.enumerated << " knob sets enumerated, " << r.searched
        << " passed the rules; of the shipped defaults of the atoms searched, "
        << r.defaults_in_search << " of " << r.defaults_searchable << " are among them"
        << " (all are candidates)\n";
      for (size_t i = 0; i < r.ranked.size() && i < 12; ++i)
        o << "  " << std::setw(3) << i + 1 << ". " << std::setprecision(1) << std::setw(9)
          << r.ranked[i].second << " us (predicted)  " << r.ranked[i].first
          << (r.ranked[i].first == r.default_knobs ? "  [default]" : "") << "\n";
      std::vector<std::pair<int, std::string>> reasons;
      for (const auto& [why, kind] : r.pruned_by_reason) reasons.emplace_back(kind.count, why);
      std::sort(reasons.rbegin(), reasons.rend());
      for (size_t i = 0; i < reasons.size() && (i < 8 || r.show_pruned); ++i) {
        const TuneOutcome::PrunedKind& kind = r.pruned_by_reason.at(reasons[i].second);
        o << "  pruned " << std::setw(5) << reasons[i].first << "x  "
          << (r.show_pruned ? kind.example_reason : reasons[i].second) << "\n";
        if (r.show_pruned) o << "                 e.g. " << kind.example_knobs << "\n";
      }
      continue;
    }
    o << std::setprecision(1) << "  best     " << r.best_us << " us  " << std::setprecision(1)
      << r.flops / r.best_us * 1e-6 << " TFLOP/s  " << r.best_knobs << "\n"
      << "  timing   L2 " << (r.best_l2.empty() ? std::string("(not reported)") : r.best_l2)
      << (r.best_timed == "graph" ? ", CUDA-graph replay (a short launch)" : ", CUDA events")
      << " (as `loom run --bench` times; recorded with the winner)\n";
    const std::string paired =
        r.final_pairs > 0 ? " (medians of " + std::to_string(r.final_pairs) + " interleaved pairs)"
                          : "";
    if (!r.search_best_knobs.empty() && !r.default_note.empty())
      o << "  default  stands: the search's best failed when measured again (" << r.default_note
        << ")  " << r.search_best_knobs << "\n";
    else if (!r.search_best_knobs.empty())
      o << std::setprecision(1) << "  default  won: the search's best, " << r.search_best_us
        << " us, was no faster" << paired << "  " << r.search_best_knobs << "\n";
    else if (r.default_us)
      o << std::setprecision(1) << "  default  " << *r.default_us << " us  (tuned/default "
        << std::setprecision(3) << *r.default_us / r.best_us << "x" << paired << ")  "
        << r.default_knobs << "\n";
    else
      o << "  default  not measured (" << (r.default_note.empty() ? "not a candidate" : r.default_note)
        << "): " << r.default_knobs << "\n";
    if (r.confirm_us) {
      o << std::setprecision(1) << "  loom run " << *r.confirm_us << " us";
      if (r.cublas_us)
        o << "  cuBLAS " << *r.cublas_us << " us  (Loom/cuBLAS " << std::setprecision(3)
          << *r.cublas_us / *r.confirm_us << "x)";
      o << "\n";
    } else if (!r.confirm_note.empty()) {
      o << "  loom run " << r.confirm_note << "\n";
    }
    o << "  search   " << r.candidates << " candidates (" << r.pruned << " pruned), "
      << r.search.trials.size() << " trials, " << r.search.failures() << " failed, "
      << r.search.rounds << " rounds" << (r.search.cut_short ? " (cut short by the budget)" : "")
      << ", " << std::setprecision(1) << r.seconds << " s\n";
    int shown = 0;
    for (const Trial& t : r.search.trials) {
      if (t.result.status == TrialStatus::ok || shown == 5) continue;
      ++shown;
      o << "    failed: " << trial_status_name(t.result.status) << ": " << t.result.reason
        << "  [" << t.knobs << "]\n";
    }
    if (!r.recorded.empty()) o << "  database " << r.recorded << "\n";
  }
  return o.str();
}

}  // namespace loom::tune
