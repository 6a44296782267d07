#include "tune/database.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "driver/warn_once.h"
#include "ir/error.h"
#include "passes/knobs.h"

namespace loom::tune {
namespace {

namespace fs = std::filesystem;

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

const char* kind_name(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

// No tuning database comes near this; a larger file is refused before it is read whole.
constexpr off_t kMaxDbBytes = off_t(256) << 20;

// The whole text of a regular file; nullopt when nothing exists at `path`. Opened without
// blocking (a FIFO swapped in would hang a read) and checked on the descriptor, so what
// is read is what was checked. Throws, naming the path and `hint`, for anything else.
std::optional<std::string> read_regular(const std::string& path, const std::string& hint) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw Error(sys_error("cannot read", path) + " (" + hint + ")");
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxDbBytes) {
    std::string msg = !S_ISREG(st.st_mode)
                          ? path + " is " + kind_name(st.st_mode) + ", not a tuning database file"
                          : path + " is " + std::to_string(st.st_size) +
                                " bytes, larger than any tuning database (256 MiB)";
    ::close(fd);
    throw Error(msg + ": Loom leaves it untouched (" + hint + ")");
  }
  std::string text;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string msg = sys_error("cannot read", path);
      ::close(fd);
      throw Error(msg + " (" + hint + ")");
    }
    if (n == 0) break;
    text.append(buf, size_t(n));
  }
  ::close(fd);
  return text;
}

const char* const kDbHint =
    "point LOOM_TUNE_DB (or `loom tune --db`) at a tuning database file, or at a path where "
    "none exists yet";

// What a database path names, read whole when Loom may use it.
struct DbRead {
  std::string file;      // the file to read and replace: the path, or the target of a link
  bool exists = false;
  std::string refusal;   // why Loom leaves the path alone; "" when it may use it
  ParsedDb parsed;       // the records and problems (empty for a missing or empty file)
  mode_t mode = 0644;    // the permissions a rewrite keeps
};

DbRead read_db(const std::string& path, const std::string& hint = kDbHint) {
  DbRead r;
  r.file = path;
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) r.refusal = sys_error("cannot look at the tuning database", path) + " (" + hint + ")";
    return r;
  }
  if (S_ISLNK(st.st_mode)) {
    // A link is followed to an existing file (a database kept in a dotfiles repository),
    // and that file is the one read and replaced: the link itself is left as it is.
    char* target = ::realpath(path.c_str(), nullptr);
    if (!target) {
      r.refusal = path + " is a symbolic link to nothing (" + std::strerror(errno) +
                  "): Loom does not create a database through a link and leaves it untouched (" + hint +
                  ", or create the file the link names)";
      return r;
    }
    r.file = target;
    std::free(target);
    if (::stat(r.file.c_str(), &st) != 0) {
      r.refusal = sys_error("cannot look at the tuning database", r.file) + " (" + hint + ")";
      return r;
    }
  }
  const std::string named = r.file == path ? path : path + " (a link to " + r.file + ")";
  if (!S_ISREG(st.st_mode)) {
    r.refusal = named + " is " + kind_name(st.st_mode) + ", not a tuning database file: Loom leaves it "
                "untouched (" + hint + (S_ISDIR(st.st_mode) ? ", e.g. " + path + "/tuning.db" : std::string()) + ")";
    return r;
  }
  r.mode = st.st_mode & 07777;
  std::optional<std::string> text;
  try {
    text = read_regular(r.file, hint);
  } catch (const Error& e) {
    r.refusal = e.what();
    return r;
  }
  if (!text) return r;  // removed since the lstat: a missing file
  r.exists = true;
  switch (classify_db_text(*text)) {
    case DbTextKind::empty:
      return r;
    case DbTextKind::loom:
      r.parsed = parse_db(*text);
      return r;
    case DbTextKind::other_version: {
      std::string first = text->substr(0, text->find('\n'));
      r.refusal = named + " starts with '" + quoted_text(first) + "', a tuning database format this build "
                  "does not read (it reads '" + std::string(kDbHeader) + "'; a newer Loom wrote it?): "
                  "Loom leaves it untouched (use the Loom that wrote it, or " + hint + ")";
      return r;
    }
    case DbTextKind::foreign:
      r.refusal = named + " is not a Loom tuning database (its first line is not '" + std::string(kDbHeader) +
                  "' and none of its lines is an intact tuning record): Loom leaves it untouched (" + hint + ")";
      return r;
  }
  return r;
}

