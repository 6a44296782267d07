#include "tune/tune_cli.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>

#include "driver/cli_args.h"
#include "driver/json_output.h"
#include "driver/run.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "tune/shipped.h"

namespace loom::tune {

const char* const kTuneUsage =
    "usage: loom tune -c EXPR [-c EXPR ...] | --suite FILE\n"
    "  --budget SECONDS   time per expression, space and compilation included (default 120)\n"
    "  --trials N         cap on measured trials per expression (default: none)\n"
    "  --devices 0,1,..   one worker per GPU; a suite's expressions are shared out\n"
    "  --dims M=..,N=..   values of symbolic dims\n"
    "  --candidates N     the search space's cap (default 48)\n"
    "  --atoms a,b        ATOM values to search (default: those that keep the dtype's\n"
    "                     arithmetic; f32 searches fma only, add mma_tf32 to allow tf32);\n"
    "                     attention: the kernel families wgmma, mma_sync (default: both)\n"
    "  --timeout SECONDS  per worker phase; past it a candidate is killed (default 20)\n"
    "  --db PATH          tuning database to record into (default: $LOOM_TUNE_DB, ...)\n"
    "  --no-record        do not write the database\n"
    "  --export-shipped F also merge each winner into the shipped defaults file F\n"
    "                     (tune/shipped/h100.db on an H100; commit it, rebuild to embed)\n"
    "  --l2 auto|rotate|read|flush|off  how trials keep the L2 cold (default auto: as\n"
    "                     `loom run --bench` times; the database records the method)\n"
    "  --no-confirm       skip the closing `loom run --bench` of the winner\n"
    "  --seed N           input data seed (default 1)\n"
    "  --dry-run          build, compile, prune and rank the space; measure nothing (no GPU\n"
    "                     needed) and print the ranking and the pruning reasons\n"
    "  --show-pruned      with --dry-run: every kind of pruning with one example's knobs\n"
    "  --gpu h100|h200    with --dry-run: the GPU to plan for (default: the one present, else h100)\n"
    "  --json             print one JSON document on stdout instead of the report\n"
    "                     (docs/cli.md, \"JSON output\"; docs/schema/tune.schema.json)\n";

namespace {

[[noreturn]] void tune_usage_error(const std::string& msg) {
  throw Error(msg + "\n" + kTuneUsage);
}

// Seconds for --budget and --timeout: positive, finite and at most 1e7 (115 days), so that
// `inf`, `1e999` (strtod's inf) or a NaN cannot make a search or a trial unbounded.
double parse_seconds(const std::string& flag, const std::string& text) {
  constexpr double kMaxSeconds = 1e7;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v) || v > kMaxSeconds)
    tune_usage_error(flag + " needs a positive number of seconds, finite and at most 1e7 (got '" +
                     text + "')");
  return v;
}

int64_t parse_int(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  try {
    return parse_int_option(flag, text, min, max);
  } catch (const Error& e) {
    tune_usage_error(e.what());
  }
}

// The ranges of the integer options (a GPU ordinal; counts a tuning run can finish).
constexpr int64_t kMaxCount = 1000000;
constexpr int64_t kMaxDevice = 1023;
constexpr int64_t kMaxSeed = std::numeric_limits<int64_t>::max();

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

Json optional_us(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json outcome_json(const TuneOutcome& o) {
  Json j = {{"expression", o.expression}, {"device", o.device}, {"device_name", o.device_name},
            {"ok", o.error.empty()}};
  if (!o.error.empty()) j["error"] = o.error;
  j["best_knobs"] = o.best_knobs;
  j["best_us"] = o.best_us > 0 ? Json(o.best_us) : Json(nullptr);
  j["best_l2"] = o.best_l2;
  j["best_timed"] = o.best_timed;
  j["default_knobs"] = o.default_knobs;
  j["default_us"] = optional_us(o.default_us);
  j["default_note"] = o.default_note;
  j["final_pairs"] = o.final_pairs;
  j["confirm_us"] = optional_us(o.confirm_us);
  j["reference_us"] = optional_us(o.cublas_us);
  j["confirm_note"] = o.confirm_note;
  j["flops"] = o.flops;
  j["candidates"] = o.candidates;
  j["pruned"] = o.pruned;
  j["enumerated"] = o.enumerated;
  j["searched"] = o.searched;
  j["trials"] = o.search.trials.size();
  j["seconds"] = o.seconds;
  Json ranked = Json::array();
  for (const auto& [knobs, us] : o.ranked) ranked.push_back({{"knobs", knobs}, {"predicted_us", us}});
  j["ranked"] = ranked;
  Json pruned = Json::object();
  for (const auto& [kind, p] : o.pruned_by_reason)
    pruned[kind] = {{"count", p.count}, {"example_reason", p.example_reason},
                    {"example_knobs", p.example_knobs}};
  j["pruned_by_reason"] = pruned;
  j["recorded"] = o.recorded;
  j["shipped"] = o.shipped;
  return j;
}

}  // namespace

