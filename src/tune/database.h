// The persistent tuning database: the best knobs found per (GPU, op, shape), so that
// `loom run`, `loom compile` and the library compile what the tuner found instead of the
// shape-class defaults.
//
// Safety, because several processes (two `loom tune` runs, a tune next to a run) share
// one file:
//  - every change is a read-modify-write under an exclusive flock on `<path>.lock`,
//    written to a unique temporary file in the same directory, fsync'ed, then renamed
//    over the database: readers (who take no lock) see the old file or the new one whole;
//  - a file that fails to parse or verify (format in db_file.h) is renamed to
//    `<path>.corrupt-<UTC timestamp>` with a warning on stderr naming both paths, and
//    Loom goes on with an empty database. Nothing is deleted: the good records of a
//    damaged file stay in the set-aside copy (`loom db import` takes them back).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tune/db_file.h"

namespace loom::tune {

// $LOOM_TUNE_DB, else $XDG_DATA_HOME/loom/tuning.db, else $HOME/.local/share/loom/tuning.db;
// nullopt (why in why_not) when none of them is set.
std::optional<std::string> default_db_path(std::string* why_not = nullptr);

struct ImportReport {
  int added = 0, improved = 0, kept = 0;  // kept: the database already had a faster record
  std::vector<DbProblem> rejected;        // lines of the imported file that were not taken
};

class TuningDb {
 public:
  // Reads `path` (a missing file is an empty database; its directory is made on the
  // first record()). A corrupt file is set aside as described above.
  static TuningDb open(const std::string& path);
  // open(default_db_path()); with no path, a disabled database and one warning on stderr
  // per process: no database is never an error.
  static TuningDb open_default();
  static TuningDb disabled(const std::string& why);

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  const std::string& disabled_reason() const { return disabled_why_; }

  // The records as read at open (or after this object's last change), sorted by key.
  const std::vector<DbEntry>& entries() const { return entries_; }
  std::optional<TuningRecord> lookup(const TuningKey& key) const;

  enum class Outcome { added, improved, replaced, kept };
  // Keeps the faster record per key (the new one when replace is set). An empty date
  // becomes now (UTC) and an empty revision this build's. Throws loom::Error when the
  // database is disabled or the file cannot be written.
  Outcome record(const TuningKey& key, const TuningRecord& rec, bool replace = false);
  size_t clear();  // removes every record; returns how many there were
  // Merges the records of a database file (export's output): each line is checked on its
  // own, the faster record per key wins, and rejected lines are reported.
  ImportReport import_file(const std::string& file);
  void export_file(const std::string& file) const;  // the records as read now, same format

  void reload();

 private:
  template <typename Fn> void update(Fn&& change);
  std::string path_, disabled_why_;
  std::vector<DbEntry> entries_;
};

// Writes the warning for a corrupt database file and renames it aside; returns where it
// went. Exposed for the tests and for `loom db`.
std::string set_aside_corrupt(const std::string& path, const std::vector<DbProblem>& problems);

}  // namespace loom::tune
