#include "runtime/cubin_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ir/error.h"
#include "runtime/ptxas_report.h"
#include "ir/warn_once.h"
#include "runtime/sha256.h"

namespace loom {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'C', 'U', 'B', 'N'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = sizeof kMagic + 4 + 8 + 32;

class Writer {
 public:
  void u32(uint32_t v) { uint(v, 4); }
  void u64(uint64_t v) { uint(v, 8); }
  void i64(int64_t v) { uint(uint64_t(v), 8); }
  void bytes(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  void str(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  std::string out;

 private:
  void uint(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(char(uint8_t(v >> (8 * i))));
  }
};

// Every read is bounds-checked; a failed read latches ok = false and yields zeros, so
// a parse of a damaged payload ends in "corrupt", never in a crash or a huge alloc.
class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), end_(p + n) {}
  uint32_t u32() { return uint32_t(uint(4)); }
  uint64_t u64() { return uint(8); }
  int64_t i64() { return int64_t(uint(8)); }
  std::string str() {
    uint64_t n = u64();
    if (!ok || n > uint64_t(end_ - p_)) return fail(), std::string();
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  bool done() const { return p_ == end_; }
  bool ok = true;

 private:
  uint64_t uint(int n) {
    if (!ok || end_ - p_ < n) return fail(), 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(uint8_t(p_[i])) << (8 * i);
    p_ += n;
    return v;
  }
  void fail() { ok = false; }
  const char* p_;
  const char* end_;
};

std::string serialize_payload(const std::string& key, const CompileResult& r) {
  Writer w;
  w.str(key);
  w.str(r.log);
  w.u32(uint32_t(r.resources.size()));
  for (const auto& [name, rep] : r.resources) {
    w.str(name);
    w.i64(rep.registers);
    w.i64(rep.shared_bytes);
    w.i64(rep.stack_frame_bytes);
    w.i64(rep.spill_store_bytes);
    w.i64(rep.spill_load_bytes);
    w.i64(rep.constant_bytes);
    w.i64(rep.barriers);
  }
  w.u64(r.cubin.size());
  w.bytes(r.cubin.data(), r.cubin.size());
  return std::move(w.out);
}

// Returns the reason the entry is unusable, or empty on success.
std::string parse_entry(const std::string& file, const std::string& key, CompileResult& r) {
  if (file.size() < kHeaderBytes) return "shorter than its header";
  if (std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) return "bad magic";
  Reader h(file.data() + sizeof kMagic, 12);
  uint32_t version = h.u32();
  uint64_t payload_len = h.u64();
  if (version != kFormatVersion)
    return "format version " + std::to_string(version) + ", expected " +
           std::to_string(kFormatVersion);
  if (payload_len != file.size() - kHeaderBytes)
    return "payload length " + std::to_string(payload_len) + " but " +
           std::to_string(file.size() - kHeaderBytes) + " bytes follow the header";
  const char* payload = file.data() + kHeaderBytes;
  auto sum = sha256(payload, payload_len);
  if (std::memcmp(sum.data(), file.data() + sizeof kMagic + 12, 32) != 0)
    return "checksum mismatch";

  Reader p(payload, payload_len);
  if (p.str() != key) return "entry belongs to another key";
  r.log = p.str();
  uint32_t n = p.u32();
  for (uint32_t i = 0; i < n && p.ok; ++i) {
    std::string name = p.str();
    ResourceReport rep;
    rep.registers = int(p.i64());
    rep.shared_bytes = p.i64();
    rep.stack_frame_bytes = p.i64();
    rep.spill_store_bytes = p.i64();
    rep.spill_load_bytes = p.i64();
    rep.constant_bytes = p.i64();
    rep.barriers = int(p.i64());
    r.resources[name] = rep;
  }
  // Not a field of the entry: derived from its log, as a fresh compile derives it.
  for (const auto& [name, why] : serialized_wgmma(r.log))
    if (auto it = r.resources.find(name); it != r.resources.end()) it->second.wgmma_serialized = why;
  std::string cubin = p.str();
  if (!p.ok || !p.done()) return "payload does not parse";
  if (cubin.empty()) return "empty cubin";
  r.cubin.assign(cubin.begin(), cubin.end());
  return "";
}

bool write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

// Keys name files, so they must not be able to reach outside the cache directory.
void check_key(const std::string& key) {
  bool ok = !key.empty();
  for (char c : key) ok &= std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  LOOM_CHECK(ok, "cubin cache key '" + key + "' is not a plain file name");
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

std::string CubinCache::default_dir() {
  if (auto d = env("LOOM_CACHE_DIR"); !d.empty()) return d;
  if (auto d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/loom/cubin";
  if (auto d = env("HOME"); !d.empty()) return d + "/.cache/loom/cubin";
  return "";
}

CubinCache::CubinCache(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) {
    std::fprintf(stderr,
                 "loom: warning: cubin cache disabled: set LOOM_CACHE_DIR (no "
                 "XDG_CACHE_HOME or HOME either)\n");
    return;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_)) {
    std::fprintf(stderr, "loom: warning: cubin cache disabled: cannot create %s (%s)\n",
                 dir_.c_str(), ec ? ec.message().c_str() : "not a directory");
    return;
  }
  enabled_ = true;
}

std::string CubinCache::entry_path(const std::string& key) const {
  check_key(key);
  return dir_ + "/" + key + ".cubin";
}

namespace {

// Loom's entries are a kernel's cubin and its log: well under a megabyte. A file this
// large is not one of them, and reading it (a symlink to /dev/zero, a runaway file)
// would take unbounded time and memory.
constexpr int64_t kMaxEntryBytes = int64_t(64) << 20;

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// An entry path that holds something Loom did not write: a miss, said once per path, and
// the thing is left as it is (the cache never removes or replaces what is not its own).
void warn_foreign(const std::string& path, const std::string& kind) {
  warn_once("cubin cache entry " + path + " is " + kind + ", not a regular file; Loom leaves "
            "it alone and compiles without caching this kernel (remove it to cache it again)");
}

// Reads at most `limit` + 1 bytes of fd, so a file that grows past its fstat size or
// past the limit is seen as such. Returns false on a read error.
bool read_bounded(int fd, int64_t limit, std::string& out) {
  out.clear();
  char buf[1 << 16];
  while (int64_t(out.size()) <= limit) {
    const size_t want = size_t(std::min<int64_t>(sizeof buf, limit + 1 - int64_t(out.size())));
    ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  return true;
}

// Moves the finished temp file `tmp` to `path` unless something is there already.
// Returns 0, EEXIST (tmp removed) or the error (tmp removed).
int place_entry(const std::string& tmp, const std::string& path) {
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) == 0) return 0;
  int err = errno;
  if (err == EINVAL || err == ENOSYS) {
    // File systems without RENAME_NOREPLACE: link() refuses an existing target too.
    err = ::link(tmp.c_str(), path.c_str()) == 0 ? 0 : errno;
    if (err != 0 && err != EEXIST) {
      // Neither (some FUSE and network file systems): rename over nothing or over a
      // regular file only, with the window between the check and the rename that such a
      // file system leaves.
      struct stat st {};
      if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        err = EEXIST;
      } else if (::rename(tmp.c_str(), path.c_str()) == 0) {
        return 0;
      } else {
        err = errno;
      }
    }
  }
  ::unlink(tmp.c_str());
  return err;
}

}  // namespace

