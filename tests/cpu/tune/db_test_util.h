// Helpers of the tuning-database tests: a scratch directory per test, whole-file I/O,
// and keys/records that differ where a test needs them to.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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

}  // namespace dbtest
