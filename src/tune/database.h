// The persistent tuning database: the best knobs found per (GPU, op, shape), so that
// `loom run`, `loom compile` and the library compile what the tuner found instead of the
// shape-class defaults.
//
// Safety, because several processes (two `loom tune` runs, a tune next to a run) share
// one file, and because the path comes from the environment:
//  - every change is a read-modify-write under an exclusive flock on `<path>.lock`,
//    written to a unique temporary file in the same directory, fsync'ed, then renamed
//    over the database: readers (who take no lock) see the old file or the new one whole;
//  - Loom reads, rewrites, locks or sets aside only a regular file it recognizes as a
//    tuning database (classify_db_text: its header, or a damaged header with intact
//    records), an empty file, or a path where nothing exists yet. A directory, device,
//    FIFO, socket, a link to one or to nothing, a database of another format version and
//    any other file are refused: left untouched, named in the message with what to do;
//    lookups go on without records (one warning), and changes throw loom::Error;
//  - a damaged line (format in db_file.h) costs that line alone: the other records stay
//    in use, and the damaged line is appended, with its line number and the reason, to
//    `<path>.rejected` (Loom's side file, recognized by its first line) before the
//    database is rewritten without it (under the lock, after a re-read shows the damage
//    is still there). When it cannot be kept there (a read-only directory, a foreign
//    file in the way) the database is left as it is and its intact records are used.
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
  // first record()). Damaged lines are moved aside, and a path that is not a tuning
  // database refused, as described above; `warn` prints both on stderr (once per process
  // per message); `loom db` passes false and reports them itself. Never throws.
  static TuningDb open(const std::string& path, bool warn = true);
  // open(default_db_path()); with no path, a disabled database and one warning on stderr
  // per process: no database is never an error.
  static TuningDb open_default(bool warn = true);
  static TuningDb disabled(const std::string& why);

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  const std::string& disabled_reason() const { return disabled_why_; }
  // Why the path is not a tuning database Loom may use ("" when it is): what it is, that
  // it was left untouched, and what to do. A refused database has no records, and
  // record(), clear() and import_file() throw this.
  const std::string& refused() const { return refused_; }
  // What the last read (open, reload, or a change's re-read under the lock) found damaged:
  // one problem per damaged line (its number, why) or file-level defect; damage_outcome()
  // says where the damaged lines went, or why the file was left as it was.
  const std::vector<DbProblem>& damage() const { return damage_; }
  const std::string& damage_outcome() const { return damage_outcome_; }
  // The file that holds the records (the path, or the file a symbolic link there names).
  const std::string& file() const { return file_; }
  // `<file>.rejected`, and how many damaged lines it holds (0 when there is none).
  std::string rejected_path() const { return file_ + ".rejected"; }
  size_t rejected_count() const;

  // The records as read at open (or after this object's last change), sorted by key.
  const std::vector<DbEntry>& entries() const { return entries_; }
  std::optional<TuningRecord> lookup(const TuningKey& key) const;

  enum class Outcome { added, improved, replaced, kept };
  // Keeps the faster record per key (the new one when replace is set). An empty date
  // becomes now (UTC) and an empty revision this build's. Throws loom::Error when the
  // database is disabled or the file cannot be written.
  Outcome record(const TuningKey& key, const TuningRecord& rec, bool replace = false);
  size_t clear();  // removes every record; returns how many there were
  // Merges the records of a database file (export's output, or a `.rejected` side file):
  // each line is checked on its own (every field, the knobs by this build's registry, a
  // date no later than tomorrow), the faster record per key wins, the good lines are
  // imported and each rejected line is reported. Throws for a file that is missing, not
  // a regular file, or when the database is refused.
  ImportReport import_file(const std::string& file);
  // The records as read now, same format, written whole (temporary file, rename) to a
  // new file or over a tuning database; any other existing file (a directory, a device,
  // someone's text) is refused with loom::Error and left untouched.
  void export_file(const std::string& file) const;

  void reload();

 private:
  template <typename Fn> void update(Fn&& change);
  void note_damage(const std::vector<DbProblem>& problems, const std::string& outcome);
  std::string path_, file_, disabled_why_, refused_, damage_outcome_;
  bool warn_ = true;
  std::vector<DbEntry> entries_;
  std::vector<DbProblem> damage_;
};

// A database file other than the user's database (the shipped defaults file `loom tune
// --export-shipped` merges into), by the same rules: nullopt when nothing is there, its
// parse when it is a tuning database (or empty); anything else throws, naming the path
// and `hint`, and is left untouched.
std::optional<ParsedDb> read_db_file(const std::string& path, const std::string& hint);
// Writes `entries` whole to such a file (a new temporary file renamed over it, keeping
// its permissions): only a new path or a tuning database; anything else throws as above.
void write_db_file(const std::string& path, const std::vector<DbEntry>& entries, const std::string& hint);

// "<file>:<line>: <why>" (or "<file>: <why>" for the file as a whole).
std::string damage_text(const std::string& file, const DbProblem& p);

}  // namespace loom::tune