// Opens Loom's own file next to the database (the lock, the side file): never through a
// link, never anything but a regular file.
int open_own_file(const std::string& path, int flags, const std::string& what) {
  int fd = ::open(path.c_str(), flags | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) {
    if (errno == ELOOP)
      throw Error(path + " is a symbolic link, not Loom's " + what + ": Loom leaves it untouched (remove it)");
    throw Error(sys_error("cannot open the " + what, path) + " (fix the directory's permissions, or point "
                "LOOM_TUNE_DB elsewhere)");
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + " is " + kind_name(st.st_mode) + ", not Loom's " + what +
                ": Loom leaves it untouched (remove it, or point LOOM_TUNE_DB elsewhere)");
  }
  return fd;
}

// An exclusive flock on `<file>.lock`, held for one read-modify-write. The lock lives on
// its own file because the database itself is replaced by rename on every change. The
// lock file is only ever created and locked, never written.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = open_own_file(path, O_RDONLY, "tuning database lock file");
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) {
        std::string msg = sys_error("cannot lock", path);
        ::close(fd_);
        throw Error(msg);
      }
  }
  ~FileLock() { ::close(fd_); }  // closing releases the flock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

void write_all(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(sys_error("cannot write", path));
    done += size_t(n);
  }
}

// Unique temp file in the database's directory (rename is atomic only within one file
// system), fsync'ed before the rename and the directory after it, so a crash leaves the
// old database or the new one, never a torn file. mkstemp creates a new file (O_EXCL), so
// nothing that was there is written to; the rename replaces only `path`, which the caller
// has checked (under the lock) is a tuning database or nothing.
void write_atomic(const std::string& path, const std::string& text, mode_t mode) {
  std::string tmpl = path + ".tmp-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw Error(sys_error("cannot create a temporary file next to", path));
  try {
    write_all(fd, text, tmpl);
  } catch (const Error&) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw;
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string msg = sys_error("cannot flush", tmpl);
    ::unlink(tmpl.c_str());
    throw Error(msg);
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    std::string msg = sys_error("cannot replace", path);
    ::unlink(tmpl.c_str());
    throw Error(msg);
  }
  std::string dir = fs::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// Appends the damaged lines among `problems` to `<file>.rejected`, each under a comment
// naming where it was and why, and fsyncs; throws when it cannot, so that the caller does
// not rewrite the database without them. Returns how many lines it kept.
size_t keep_rejected(const std::string& file, const std::vector<DbProblem>& problems) {
  const std::string side = file + ".rejected";
  std::string text;
  size_t kept = 0;
  const std::string now = utc_now_iso();
  for (const DbProblem& p : problems) {
    if (p.text.empty()) continue;
    text += "# " + file + ":" + std::to_string(p.line) + " (taken out " + now + "): " + p.what + "\n" + p.text + "\n";
    ++kept;
  }
  if (!kept) return 0;
  int fd = open_own_file(side, O_RDWR | O_APPEND, "side file for damaged database lines");
  try {
    struct stat st{};
    if (::fstat(fd, &st) != 0) throw Error(sys_error("cannot look at", side));
    if (st.st_size == 0) {
      text = std::string(kRejectedHeader) + " (see docs/tuning.md)\n" + text;
    } else {
      std::string head(kRejectedHeader.size(), '\0');
      if (::pread(fd, head.data(), head.size(), 0) != ssize_t(head.size()) || head != kRejectedHeader)
        throw Error(side + " exists and is not Loom's side file for damaged lines (its first line is not '" +
                    std::string(kRejectedHeader) + "'): Loom leaves it untouched (move it away)");
    }
    write_all(fd, text, side);
    if (::fsync(fd) != 0) throw Error(sys_error("cannot flush", side));
  } catch (const Error&) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return kept;
}

