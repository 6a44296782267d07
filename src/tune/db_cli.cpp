#include "tune/db_cli.h"

#include <cstdlib>

#include "bench/report.h"
#include "driver/json_output.h"
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
    "  export FILE|-         write the records to FILE (the database's own format; a new\n"
    "                        file or a tuning database, never anything else) or stdout\n"
    "  import FILE           merge FILE's records (per key, the faster of two timed the\n"
    "                        same way wins; a record with its L2 method recorded wins over\n"
    "                        an older flushed one); every line is checked and each\n"
    "                        rejected line reported (exit 2; the good lines are imported)\n"
    "  path                  print the database's path\n"
    "  --json                with list, show, clear, export FILE, import, path: one JSON\n"
    "                        document on stdout (docs/schema/db.schema.json)\n"
    "Damaged lines found in the database are reported (path:line: why), moved to\n"
    "<db>.rejected, and the command exits 2 after doing its work on the other records.\n";

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

// Reports the damage the database's reads found from `from` on; returns whether there
// was any.
bool report_damage(const TuningDb& db, size_t& from, std::ostream& err) {
  if (db.damage().size() <= from) return from > 0;
  constexpr size_t kShown = 100;  // the side file holds every damaged line with its reason
  for (size_t i = from; i < db.damage().size() && i < from + kShown; ++i)
    err << "loom: damaged: " << damage_text(db.file(), db.damage()[i]) << "\n";
  if (db.damage().size() > from + kShown)
    err << "loom: damaged: and " << db.damage().size() - from - kShown << " more\n";
  err << "loom: " << db.file() << ": " << db.damage_outcome() << "\n";
  from = db.damage().size();
  return true;
}

Json record_json(const DbEntry& e) {
  const TuningKey& k = e.key;
  const TuningRecord& r = e.rec;
  return {{"key", k.str()},
          {"gpu", k.gpu},
          {"sm_count", k.sm_count},
          {"cuda_runtime", k.cuda_runtime},
          {"driver", k.driver},
          {"op", k.op},
          {"shape", k.shape},
          {"knobs", r.knobs},
          {"median_us", r.median_us},
          {"reference_us", r.cublas_us > 0 ? Json(r.cublas_us) : Json(nullptr)},
          {"ratio", r.cublas_us > 0 ? Json(r.cublas_us / r.median_us) : Json(nullptr)},
          {"trials", r.trials},
          {"l2", r.l2.empty() ? Json(nullptr) : Json(r.l2)},
          {"timed", r.timed.empty() ? Json(nullptr) : Json(r.timed)},
          {"date", r.date},
          {"revision", r.revision},
          {"note", r.note}};
}

Json records_json(const std::vector<DbEntry>& entries) {
  Json a = Json::array();
  for (const auto& e : entries) a.push_back(record_json(e));
  return a;
}

Json problems_json(const std::vector<DbProblem>& problems) {
  Json a = Json::array();
  for (const auto& p : problems) a.push_back({{"line", p.line}, {"what", p.what}});
  return a;
}

}  // namespace