TuneCommand parse_tune_args(const std::vector<std::string>& args) {
  TuneCommand c;
  std::string suite;
  OnceOptions once;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) tune_usage_error("option " + f + " needs a value");
      // -c names one expression of several; every other option takes one value.
      if (f != "-c" && f != "--expr" && f != "--code") once.see(f, f, args[i + 1]);
      return args[++i];
    };
    if (f == "-c" || f == "--expr" || f == "--code") c.expressions.push_back(value());
    else if (f == "--suite") suite = value();
    else if (f == "--budget") c.options.budget.seconds = parse_seconds(f, value());
    else if (f == "--trials") c.options.budget.max_trials = int(parse_int(f, value(), 1, kMaxCount));
    else if (f == "--candidates") c.options.max_candidates = int(parse_int(f, value(), 1, kMaxCount));
    else if (f == "--timeout") c.options.trial_timeout_s = parse_seconds(f, value());
    else if (f == "--seed") c.options.seed = uint64_t(parse_int(f, value(), 0, kMaxSeed));
    else if (f == "--db") c.options.db_path = value();
    else if (f == "--no-record") c.options.record = false;
    else if (f == "--export-shipped") c.options.export_shipped = value();
    else if (f == "--l2") c.options.l2 = parse_l2_request(value());
    else if (f == "--no-confirm") c.options.confirm = false;
    else if (f == "--dry-run") c.options.dry_run = true;
    else if (f == "--gpu") c.options.profile = value();
    else if (f == "--show-pruned") c.options.show_pruned = true;
    else if (f == "--json") c.json = true;
    else if (f == "--atoms") c.options.atoms = split_commas(value());
    else if (f == "--devices") {
      std::string text = value();
      c.devices.clear();
      for (const auto& d : split_commas(text)) c.devices.push_back(int(parse_int("--devices", d, 0, kMaxDevice)));
      if (c.devices.empty()) tune_usage_error("--devices needs GPU ordinals, e.g. --devices 0,1");
    } else if (f == "--dims") {
      c.options.sizes = parse_dims(value());
    } else {
      tune_usage_error("unknown option '" + f + "' for loom tune");
    }
  }
  if (!suite.empty())
    for (auto& e : read_suite(suite)) c.expressions.push_back(e);
  if (c.expressions.empty()) tune_usage_error("loom tune needs -c EXPR or --suite FILE");
  // A suite shares one --dims among its expressions, so a name counts when any of them
  // has it; one no expression has is a typo.
  std::set<std::string> symbols;
  for (const auto& e : c.expressions) {
    try {
      for (const auto& s : parse_expression(e).symbols()) symbols.insert(s);
    } catch (const Error&) {
      return c;  // the tuner reports that expression's error in its outcome
    }
  }
  for (const auto& [name, v] : c.options.sizes)
    if (!symbols.count(name)) {
      std::string list;
      for (const auto& s : symbols) list += (list.empty() ? "" : ", ") + s;
      tune_usage_error("--dims " + name + "=" + std::to_string(v) + ": no expression has a dimension " +
                       name + (symbols.empty() ? std::string("; their dimensions are all numbers")
                                               : "; their symbols are " + list));
    }
  return c;
}

int tune_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  for (const auto& a : args)
    if (a == "-h" || a == "--help") {
      out << kTuneUsage;
      return 0;
    }
  TuneCommand c = parse_tune_args(args);
  if (c.expressions.size() > 1)
    err << "loom tune: " << c.expressions.size() << " expressions, " << c.options.budget.seconds
        << " s each, on " << c.devices.size() << " device(s)\n";
  std::vector<TuneOutcome> outcomes = tune_suite(c.expressions, c.devices, c.options);
  bool all_ok = true;
  for (const auto& o : outcomes) all_ok = all_ok && o.error.empty();
  Json doc = json_document("tune", all_ok);
  doc["dry_run"] = c.options.dry_run;
  doc["outcomes"] = Json::array();
  for (const auto& o : outcomes) doc["outcomes"].push_back(outcome_json(o));
  doc["shipped_export"] = nullptr;
  if (!c.json) out << format_tune_report(outcomes);
  if (!c.options.export_shipped.empty() && !c.options.dry_run) {
    std::vector<ShippedUpdate> updates;
    // A default that won (default_won: the winner, or no slower re-measured) needs no
    // record, and an old one for its shape is removed.
    for (const auto& o : outcomes)
      if (o.error.empty() && o.entry) updates.push_back({*o.entry, default_won(o)});
    ShippedExport r = export_shipped(c.options.export_shipped, updates);
    doc["shipped_export"] = {{"file", c.options.export_shipped}, {"added", r.added},
                             {"replaced", r.replaced}, {"kept", r.kept}, {"removed", r.removed},
                             {"skipped", r.skipped}, {"lines", r.lines}};
    if (!c.json) out << "shipped defaults " << c.options.export_shipped << ": " << r.added << " added, "
        << r.replaced << " replaced, " << r.kept << " kept, " << r.removed << " removed, "
        << r.skipped << " not needed (the default won)\n";
    if (!c.json)
      for (const auto& line : r.lines) out << "  " << line << "\n";
  }
  if (c.json) out << json_text(doc);
  return all_ok ? 0 : 1;
}

}  // namespace loom::tune
