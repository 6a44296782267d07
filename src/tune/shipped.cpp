#include "tune/shipped.h"

#include <iostream>

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
                    (exact == best_exact && e.rec.median_us < best->rec.median_us);
      if (better) {
        best = ShippedHit{e.rec, db.file};
        best_exact = exact;
      }
    }
  }
  return best;
}

}  // namespace loom::tune
