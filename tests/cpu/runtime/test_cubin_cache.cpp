#include "runtime/cubin_cache.h"
#include "runtime/ptxas_report.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include "runtime/nvrtc.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

CompileRequest request(int variant = 0) {
  CompileRequest req;
  req.headers = {{"twice.cuh", "__device__ inline int twice(int x) { return 2 * x; }\n"}};
  req.source = "#include \"twice.cuh\"\nextern \"C\" __global__ void k(int* p) { "
               "p[threadIdx.x] = twice(threadIdx.x) + " + std::to_string(variant) + "; }\n";
  return req;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write(const fs::path& p, const std::string& data) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << data;
}

size_t files_in(const fs::path& dir) {
  return size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

class CubinCacheTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "loom_cache_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(CubinCacheTest, MissThenHitReturnsTheSameResult) {
  CubinCache cache((root_ / "a" / "b").string());  // created on demand
  ASSERT_TRUE(cache.enabled());
  CompileResult first = compile(request(), &cache);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.cache_key, compile_cache_key(request()));
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.hits(), 0);
  EXPECT_TRUE(fs::exists(cache.entry_path(first.cache_key)));
  EXPECT_EQ(files_in(cache.dir()), 1u) << "no temp files may be left behind";

  CompileResult second = compile(request(), &cache);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.log, first.log);
  EXPECT_EQ(second.resources, first.resources);
  EXPECT_EQ(second.cache_key, first.cache_key);

  // A second cache object (another process, say) sees the entry too.
  CubinCache other(cache.dir());
  EXPECT_TRUE(compile(request(), &other).from_cache);

  CompileResult changed = compile(request(1), &cache);
  EXPECT_FALSE(changed.from_cache);
  EXPECT_NE(changed.cache_key, first.cache_key);
}

// ptxas's serialized-wgmma note is not a field of an entry: a hit derives it from the stored
// log, as the compile that stored it did, so a cached kernel keeps its warning (and the
// tuner its pruning).
TEST_F(CubinCacheTest, HitDerivesSerializedWgmmaFromTheLog) {
  CubinCache cache(root_.string());
  CompileResult r = compile(request(), &cache);
  ASSERT_TRUE(r.resources.count("k")) << r.log;
  EXPECT_TRUE(r.resources.at("k").wgmma_serialized.empty());
  r.log += "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are "
           "serialized due to insufficient register resources for the function 'k'\n";
  r.resources = parse_ptxas_report(r.log);
  ASSERT_EQ(r.resources.at("k").wgmma_serialized, "insufficient register resources");
  cache.store("serialized", r);
  std::optional<CompileResult> hit = cache.lookup("serialized");
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->resources, r.resources);
  EXPECT_EQ(hit->resources.at("k").wgmma_serialized, "insufficient register resources");
}

// Damages the entry of request() in place and checks that it is detected, warned about
// by name, removed and rebuilt into a valid entry.
void expect_detected_and_rebuilt(const fs::path& dir,
                                 const std::function<std::string(std::string)>& damage) {
  CubinCache cache(dir.string());
  CompileResult good = compile(request(),
                               &cache);
  std::string path = cache.entry_path(good.cache_key);
  write(path, damage(read(path)));

  testing::internal::CaptureStderr();
  CompileResult again = compile(request(),
                                &cache);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(again.from_cache);
  EXPECT_EQ(cache.corrupt(), 1);
  EXPECT_EQ(again.cubin, good.cubin);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("corrupt"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "one warning line: " << err;

  CompileResult third = compile(request(),
                                &cache);
  EXPECT_TRUE(third.from_cache) << "the entry must have been rebuilt";
  EXPECT_EQ(third.cubin, good.cubin);
}

TEST_F(CubinCacheTest, FlippedPayloadByteIsDetected) {
  expect_detected_and_rebuilt(root_, [](std::string b) {
    b[b.size() - 10] ^= 0x5a;  // inside the cubin
    return b;
  });
}

TEST_F(CubinCacheTest, FlippedMagicIsDetected) {
  expect_detected_and_rebuilt(root_, [](std::string b) {
    b[0] ^= 0xff;
    return b;
  });
}

TEST_F(CubinCacheTest, TruncatedEntryIsDetected) {
  expect_detected_and_rebuilt(root_, [](std::string b) { return b.substr(0, b.size() / 2); });
}

TEST_F(CubinCacheTest, EntryCutInsideItsHeaderIsDetected) {
  expect_detected_and_rebuilt(root_, [](std::string b) { return b.substr(0, 20); });
}

TEST_F(CubinCacheTest, EmptyEntryIsDetected) {
  expect_detected_and_rebuilt(root_, [](std::string) { return std::string(); });
}

TEST_F(CubinCacheTest, EntryStoredUnderAnotherKeyIsDetected) {
  CubinCache cache(root_.string());
  CompileResult other = compile(request(7), &cache);
  std::string stolen = read(cache.entry_path(other.cache_key));
  expect_detected_and_rebuilt(root_, [&](std::string) { return stolen; });
}

TEST_F(CubinCacheTest, ConcurrentStoresOfOneKeyLeaveAValidEntry) {
  CubinCache cache(root_.string());
  CompileResult r = compile(request(), nullptr);
  const std::string key = compile_cache_key(request());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) cache.store(key, r);
    });
  for (auto& t : threads) t.join();
  auto hit = cache.lookup(key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->cubin, r.cubin);
  EXPECT_EQ(hit->resources, r.resources);
  EXPECT_EQ(cache.corrupt(), 0);
  EXPECT_EQ(files_in(root_), 1u) << "every temp file must have been renamed";
}

