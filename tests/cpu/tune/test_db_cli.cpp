// `loom db` end to end on a scratch database, and what `loom compile -v` says about where
// its knobs came from (no GPU here: the database is not consulted, and it says so).
#include <gtest/gtest.h>

#include <sys/stat.h>

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
  EXPECT_TRUE(has(bad.out, "rejected " + dir + "/bad.db:2: no checksum field")) << bad.out;

  auto to_stdout = loom_cmd(env, "db export -");
  EXPECT_EQ(to_stdout.rc, 0) << to_stdout.out;
  EXPECT_EQ(parse_db(to_stdout.out).entries.size(), 2u) << to_stdout.out;
}

// `loom db` on a path that is not a tuning database: every command but `path` exits 1
// with a message naming the path, and nothing at or beside it changes. Before, list,
// show and export renamed it to `<path>.corrupt-<time>` and exited 0.
TEST(DbCli, RefusesWhatIsNotADatabaseAndLeavesItAlone) {
  std::string dir = dbtest::scratch_dir();
  std::filesystem::create_directories(dir + "/adir/sub");
  dbtest::spit(dir + "/adir/sub/f", "keep\n");
  ASSERT_EQ(::mkfifo((dir + "/afifo").c_str(), 0644), 0);
  dbtest::spit(dir + "/notes.txt", "my notes\nnot a database\n");
  dbtest::make_device(dir + "/null");  // stands for /dev/null
  std::filesystem::create_directory_symlink(dir + "/adir", dir + "/alink");
  std::string good = dir + "/../" + std::filesystem::path(dir).filename().string() + "-good.db";
  dbtest::spit(good, format_db({{dbtest::key(0), dbtest::rec(10)}}));
  const std::string before = dbtest::tree(dir);
  for (std::string target : {dir + "/adir", dir + "/afifo", dir + "/notes.txt", dir + "/alink",
                             dir + "/null"}) {
    for (std::string cmd : {std::string("db list"), std::string("db show 1"), "db export " + dir + "/adir/out.db",
                            std::string("db clear --yes"), "db import " + good}) {
      auto r = loom_cmd("LOOM_TUNE_DB=" + target + " timeout 20", cmd);  // a read of a FIFO blocks
      EXPECT_EQ(r.rc, 1) << target << ": " << cmd << ": " << r.out;
      EXPECT_TRUE(has(r.out, "loom: " + target)) << target << ": " << cmd << ": " << r.out;
      EXPECT_TRUE(has(r.out, "untouched")) << r.out;
    }
    auto path = loom_cmd("LOOM_TUNE_DB=" + target + " timeout 20", "db path");
    EXPECT_EQ(path.rc, 0) << path.out;
  }
  // `loom tune` says so before it probes a GPU or searches, not after the search.
  auto tune = loom_cmd("", "tune --db " + dir + "/adir -c 'matmul(A[64,64]:f32, B[64,64]:f32)'");
  EXPECT_EQ(tune.rc, 1) << tune.out;
  EXPECT_TRUE(has(tune.out, "cannot record into the tuning database: " + dir + "/adir is a directory")) << tune.out;
  EXPECT_EQ(dbtest::tree(dir), before);
  std::filesystem::remove(good);
}

