#include "tune/db_cli.h"

#include <cstdlib>

#include "bench/report.h"
#include "ir/error.h"
#include "tune/database.h"
#include "tune/shipped.h"

namespace loom::tune {

const char* const kDbUsage =
    "usage: loom db <command>   (the database is $LOOM_TUNE_DB, else\n"
    "       $XDG_DATA_HOME/loom/tuning.db, else ~/.local/share/loom/tuning.db)\n"
    "  list [--shipped]      every record (--shipped: the defaults built into loom)\n"
    "  show INDEX|TEXT       one record in full: by its number in `list`, or by a piece of\n"
    "                        its key that matches exactly one record\n"
    "  clear --yes           remove every record\n"
    "  export FILE           write the records to FILE (the database's own format)\n"
    "  import FILE           merge FILE's records (per key, the faster of two timed the\n"
    "                        same way wins; a record with its L2 method recorded wins over\n"
    "                        an older flushed one); every line is checked and each\n"
    "                        rejected line reported\n"
    "  path                  print the database's path\n";

namespace {

[[noreturn]] void usage(const std::string& msg) { throw Error(msg + "\n" + kDbUsage); }

std::string vs_cublas(const TuningRecord& r) {
  return r.cublas_us > 0 ? format_ratio(r.cublas_us / r.median_us) : "-";
}

std::string listing(const std::vector<DbEntry>& entries) {
  TextTable t({{"#", Align::Right}, {"us", Align::Right}, {"vs cuBLAS", Align::Right},
               {"trials", Align::Right}, {"L2"}, {"date"}, {"key"}});
  for (size_t i = 0; i < entries.size(); ++i) {
    const TuningRecord& r = entries[i].rec;
    t.add_row({std::to_string(i + 1), format_us(r.median_us), vs_cublas(r), std::to_string(r.trials),
               (r.l2.empty() ? "flush*" : r.l2) + (r.timed == "graph" ? "+graph" : ""), r.date,
               entries[i].key.str()});
  }
  // An old record's method was not written down: every tune before 2026-11-22's small-launch work flushed.
  bool legacy = false;
  for (const auto& e : entries) legacy = legacy || e.rec.l2.empty();
  bool graph = false;
  for (const auto& e : entries) graph = graph || e.rec.timed == "graph";
  return t.str() + (legacy ? "flush*: timed before the L2 method was recorded (the write flush)\n" : "") +
         (graph ? "+graph: a short launch, timed by CUDA-graph replay\n" : "");
}

std::string details(const DbEntry& e) {
  const TuningKey& k = e.key;
  const TuningRecord& r = e.rec;
  return "gpu:       " + k.gpu + " (" + std::to_string(k.sm_count) + " SMs)\n" +
         "cuda:      runtime " + cuda_version_text(k.cuda_runtime) + ", driver " +
         cuda_version_text(k.driver) + "\n" + "op:        " + k.op + "\n" +
         "shape:     " + k.shape + "\n" + "knobs:     " + r.knobs + "\n" +
         "median:    " + format_us(r.median_us) + " us\n" +
         "cuBLAS:    " + (r.cublas_us > 0 ? format_us(r.cublas_us) + " us (Loom " + vs_cublas(r) + ")" : "unknown") + "\n" +
         "trials:    " + std::to_string(r.trials) + "\n" +
         "L2:        " + (r.l2.empty() ? "flush (not recorded: timed before the L2 method was recorded)" : r.l2) +
         "\n" + "timed:     " +
         (r.timed == "graph" ? "CUDA-graph replay per launch (a short launch)" : "CUDA events") +
         "\n" + "date:      " + r.date + "\n" +
         "revision:  " + (r.revision.empty() ? "unknown" : r.revision) + "\n" +
         (r.note.empty() ? "" : "note:      " + r.note + "\n");
}

const DbEntry& pick(const std::vector<DbEntry>& entries, const std::string& which) {
  char* end = nullptr;
  long n = std::strtol(which.c_str(), &end, 10);
  if (!which.empty() && *end == '\0') {
    if (n < 1 || size_t(n) > entries.size())
      throw Error("no record #" + which + ": the database has " + std::to_string(entries.size()) +
                  " (see `loom db list`)");
    return entries[size_t(n - 1)];
  }
  const DbEntry* found = nullptr;
  int matches = 0;
  for (const DbEntry& e : entries) {
    if (e.key.str() == which) return e;
    if (e.key.str().find(which) != std::string::npos) {
      found = &e;
      ++matches;
    }
  }
  if (matches == 1) return *found;
  throw Error(std::to_string(matches) + " records match '" + which +
              "': give the record's number from `loom db list`, or more of its key");
}

std::string problem_text(const DbProblem& p) {
  return (p.line ? "line " + std::to_string(p.line) + ": " : "file: ") + p.what;
}

}  // namespace

int db_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) usage("loom db needs a command");
  const std::string& cmd = args[0];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    out << kDbUsage;
    return 0;
  }
  auto operand = [&](const char* what) -> const std::string& {
    if (args.size() != 2) usage("loom db " + cmd + " needs " + what);
    return args[1];
  };
  if (cmd == "list" && args.size() == 2 && args[1] == "--shipped") {
    for (const ShippedDb& s : shipped_dbs()) {
      out << s.file << ": " << s.parsed.entries.size() << " records"
          << (s.parsed.problems.empty() ? "" : " (does not verify: " + problem_text(s.parsed.problems[0]) + ")")
          << "\n";
      if (!s.parsed.entries.empty()) out << listing(s.parsed.entries);
    }
    return 0;
  }
  TuningDb db = TuningDb::open_default();
  if (!db.enabled()) throw Error("no tuning database: " + db.disabled_reason());
  if (cmd == "path") {
    if (args.size() != 1) usage("loom db path takes no operand");
    out << db.path() << "\n";
  } else if (cmd == "list") {
    if (args.size() != 1) usage("loom db list takes only --shipped");
    out << db.path() << ": " << db.entries().size() << " records\n";
    if (!db.entries().empty()) out << listing(db.entries());
  } else if (cmd == "show") {
    out << details(pick(db.entries(), operand("a record number or a piece of its key")));
  } else if (cmd == "clear") {
    if (args.size() != 2 || args[1] != "--yes")
      usage("loom db clear removes all " + std::to_string(db.entries().size()) + " records of " +
            db.path() + ": confirm with `loom db clear --yes` (`loom db export FILE` keeps a copy)");
    size_t n = db.clear();
    out << "removed " << n << " records from " << db.path() << "\n";
  } else if (cmd == "export") {
    const std::string& file = operand("a file to write");
    db.export_file(file);
    out << "exported " << db.entries().size() << " records to " << file << "\n";
  } else if (cmd == "import") {
    const std::string& file = operand("a file to read");
    ImportReport r = db.import_file(file);
    out << "imported from " << file << ": " << r.added << " added, " << r.improved
        << " faster than the record they replaced, " << r.kept
        << " kept out by a faster record; " << r.rejected.size() << " rejected\n";
    for (const DbProblem& p : r.rejected) err << "  rejected " << problem_text(p) << "\n";
    return r.rejected.empty() ? 0 : 2;
  } else {
    usage("unknown db command '" + cmd + "'");
  }
  return 0;
}

}  // namespace loom::tune
