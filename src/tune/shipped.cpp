#include "tune/shipped.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/error.h"
#include "tune/database.h"

namespace loom::tune {

const std::vector<ShippedDb>& shipped_dbs() {
  static const std::vector<ShippedDb> dbs = [] {
    std::vector<ShippedDb> out;
    for (const ShippedDbFile& f : shipped_db_files()) {
      out.push_back({std::string("tune/shipped/") + f.name, parse_db(f.text)});
      const auto& problems = out.back().parsed.problems;
      if (!problems.empty())
        std::cerr << "loom: warning: the shipped tuning database " << out.back().file
                  << " does not verify (" << (problems[0].line ? "line " + std::to_string(problems[0].line) + ": " : "")
                  << problems[0].what << "); its records are not used\n";
    }
    return out;
  }();
  return dbs;
}

std::optional<ShippedHit> lookup_shipped(const TuningKey& key, const std::vector<ShippedDb>& dbs) {
  std::optional<ShippedHit> best;
  bool best_exact = false;
  for (const ShippedDb& db : dbs) {
    if (!db.parsed.problems.empty()) continue;
    for (const DbEntry& e : db.parsed.entries) {
      if (!e.key.same_problem(key)) continue;
      bool exact = e.key == key;
      bool better = !best || (exact && !best_exact) ||
                    (exact == best_exact && prefer_record(e.rec, best->rec));
      if (better) {
        best = ShippedHit{e.rec, db.file};
        best_exact = exact;
      }
    }
  }
  return best;
}

ShippedExport export_shipped(const std::string& path, const std::vector<ShippedUpdate>& updates) {
  const std::string hint = "--export-shipped names a shipped defaults file, e.g. tune/shipped/h100.db";
  std::vector<DbEntry> entries;
  if (std::optional<ParsedDb> parsed = read_db_file(path, hint)) {
    if (!parsed->problems.empty())
      throw Error("the shipped defaults file " + path + " does not verify (" +
                  damage_text(path, parsed->problems[0]) + "): fix or restore it (git checkout) before exporting");
    entries = std::move(parsed->entries);
  }
  ShippedExport r;
  for (const ShippedUpdate& u : updates) {
    const std::string what = u.entry.key.op + " " + u.entry.key.shape + ": ";
    auto old = std::find_if(entries.begin(), entries.end(),
                            [&](const DbEntry& e) { return e.key.same_problem(u.entry.key); });
    if (u.default_won) {
      if (old != entries.end()) {
        entries.erase(old);
        ++r.removed;
        r.lines.push_back(what + "the default won; its old record removed");
      } else {
        ++r.skipped;
        r.lines.push_back(what + "the default won; no record needed");
      }
      continue;
    }
    if (old == entries.end()) {
      entries.push_back(u.entry);
      ++r.added;
      r.lines.push_back(what + "added");
    } else if (prefer_record(u.entry.rec, old->rec)) {
      *old = u.entry;
      ++r.replaced;
      r.lines.push_back(what + "replaced the older record");
    } else {
      ++r.kept;
      r.lines.push_back(what + "kept the shipped record (faster, timed the same way)");
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const DbEntry& a, const DbEntry& b) { return a.key < b.key; });
  write_db_file(path, entries, hint);
  return r;
}

}  // namespace loom::tune