std::optional<CompileResult> CubinCache::lookup(const std::string& key) {
  if (!enabled_) {
    ++misses_;
    return std::nullopt;
  }
  std::string path = entry_path(key);
  // O_NOFOLLOW: a symlink is not followed (ELOOP); O_NONBLOCK: opening a FIFO does not
  // wait for a writer. What was opened is then judged by fstat of the open descriptor,
  // so nothing can be swapped in between the check and the read.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    ++misses_;
    if (err == ELOOP) {
      warn_foreign(path, "a symbolic link");
    } else if (err != ENOENT) {
      warn_once("cannot read cubin cache entry " + path + " (" + std::strerror(err) +
                "); compiling without it");
    }
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const mode_t mode = st.st_mode;
    ::close(fd);
    ++misses_;
    warn_foreign(path, file_kind(mode));
    return std::nullopt;
  }
  std::string file;
  const bool read_ok = int64_t(st.st_size) <= kMaxEntryBytes && read_bounded(fd, kMaxEntryBytes, file);
  CompileResult r;
  std::string why = int64_t(st.st_size) > kMaxEntryBytes || int64_t(file.size()) > kMaxEntryBytes
                        ? "larger than " + std::to_string(kMaxEntryBytes) + " bytes"
                    : !read_ok ? "read error"
                               : parse_entry(file, key, r);
  if (!why.empty()) {
    ++corrupt_;
    ++misses_;
    // Remove the regular file that was judged, and only it: unlink (never rmdir) and
    // only while the path still names the same inode.
    struct stat now {};
    const bool same = ::lstat(path.c_str(), &now) == 0 && S_ISREG(now.st_mode) &&
                      now.st_dev == st.st_dev && now.st_ino == st.st_ino;
    if (same) ::unlink(path.c_str());
    ::close(fd);
    std::fprintf(stderr,
                 "loom: warning: cubin cache entry %s is corrupt (%s); %s, the kernel "
                 "is recompiled\n",
                 path.c_str(), why.c_str(), same ? "removed it" : "left it (it changed meanwhile)");
    return std::nullopt;
  }
  ::close(fd);
  ++hits_;
  r.from_cache = true;
  r.cache_key = key;
  return r;
}

void CubinCache::store(const std::string& key, const CompileResult& result) {
  if (!enabled_) return;
  std::string payload = serialize_payload(key, result);
  if (int64_t(kHeaderBytes + payload.size()) > kMaxEntryBytes) {
    warn_once("cubin cache: not caching kernel " + key + ": its entry would exceed " +
              std::to_string(kMaxEntryBytes) + " bytes");
    return;
  }
  Writer header;
  header.bytes(kMagic, sizeof kMagic);
  header.u32(kFormatVersion);
  header.u64(payload.size());
  auto sum = sha256(payload.data(), payload.size());
  header.bytes(sum.data(), sum.size());

  // mkstemp gives each writer (thread or process) its own temp file, then it is put in
  // place without replacing anything (renameat2's RENAME_NOREPLACE, else link()): an
  // entry already there is either a concurrent writer's (the same content: the key is
  // its hash) or something Loom must not touch.
  std::string tmp = dir_ + "/." + key + ".XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    std::fprintf(stderr, "loom: warning: cannot write cubin cache entry in %s (%s)\n",
                 dir_.c_str(), std::strerror(errno));
    return;
  }
  ::fchmod(fd, 0644);
  errno = 0;
  const bool written = write_all(fd, header.out) && write_all(fd, payload) && ::fsync(fd) == 0;
  int err = written ? 0 : errno ? errno : EIO;
  if (::close(fd) != 0 && err == 0) err = errno;
  const std::string path = entry_path(key);
  if (err == 0) err = place_entry(tmp, path);
  else ::unlink(tmp.c_str());
  if (err == 0) return;
  if (err == EEXIST) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) warn_foreign(path, file_kind(st.st_mode));
    return;
  }
  std::fprintf(stderr, "loom: warning: cannot write cubin cache entry %s (%s)\n", path.c_str(),
               std::strerror(err));
}

}  // namespace loom
