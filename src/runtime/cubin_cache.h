// Content-addressed on-disk cache of compiled kernels: <dir>/<key>.cubin, where key is
// compile_cache_key() of the request. Compiling a GEMM kernel costs 100 ms to seconds;
// the tuner and repeated runs ask for the same kernels again and again.
//
// Entry file layout (little-endian):
//   "LOOMCUBN"  u32 format version  u64 payload length  32-byte SHA-256 of the payload
//   payload: key, log, resource reports, cubin (length-prefixed)
// Entries are written to a unique temp file in the same directory, fsynced and moved
// into place without replacing anything (renameat2 RENAME_NOREPLACE, else link), so
// readers never see a half-written entry and concurrent writers of one key both succeed.
// Only regular files of at most 64 MiB are read (opened O_NOFOLLOW | O_NONBLOCK, judged
// by fstat of the open descriptor): a directory, FIFO, device or symlink at an entry's
// path is a miss, warned about once, and never removed or replaced. A regular entry
// that fails to verify is warned about, removed and treated as a miss; a cache that
// cannot be created is disabled with a warning. The cache never turns a compile into an
// error.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "runtime/compile_result.h"

namespace loom {

class CubinCache {
 public:
  explicit CubinCache(std::string dir = default_dir());

  // $LOOM_CACHE_DIR, else $XDG_CACHE_HOME/loom/cubin, else $HOME/.cache/loom/cubin;
  // empty when none of them is set.
  static std::string default_dir();

  std::optional<CompileResult> lookup(const std::string& key);
  void store(const std::string& key, const CompileResult& result);

  std::string entry_path(const std::string& key) const;
  const std::string& dir() const { return dir_; }
  bool enabled() const { return enabled_; }

  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }
  int64_t corrupt() const { return corrupt_; }  // entries found broken and removed

 private:
  std::string dir_;
  bool enabled_ = false;
  std::atomic<int64_t> hits_{0}, misses_{0}, corrupt_{0};
};

}  // namespace loom