int db_command(const std::vector<std::string>& words, std::ostream& out, std::ostream& err) {
  // --json may stand anywhere; the rest is parsed as without it.
  std::vector<std::string> args;
  bool json = false;
  for (const auto& w : words) {
    if (w == "--json") json = true;
    else args.push_back(w);
  }
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
  Json doc = json_document("db");
  doc["subcommand"] = cmd;
  if (cmd == "list" && args.size() == 2 && args[1] == "--shipped") {
    if (json) {
      Json files = Json::array();
      for (const ShippedDb& s : shipped_dbs())
        files.push_back({{"file", s.file},
                         {"records", records_json(s.parsed.entries)},
                         {"problems", problems_json(s.parsed.problems)}});
      doc["shipped"] = files;
      out << json_text(doc);
      return 0;
    }
    for (const ShippedDb& s : shipped_dbs()) {
      out << s.file << ": " << s.parsed.entries.size() << " records"
          << (s.parsed.problems.empty() ? "" : " (does not verify: " + problem_text(s.parsed.problems[0]) + ")")
          << "\n";
      if (!s.parsed.entries.empty()) out << listing(s.parsed.entries);
    }
    return 0;
  }
  TuningDb db = TuningDb::open_default(/*warn=*/false);
  if (!db.enabled()) throw Error("no tuning database: " + db.disabled_reason());
  if (cmd == "path") {
    if (args.size() != 1) usage("loom db path takes no operand");
    if (json) {
      doc["path"] = db.path();
      out << json_text(doc);
    } else {
      out << db.path() << "\n";
    }
    return 0;
  }
  if (!db.refused().empty()) throw Error(db.refused());
  size_t reported = 0;
  bool damaged = report_damage(db, reported, err);
  // Lines taken out earlier: not this command's failure, but worth a line.
  auto note_rejected = [&] {
    if (damaged) return;
    if (size_t n = db.rejected_count())
      err << "loom: note: " << db.rejected_path() << " holds " << n << " damaged line" << (n == 1 ? "" : "s")
          << " taken out of the database earlier (docs/tuning.md#damaged-lines)\n";
  };
  if (cmd == "list") {
    if (args.size() != 1) usage("loom db list takes only --shipped");
    if (json) {
      doc["path"] = db.path();
      doc["records"] = records_json(db.entries());
    } else {
      out << db.path() << ": " << db.entries().size() << " records"
          << (damaged ? " (and " + std::to_string(db.damage().size()) + " damaged lines or defects, reported on stderr)" : "")
          << "\n";
      if (!db.entries().empty()) out << listing(db.entries());
    }
    note_rejected();
  } else if (cmd == "show") {
    const DbEntry& e = pick(db.entries(), operand("a record number or a piece of its key"));
    doc["path"] = db.path();
    if (json) doc["record"] = record_json(e);
    else out << details(e);
    note_rejected();
  } else if (cmd == "clear") {
    if (args.size() != 2 || args[1] != "--yes")
      usage("loom db clear removes all " + std::to_string(db.entries().size()) + " records of " +
            db.path() + ": confirm with `loom db clear --yes` (`loom db export FILE` keeps a copy)");
    size_t n = db.clear();
    doc["path"] = db.path();
    doc["removed"] = n;
    if (!json) out << "removed " << n << " records from " << db.path() << "\n";
  } else if (cmd == "export") {
    const std::string& file = operand("a file to write (or - for stdout)");
    if (file == "-") {
      // The database's own format is the output: a JSON document cannot share stdout.
      if (json)
        usage("loom db export - writes the database's own format to stdout; with --json give "
              "a FILE (or use `loom db list --json` for the records as JSON)");
      out << format_db(db.entries());
    } else {
      db.export_file(file);
      doc["path"] = db.path();
      doc["file"] = file;
      doc["exported"] = db.entries().size();
      if (!json) out << "exported " << db.entries().size() << " records to " << file << "\n";
    }
    if (damaged)
      err << "loom: the export is incomplete: " << db.damage().size() << " damaged lines or defects of "
          << db.file() << " were left out (see above)\n";
    note_rejected();
  } else if (cmd == "import") {
    const std::string& file = operand("a file to read");
    ImportReport r = db.import_file(file);
    doc["path"] = db.path();
    doc["file"] = file;
    doc["added"] = r.added;
    doc["improved"] = r.improved;
    doc["kept"] = r.kept;
    doc["rejected"] = problems_json(r.rejected);
    if (!json) out << "imported from " << file << ": " << r.added << " added, " << r.improved
        << " faster than the record they replaced, " << r.kept
        << " kept out by a faster record; " << r.rejected.size() << " rejected\n";
    for (const DbProblem& p : r.rejected) err << "loom: rejected " << damage_text(file, p) << "\n";
    if (!r.rejected.empty()) damaged = true;
  } else {
    usage("unknown db command '" + cmd + "'");
  }
  // A change re-reads the file under the lock and may meet damage that appeared since.
  damaged = report_damage(db, reported, err) || damaged;
  if (json) {
    // The damage stderr reported, also in the document (exit status 2 as without --json).
    doc["damaged"] = problems_json(db.damage());
    doc["ok"] = !damaged;
    out << json_text(doc);
  }
  return damaged ? 2 : 0;
}

}  // namespace loom::tune