TuningDb::Outcome merge_into(std::vector<DbEntry>& entries, const DbEntry& e, bool replace) {
  for (DbEntry& old : entries) {
    if (!(old.key == e.key)) continue;
    if (replace) {
      old.rec = e.rec;
      return TuningDb::Outcome::replaced;
    }
    if (prefer_record(e.rec, old.rec)) {
      old.rec = e.rec;
      return TuningDb::Outcome::improved;
    }
    return TuningDb::Outcome::kept;
  }
  entries.push_back(e);
  return TuningDb::Outcome::added;
}

void sort_entries(std::vector<DbEntry>& entries) {
  std::sort(entries.begin(), entries.end(),
            [](const DbEntry& a, const DbEntry& b) { return a.key < b.key; });
}

// The records of a parsed, valid file; a duplicate key (only a hand edit makes one)
// keeps its faster record.
std::vector<DbEntry> valid_entries(const ParsedDb& p) {
  std::vector<DbEntry> out;
  for (const DbEntry& e : p.entries) merge_into(out, e, false);
  sort_entries(out);
  return out;
}

std::string plural(size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string damage_text(const std::string& file, const DbProblem& p) {
  return file + (p.line ? ":" + std::to_string(p.line) : std::string()) + ": " + p.what;
}

std::optional<std::string> default_db_path(std::string* why_not) {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (!env("LOOM_TUNE_DB").empty()) return env("LOOM_TUNE_DB");
  if (!env("XDG_DATA_HOME").empty()) return env("XDG_DATA_HOME") + "/loom/tuning.db";
  if (!env("HOME").empty()) return env("HOME") + "/.local/share/loom/tuning.db";
  if (why_not)
    *why_not = "none of LOOM_TUNE_DB, XDG_DATA_HOME and HOME is set (set LOOM_TUNE_DB=<file> "
               "to keep tuning results)";
  return std::nullopt;
}

TuningDb TuningDb::open(const std::string& path, bool warn) {
  TuningDb db;
  db.path_ = db.file_ = path;
  db.warn_ = warn;
  db.reload();
  return db;
}

TuningDb TuningDb::open_default(bool warn) {
  std::string why;
  auto path = default_db_path(&why);
  if (path) return open(*path, warn);
  if (warn) warn_once("tuning database disabled: " + why);
  return disabled(why);
}

TuningDb TuningDb::disabled(const std::string& why) {
  TuningDb db;
  db.disabled_why_ = why;
  return db;
}

void TuningDb::note_damage(const std::vector<DbProblem>& problems, const std::string& outcome) {
  damage_.insert(damage_.end(), problems.begin(), problems.end());
  damage_outcome_ = outcome;
  if (!warn_) return;
  constexpr size_t kShown = 10;  // every line is in the side file with its reason
  for (size_t i = 0; i < problems.size() && i < kShown; ++i)
    warn_once("tuning database " + damage_text(file_, problems[i]));
  if (problems.size() > kShown)
    warn_once("tuning database " + file_ + ": and " + std::to_string(problems.size() - kShown) + " more");
  warn_once("tuning database " + file_ + ": " + outcome);
}

void TuningDb::reload() {
  entries_.clear();
  refused_.clear();
  damage_.clear();
  damage_outcome_.clear();
  if (!enabled()) return;
  // Readers take no lock (writers rename whole files into place); only a damaged file
  // needs the lock, to repair it without racing a writer that already replaced it.
  DbRead r = read_db(path_);
  file_ = r.file;
  if (!r.refusal.empty()) {
    refused_ = r.refusal;
    if (warn_) warn_once(refused_ + "; no tuning records are used");
    return;
  }
  entries_ = valid_entries(r.parsed);
  if (r.parsed.problems.empty()) return;
  try {
    FileLock lock(r.file + ".lock");
    DbRead again = read_db(path_);
    file_ = again.file;
    if (!again.refusal.empty()) {
      entries_.clear();
      refused_ = again.refusal;
      if (warn_) warn_once(refused_ + "; no tuning records are used");
      return;
    }
    entries_ = valid_entries(again.parsed);
    if (again.parsed.problems.empty()) return;  // another process repaired it meanwhile
    size_t kept = keep_rejected(again.file, again.parsed.problems);
    write_atomic(again.file, format_db(entries_), again.mode);
    note_damage(again.parsed.problems,
                (kept ? plural(kept, "damaged line", "damaged lines") + " moved to " + rejected_path() + "; "
                      : std::string("rewrote it; ")) +
                    "the other " + plural(entries_.size(), "record is", "records are") + " in use");
  } catch (const Error& e) {
    note_damage(r.parsed.problems, std::string("the damaged lines could not be moved aside (") + e.what() +
                                       "); the file is left as it is and its " +
                                       plural(entries_.size(), "intact record is", "intact records are") + " used");
  }
}

size_t TuningDb::rejected_count() const {
  if (!enabled()) return 0;
  try {
    struct stat st{};
    if (::lstat(rejected_path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    auto text = read_regular(rejected_path(), "");
    if (!text || !text->starts_with(kRejectedHeader)) return 0;
    size_t n = 0;
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);)
      if (!line.starts_with("#")) ++n;
    return n;
  } catch (const Error&) {
    return 0;
  }
}

std::optional<TuningRecord> TuningDb::lookup(const TuningKey& key) const {
  for (const DbEntry& e : entries_)
    if (e.key == key) return e.rec;
  return std::nullopt;
}

template <typename Fn>
void TuningDb::update(Fn&& change) {
  if (!enabled()) throw Error("the tuning database is disabled: " + disabled_why_);
  DbRead first = read_db(path_);
  if (!first.refusal.empty()) throw Error(first.refusal);
  std::string dir = fs::path(first.file).parent_path().string();
  std::error_code ec;
  if (!dir.empty()) fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create " + dir + " for the tuning database: " + ec.message());
  FileLock lock(first.file + ".lock");
  // Under the lock: the file as it is now, checked again.
  DbRead r = read_db(path_);
  file_ = r.file;
  if (!r.refusal.empty()) throw Error(r.refusal);
  std::vector<DbEntry> entries = valid_entries(r.parsed);
  if (!r.parsed.problems.empty()) {
    // The rewrite below drops the damaged lines: they go to the side file first, and a
    // failure to keep them stops the change before anything is written.
    size_t kept = keep_rejected(r.file, r.parsed.problems);
    note_damage(r.parsed.problems, (kept ? plural(kept, "damaged line", "damaged lines") + " moved to " +
                                               rejected_path() + "; "
                                         : std::string()) +
                                       "the other records are kept");
  }
  change(entries);
  sort_entries(entries);
  for (const DbEntry& e : entries)
    if (std::string why = entry_problem(e); !why.empty())
      throw Error("not writing an implausible tuning record (" + why + ") for " + e.key.str());
  write_atomic(r.file, format_db(entries), r.mode);
  entries_ = std::move(entries);
}

TuningDb::Outcome TuningDb::record(const TuningKey& key, const TuningRecord& rec, bool replace) {
  DbEntry e{key, rec};
  if (e.rec.date.empty()) e.rec.date = utc_now_iso();
  if (e.rec.revision.empty()) e.rec.revision = build_revision();
  if (std::string why = entry_problem(e); !why.empty())
    throw Error("not recording an implausible tuning record (" + why + ") for " + quoted_text(key.str(), 300));
  Outcome out = Outcome::kept;
  update([&](std::vector<DbEntry>& entries) { out = merge_into(entries, e, replace); });
  return out;
}

size_t TuningDb::clear() {
  size_t n = 0;
  update([&](std::vector<DbEntry>& entries) {
    n = entries.size();
    entries.clear();
  });
  return n;
}

ImportReport TuningDb::import_file(const std::string& file) {
  auto text = read_regular(file, "import reads a database file written by `loom db export`");
  if (!text) throw Error("cannot import " + file + ": no such file");
  // A side file of damaged lines imports too: its comment lines are skipped, the lines
  // under them read as records (line numbers are the side file's own).
  std::vector<int> line_of;  // parsed line -> the file's line
  if (text->starts_with(kRejectedHeader)) {
    std::string records = std::string(kDbHeader) + "\n";
    line_of.push_back(1);
    std::istringstream in(*text);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (line.starts_with("#")) continue;
      records += line + "\n";
      line_of.push_back(n);
    }
    records += "end " + std::to_string(line_of.size() - 1) + "\n";
    *text = records;
  }
  auto original_line = [&](int line) {
    return line > 0 && size_t(line) <= line_of.size() ? line_of[size_t(line) - 1] : line;
  };
  ParsedDb p = parse_db(*text);
  ImportReport r;
  for (const DbProblem& pr : p.problems) r.rejected.push_back({original_line(pr.line), pr.what, ""});
  // A date past tomorrow (a clock or a hand gone wrong) would win every comparison
  // between timing methods (prefer_record) for ever.
  std::time_t tomorrow_t = std::time(nullptr) + 86400;
  std::tm tm{};
  gmtime_r(&tomorrow_t, &tm);
  char tomorrow[32];
  std::strftime(tomorrow, sizeof tomorrow, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::vector<DbEntry> good;
  for (size_t i = 0; i < p.entries.size(); ++i) {
    const int line = original_line(p.entry_lines[i]);
    if (p.entries[i].rec.date > tomorrow) {
      r.rejected.push_back({line, "date=" + p.entries[i].rec.date + " is in the future", ""});
      continue;
    }
    // A record whose knobs this build does not know (a knob renamed or removed since)
    // would fail every compile that looked it up.
    try {
      Knobs::parse(p.entries[i].rec.knobs);
      good.push_back(p.entries[i]);
    } catch (const Error& e) {
      r.rejected.push_back({line, std::string("knobs: ") + quoted_text(e.what(), 300), ""});
    }
  }
  update([&](std::vector<DbEntry>& entries) {
    for (const DbEntry& e : good) {
      Outcome o = merge_into(entries, e, false);
      (o == Outcome::added ? r.added : o == Outcome::improved ? r.improved : r.kept)++;
    }
  });
  std::stable_sort(r.rejected.begin(), r.rejected.end(),
                   [](const DbProblem& a, const DbProblem& b) { return a.line < b.line; });
  return r;
}

void TuningDb::export_file(const std::string& file) const {
  write_db_file(file, entries_, "export writes a new file or replaces a tuning database: name another file");
}

std::optional<ParsedDb> read_db_file(const std::string& path, const std::string& hint) {
  DbRead r = read_db(path, hint);
  if (!r.refusal.empty()) throw Error(r.refusal);
  if (!r.exists) return std::nullopt;
  return r.parsed;
}

void write_db_file(const std::string& path, const std::vector<DbEntry>& entries, const std::string& hint) {
  DbRead target = read_db(path, hint);
  if (!target.refusal.empty()) throw Error("not writing " + path + ": " + target.refusal);
  std::string dir = fs::path(target.file).parent_path().string();
  if (!dir.empty() && !fs::is_directory(dir)) throw Error("cannot write " + path + ": " + dir + " is not a directory");
  write_atomic(target.file, format_db(entries), target.exists ? target.mode : 0644);
}

}  // namespace loom::tune