// One flipped byte in one record: `list` shows the others, reports the damaged line
// (path:line: why) and where it went, and exits 2; the next `list` is clean (exit 0) and
// notes the side file. `export` of a damaged database says it is incomplete and exits 2.
// Before: the whole file was set aside, list said "0 records" and export wrote none, exit 0.
TEST(DbCli, ADamagedRecordCostsOnlyItselfAndIsReported) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string env = "LOOM_TUNE_DB=" + path;
  for (int i = 0; i < 3; ++i) TuningDb::open(path).record(dbtest::key(i), dbtest::rec(10 + i));
  std::string damaged = dbtest::slurp(path);
  damaged[damaged.find("M=128,") + 2] = '7';  // the record of key(1), line 2
  dbtest::spit(path, damaged);
  const std::string saved = damaged;

  auto list = loom_cmd(env, "db list");
  EXPECT_EQ(list.rc, 2) << list.out;
  EXPECT_TRUE(has(list.out, path + ": 2 records")) << list.out;
  EXPECT_TRUE(has(list.out, "M=64,N=4096")) << list.out;
  EXPECT_TRUE(has(list.out, "M=192,N=4096")) << list.out;
  EXPECT_TRUE(has(list.out, "damaged: " + path + ":2: checksum mismatch")) << list.out;
  EXPECT_TRUE(has(list.out, "moved to " + path + ".rejected")) << list.out;
  auto again = loom_cmd(env, "db list");
  EXPECT_EQ(again.rc, 0) << again.out;
  EXPECT_TRUE(has(again.out, path + ".rejected holds 1 damaged line")) << again.out;

  dbtest::spit(path, saved);
  auto exp = loom_cmd(env, "db export " + dir + "/out.db");
  EXPECT_EQ(exp.rc, 2) << exp.out;
  EXPECT_TRUE(has(exp.out, "exported 2 records")) << exp.out;
  EXPECT_TRUE(has(exp.out, "the export is incomplete")) << exp.out;
  EXPECT_EQ(parse_db(dbtest::slurp(dir + "/out.db")).entries.size(), 2u);

  dbtest::spit(path, saved);
  auto show = loom_cmd(env, "db show M=192");
  EXPECT_EQ(show.rc, 2) << show.out;
  EXPECT_TRUE(has(show.out, "shape:     M=192,N=4096,K=4096")) << show.out;
  EXPECT_TRUE(has(show.out, path + ":2: checksum mismatch")) << show.out;
}

// A database with CRLF line ends lists every record, exit 0 (before: none, set aside).
TEST(DbCli, CrlfDatabaseListsEveryRecord) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  for (int i = 0; i < 3; ++i) TuningDb::open(path).record(dbtest::key(i), dbtest::rec(10 + i));
  std::string crlf;
  for (char c : dbtest::slurp(path)) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  dbtest::spit(path, crlf);
  auto list = loom_cmd("LOOM_TUNE_DB=" + path, "db list");
  EXPECT_EQ(list.rc, 0) << list.out;
  EXPECT_TRUE(has(list.out, path + ": 3 records")) << list.out;
  EXPECT_FALSE(has(list.out, "damaged")) << list.out;
}

// `db import` of a file with nonsense lines: each is reported by file:line with why, the
// good line goes in, exit 2.
TEST(DbCli, ImportReportsEachNonsenseLineAndTakesTheGoodOnes) {
  std::string dir = dbtest::scratch_dir();
  auto with = [](size_t field, const std::string& value) {
    std::vector<std::string> f = dbtest::good_fields();
    f[field] = value;
    return dbtest::line_with_sum(dbtest::join_fields(f));
  };
  std::string text = std::string(kDbHeader) + "\n" + format_entry({dbtest::key(0), dbtest::rec(10)}) + "\n" +
                     with(7, "us=1e-300") + "\n" + with(7, "us=inf") + "\n" + with(4, "op=garbage") + "\n" +
                     with(0, "gpu=evil\x1b[2J") + "\n" + with(6, "knobs=NOT_A_KNOB=1") + "\nend 6\n";
  dbtest::spit(dir + "/in.db", text);
  auto r = loom_cmd("LOOM_TUNE_DB=" + dir + "/tuning.db", "db import " + dir + "/in.db");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(has(r.out, "1 added")) << r.out;
  EXPECT_TRUE(has(r.out, "5 rejected")) << r.out;
  for (int line = 3; line <= 7; ++line)
    EXPECT_TRUE(has(r.out, "rejected " + dir + "/in.db:" + std::to_string(line) + ": ")) << line << r.out;
  EXPECT_TRUE(has(r.out, "not a plausible kernel time")) << r.out;
  EXPECT_TRUE(has(r.out, "NOT_A_KNOB")) << r.out;
  EXPECT_FALSE(has(r.out, "\x1b")) << "an escape sequence reaches the terminal: " << r.out;
  EXPECT_EQ(TuningDb::open(dir + "/tuning.db").entries().size(), 1u);
  auto dir_import = loom_cmd("LOOM_TUNE_DB=" + dir + "/tuning.db", "db import " + dir);
  EXPECT_EQ(dir_import.rc, 1) << dir_import.out;
  EXPECT_TRUE(has(dir_import.out, dir + " is a directory")) << dir_import.out;
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
