// `loom db` end to end on a scratch database, and what `loom compile -v` says about where
// its knobs came from (no GPU here: the database is not consulted, and it says so).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "db_test_util.h"

namespace {

using namespace loom::tune;

struct Result {
  int rc;
  std::string out;
};

Result loom_cmd(const std::string& env, const std::string& args) {
  std::string cmd = env + " " + std::string(LOOM_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(DbCli, ListShowExportClearImport) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string env = "LOOM_TUNE_DB=" + path;
  TuningDb db = TuningDb::open(path);
  db.record(dbtest::key(0), dbtest::rec(100, "BM=64,BN=64"));
  db.record(dbtest::key(1, "NVIDIA H200"), dbtest::rec(50, "BM=128,BN=128"));

  auto list = loom_cmd(env, "db list");
  EXPECT_EQ(list.rc, 0) << list.out;
  EXPECT_TRUE(has(list.out, path + ": 2 records")) << list.out;
  EXPECT_TRUE(has(list.out, "NVIDIA H200 (132 SMs, CUDA 13.0, driver 13.0) | matmul(f32[M,K], f32[K,N]):f32 | M=128,N=4096,K=4096"))
      << list.out;
  EXPECT_TRUE(has(list.out, "2.50x")) << list.out;

  auto show = loom_cmd(env, "db show H200");
  EXPECT_EQ(show.rc, 0) << show.out;
  EXPECT_TRUE(has(show.out, "knobs:     BM=128,BN=128")) << show.out;
  EXPECT_TRUE(has(show.out, "revision:  ea7c7b5")) << show.out;
  auto by_index = loom_cmd(env, "db show 1");
  EXPECT_TRUE(has(by_index.out, "NVIDIA H100")) << by_index.out;
  auto ambiguous = loom_cmd(env, "db show NVIDIA");
  EXPECT_EQ(ambiguous.rc, 1);
  EXPECT_TRUE(has(ambiguous.out, "2 records match 'NVIDIA'")) << ambiguous.out;

  auto exp = loom_cmd(env, "db export " + dir + "/saved.db");
  EXPECT_EQ(exp.rc, 0) << exp.out;
  auto refused = loom_cmd(env, "db clear");
  EXPECT_EQ(refused.rc, 1);
  EXPECT_TRUE(has(refused.out, "--yes")) << refused.out;
  EXPECT_EQ(TuningDb::open(path).entries().size(), 2u);
  auto cleared = loom_cmd(env, "db clear --yes");
  EXPECT_TRUE(has(cleared.out, "removed 2 records")) << cleared.out;
  EXPECT_TRUE(TuningDb::open(path).entries().empty());

  auto imp = loom_cmd(env, "db import " + dir + "/saved.db");
  EXPECT_EQ(imp.rc, 0) << imp.out;
  EXPECT_TRUE(has(imp.out, "2 added")) << imp.out;
  EXPECT_EQ(TuningDb::open(path).entries().size(), 2u);

  dbtest::spit(dir + "/bad.db", "loom-tuning-db v1\nnonsense\nend 1\n");
  auto bad = loom_cmd(env, "db import " + dir + "/bad.db");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_TRUE(has(bad.out, "rejected line 2: no checksum field")) << bad.out;
}

TEST(DbCli, NoDatabaseIsAClearMessage) {
  auto r = loom_cmd("env -u LOOM_TUNE_DB -u XDG_DATA_HOME -u HOME", "db list");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(has(r.out, "set LOOM_TUNE_DB")) << r.out;
  auto shipped = loom_cmd("", "db list --shipped");
  EXPECT_EQ(shipped.rc, 0) << shipped.out;
  EXPECT_TRUE(has(shipped.out, "tune/shipped/h100.db: ")) << shipped.out;
  // Every shipped file verifies (a hand edit that drops records must fix the end count).
  EXPECT_FALSE(has(shipped.out, "does not verify")) << shipped.out;
  auto unknown = loom_cmd("", "db frobnicate");
  EXPECT_EQ(unknown.rc, 1);
  EXPECT_TRUE(has(unknown.out, "unknown db command 'frobnicate'")) << unknown.out;
}

TEST(DbCli, CompileSaysWhereItsKnobsCameFrom) {
  std::string env = "LOOM_TUNE_DB=" + dbtest::scratch_dir() + "/tuning.db CUDA_VISIBLE_DEVICES=";
  auto r = loom_cmd(env, "compile -c 'matmul(A[64,32]:f32, B[32,48]:f32)' -v -o /dev/null");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(has(r.out, "knobs from: default: class medium (tuning database not consulted: no GPU"))
      << r.out;
  auto off = loom_cmd(env, "compile -c 'matmul(A[64,32]:f32, B[32,48]:f32)' --no-db --knobs BM=32 -v -o /dev/null");
  EXPECT_EQ(off.rc, 0) << off.out;
  EXPECT_TRUE(has(off.out, "knobs from: explicit over default: class medium (--no-db)")) << off.out;
}

}  // namespace
