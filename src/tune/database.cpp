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

// nullopt for a missing file; throws for one that exists but cannot be read, so a
// read-modify-write never replaces a database it could not see.
std::optional<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    if (!fs::exists(path)) return std::nullopt;
    throw Error(sys_error("cannot read the tuning database", path) +
                " (fix its permissions, or point LOOM_TUNE_DB elsewhere)");
  }
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// An exclusive flock on `<path>.lock`, held for one read-modify-write. The lock lives on
// its own file because the database itself is replaced by rename on every change.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(sys_error("cannot create the tuning database lock", path));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) {
        ::close(fd_);
        throw Error(sys_error("cannot lock", path));
      }
  }
  ~FileLock() { ::close(fd_); }  // closing releases the flock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// Unique temp file in the database's directory (rename is atomic only within one file
// system), fsync'ed before the rename and the directory after it, so a crash leaves the
// old database or the new one, never a torn file.
void write_atomic(const std::string& path, const std::string& text) {
  std::string tmpl = path + ".tmp-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw Error(sys_error("cannot create a temporary file next to", path));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string msg = sys_error("cannot write", tmpl);
      ::close(fd);
      ::unlink(tmpl.c_str());
      throw Error(msg);
    }
    done += size_t(n);
  }
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0 || ::close(fd) != 0) {
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

std::string utc_stamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
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

// The database's records, reading under the caller's lock; a corrupt file is set aside.
std::vector<DbEntry> load_locked(const std::string& path) {
  auto text = read_text(path);
  if (!text) return {};
  ParsedDb p = parse_db(*text);
  // A file that cannot be moved aside must not be overwritten by the caller's write.
  if (!p.problems.empty() && set_aside_corrupt(path, p.problems).empty())
    throw Error("the tuning database " + path + " is corrupt and cannot be set aside: move it away");
  if (!p.problems.empty()) return {};
  return valid_entries(p);
}

}  // namespace

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

std::string set_aside_corrupt(const std::string& path, const std::vector<DbProblem>& problems) {
  std::string dest = path + ".corrupt-" + utc_stamp();
  for (int i = 2; fs::exists(dest); ++i) dest = path + ".corrupt-" + utc_stamp() + "-" + std::to_string(i);
  std::string what;
  for (size_t i = 0; i < problems.size() && i < 3; ++i)
    what += (i ? "; " : "") + (problems[i].line ? "line " + std::to_string(problems[i].line) + ": " : "") +
            problems[i].what;
  if (problems.size() > 3) what += "; and " + std::to_string(problems.size() - 3) + " more";
  if (::rename(path.c_str(), dest.c_str()) != 0) {
    std::cerr << "loom: warning: the tuning database " << path << " is corrupt (" << what
              << ") and could not be set aside as " << dest << " (" << std::strerror(errno)
              << "); its records are not used (move or delete the file)\n";
    return "";
  }
  std::cerr << "loom: warning: the tuning database " << path << " is corrupt (" << what
            << "); set aside as " << dest << "; continuing with an empty database (`loom db "
            << "import " << dest << "` takes back its intact records)\n";
  return dest;
}

TuningDb TuningDb::open(const std::string& path) {
  TuningDb db;
  db.path_ = path;
  db.reload();
  return db;
}

TuningDb TuningDb::open_default() {
  std::string why;
  auto path = default_db_path(&why);
  if (path) return open(*path);
  warn_once("tuning database disabled: " + why);
  return disabled(why);
}

TuningDb TuningDb::disabled(const std::string& why) {
  TuningDb db;
  db.disabled_why_ = why;
  return db;
}

void TuningDb::reload() {
  entries_.clear();
  if (!enabled()) return;
  // Readers take no lock (writers rename whole files into place); only a corrupt file
  // needs the lock, to set it aside without racing a writer that already replaced it.
  std::optional<std::string> text;
  try {
    text = read_text(path_);
  } catch (const Error& e) {
    std::cerr << "loom: warning: " << e.what() << "; using no tuning records\n";
    return;
  }
  if (!text) return;
  ParsedDb p = parse_db(*text);
  if (p.problems.empty()) {
    entries_ = valid_entries(p);
    return;
  }
  try {
    FileLock lock(path_ + ".lock");
    entries_ = load_locked(path_);
  } catch (const Error& e) {
    std::cerr << "loom: warning: the tuning database " << path_ << " does not verify and cannot "
              << "be set aside (" << e.what() << "); using no tuning records\n";
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
  std::string dir = fs::path(path_).parent_path().string();
  std::error_code ec;
  if (!dir.empty()) fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create " + dir + " for the tuning database: " + ec.message());
  FileLock lock(path_ + ".lock");
  std::vector<DbEntry> entries = load_locked(path_);
  change(entries);
  sort_entries(entries);
  write_atomic(path_, format_db(entries));
  entries_ = std::move(entries);
}

TuningDb::Outcome TuningDb::record(const TuningKey& key, const TuningRecord& rec, bool replace) {
  DbEntry e{key, rec};
  if (e.rec.date.empty()) e.rec.date = utc_now_iso();
  if (e.rec.revision.empty()) e.rec.revision = build_revision();
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
  auto text = read_text(file);
  if (!text) throw Error("cannot import " + file + ": no such file");
  ParsedDb p = parse_db(*text);
  ImportReport r;
  r.rejected = p.problems;
  std::vector<DbEntry> good;
  for (size_t i = 0; i < p.entries.size(); ++i) {
    // A record whose knobs this build does not know (a knob renamed or removed since)
    // would fail every compile that looked it up.
    try {
      Knobs::parse(p.entries[i].rec.knobs);
      good.push_back(p.entries[i]);
    } catch (const Error& e) {
      r.rejected.push_back({p.entry_lines[i], std::string("knobs: ") + e.what()});
    }
  }
  update([&](std::vector<DbEntry>& entries) {
    for (const DbEntry& e : good) {
      Outcome o = merge_into(entries, e, false);
      (o == Outcome::added ? r.added : o == Outcome::improved ? r.improved : r.kept)++;
    }
  });
  std::sort(r.rejected.begin(), r.rejected.end(),
            [](const DbProblem& a, const DbProblem& b) { return a.line < b.line; });
  return r;
}

void TuningDb::export_file(const std::string& file) const {
  std::ofstream f(file, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(sys_error("cannot write", file));
  f << format_db(entries_);
  if (!f.flush()) throw Error(sys_error("cannot write", file));
}

}  // namespace loom::tune
