// Helpers of the tuning-database tests: a scratch directory per test, whole-file I/O,
// and keys/records that differ where a test needs them to.
#pragma once
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/sha256.h"
#include "tune/database.h"

namespace dbtest {

inline std::string scratch_dir() {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "loom-db-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" +
                     std::to_string(::getpid());
  std::replace(name.begin(), name.end(), '/', '_');  // parameterized names hold slashes
  auto dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

inline loom::tune::TuningKey key(int n, const std::string& gpu = "NVIDIA H100 80GB HBM3") {
  loom::tune::TuningKey k;
  k.gpu = gpu;
  k.sm_count = 132;
  k.cuda_runtime = 13000;
  k.driver = 13000;
  k.op = "matmul(f32[M,K], f32[K,N]):f32";
  k.shape = "M=" + std::to_string(64 * (n + 1)) + ",N=4096,K=4096";
  return k;
}

inline loom::tune::TuningRecord rec(double us, const std::string& knobs = "BM=128,BN=128,BK=16") {
  loom::tune::TuningRecord r;
  r.knobs = knobs;
  r.median_us = us;
  r.cublas_us = 2.5 * us;
  r.trials = 17;
  r.date = "2026-11-22T05:47:48Z";
  r.revision = "ea7c7b5";
  r.note = "a note\twith a tab";
  return r;
}

// The files in `dir` whose names start with `prefix`.
inline std::vector<std::string> files_starting(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().starts_with(prefix)) out.push_back(e.path().string());
  return out;
}

// A character device at `path` for a test to point the database at: a null device node
// made there when root can (mknod), else a link to /dev/null. Never the system's
// /dev/null itself: code that renames what it cannot read (the defect these tests catch)
// run as root would move the machine's /dev/null aside.
inline void make_device(const std::string& path) {
  if (::geteuid() == 0 && ::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) return;
  std::filesystem::create_symlink("/dev/null", path);
}

// A database line from its fields (tab-joined, written as given: no escaping, no
// checks), with the checksum that makes it verify: how a forged or nonsense record
// that passes the checksum is written.
inline std::string line_with_sum(const std::string& body) {
  return body + "\tsum=" + loom::sha256_hex(body).substr(0, 16);
}

// The fields of a valid record, in order, as `name=value` strings a test can change.
inline std::vector<std::string> good_fields() {
  return {"gpu=NVIDIA H100 80GB HBM3", "sms=132", "cuda=13000", "driver=13000",
          "op=matmul(f32[M,K], f32[K,N]):f32", "shape=M=256,N=4096,K=4096", "knobs=BM=64,BN=64",
          "us=100", "cublas_us=90", "trials=5", "date=2026-11-22T05:47:48Z", "rev=ea7c7b5", "note="};
}

inline std::string join_fields(const std::vector<std::string>& f) {
  std::string s;
  for (size_t i = 0; i < f.size(); ++i) s += (i ? "\t" : "") + f[i];
  return s;
}

// Every name under `dir` with its type and contents (a directory listing that shows
// whether anything was created, renamed or changed).
inline std::string tree(const std::string& dir) {
  std::string out;
  std::vector<std::filesystem::path> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) names.push_back(e.path());
  std::sort(names.begin(), names.end());
  for (const auto& p : names) {
    auto st = std::filesystem::symlink_status(p);
    out += p.string() + " type=" + std::to_string(int(st.type()));
    if (st.type() == std::filesystem::file_type::regular) out += " text=" + slurp(p.string());
    out += "\n";
  }
  return out;
}

}  // namespace dbtest