TEST_F(CubinCacheTest, ConcurrentCompilesOfOneRequestAgree) {
  CubinCache cache(root_.string());
  std::vector<CompileResult> results(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] { results[t] = compile(request(), &cache); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r.cubin, results[0].cubin);
  CubinCache fresh(root_.string());
  auto hit = fresh.lookup(compile_cache_key(request()));
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->cubin, results[0].cubin);
  EXPECT_EQ(fresh.corrupt(), 0);
}

// Runs `f` with a deadline: a cache that blocks (opening a FIFO waits for a writer) or
// reads without end (/dev/zero) must fail this test, not hang the test binary.
template <class F>
void within_seconds(int seconds, F f) {
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << "the cubin cache did not return within " << seconds << " s";
    std::fflush(nullptr);
    std::_Exit(1);  // the stuck thread cannot be joined
  }
  done.get();
}

// An entry path that holds something Loom did not write (a directory, a FIFO, a symlink
// to a device or to a valid entry elsewhere): each compile is a miss that still works,
// the thing is warned about once, by path, and left exactly as it was, and no entry is
// written over it.
void expect_foreign_entry_left_alone(const fs::path& root,
                                     const std::function<void(const std::string&)>& make,
                                     const std::string& kind) {
  CubinCache cache((root / "cache").string());
  const std::string key = compile_cache_key(request());
  const std::string path = cache.entry_path(key);
  make(path);
  struct stat before {};
  ASSERT_EQ(::lstat(path.c_str(), &before), 0);
  CompileResult reference = compile(request(), nullptr);

  testing::internal::CaptureStderr();
  within_seconds(60, [&] {
    for (int i = 0; i < 3; ++i) {
      CompileResult r = compile(request(), &cache);
      EXPECT_FALSE(r.from_cache);
      EXPECT_EQ(r.cubin, reference.cubin);
    }
  });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find(kind), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "warned once: " << err;
  EXPECT_EQ(cache.hits(), 0);
  EXPECT_EQ(cache.corrupt(), 0) << "not corrupt: not Loom's";

  struct stat after {};
  ASSERT_EQ(::lstat(path.c_str(), &after), 0) << "the entry must not be removed";
  EXPECT_EQ(after.st_ino, before.st_ino) << "the entry must not be replaced";
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(files_in(cache.dir()), 1u) << "no temp file or second entry left behind";
}

TEST_F(CubinCacheTest, DirectoryAtAnEntryPathIsAMissLeftAlone) {
  expect_foreign_entry_left_alone(root_, [](const std::string& p) { fs::create_directory(p); },
                                  "a directory");
}

TEST_F(CubinCacheTest, FifoAtAnEntryPathIsAMissLeftAlone) {
  expect_foreign_entry_left_alone(
      root_, [](const std::string& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0644), 0); }, "a FIFO");
}

TEST_F(CubinCacheTest, SymlinkToDevZeroIsAMissLeftAlone) {
  expect_foreign_entry_left_alone(
      root_, [](const std::string& p) { fs::create_symlink("/dev/zero", p); },
      "a symbolic link");
}

TEST_F(CubinCacheTest, SymlinkToAValidEntryIsNotFollowed) {
  // Even a link to a good entry is not the cache's own file: writing through it would
  // modify whatever it points at.
  CubinCache elsewhere((root_ / "elsewhere").string());
  CompileResult good = compile(request(), &elsewhere);
  const std::string target = elsewhere.entry_path(good.cache_key);
  const std::string content = read(target);
  expect_foreign_entry_left_alone(
      root_, [&](const std::string& p) { fs::create_symlink(target, p); }, "a symbolic link");
  EXPECT_EQ(read(target), content) << "the link's target must be untouched";
}

TEST_F(CubinCacheTest, UncreatableDirectoryDisablesTheCacheWithAWarning) {
  write(root_ / "plain_file", "x");
  std::string dir = (root_ / "plain_file" / "cache").string();
  testing::internal::CaptureStderr();
  CubinCache cache(dir);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(cache.enabled());
  EXPECT_NE(err.find(dir), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  CompileResult a = compile(request(), &cache);
  CompileResult b = compile(request(), &cache);
  EXPECT_FALSE(b.from_cache);
  EXPECT_EQ(a.cubin, b.cubin);
}

TEST_F(CubinCacheTest, DefaultDirFollowsTheEnvironment) {
  auto saved = [](const char* n) {
    const char* v = getenv(n);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto loom = saved("LOOM_CACHE_DIR"), xdg = saved("XDG_CACHE_HOME"), home = saved("HOME");
  setenv("LOOM_CACHE_DIR", "/l", 1);
  setenv("XDG_CACHE_HOME", "/x", 1);
  setenv("HOME", "/h", 1);
  EXPECT_EQ(CubinCache::default_dir(), "/l");
  unsetenv("LOOM_CACHE_DIR");
  EXPECT_EQ(CubinCache::default_dir(), "/x/loom/cubin");
  setenv("XDG_CACHE_HOME", "", 1);
  EXPECT_EQ(CubinCache::default_dir(), "/h/.cache/loom/cubin");
  auto restore = [](const char* n, const std::optional<std::string>& v) {
    if (v) setenv(n, v->c_str(), 1); else unsetenv(n);
  };
  restore("LOOM_CACHE_DIR", loom);
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
}

}  // namespace
}  // namespace loom
