// The tuning database: the file format round trip, the better-record rule, concurrent
// writers, corrupt files (set aside, never fatal), export and import.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db_test_util.h"
#include "ir/error.h"
#include "tune/database.h"

namespace {

using namespace loom::tune;
using dbtest::key;
using dbtest::rec;

TEST(DbFile, RoundTripsEveryField) {
  DbEntry e{key(0, "GPU with\ttab \\ and\nnewline"), rec(812.25)};
  ParsedDb p = parse_db(format_db({e, {key(1), rec(3.5e-3)}}));
  ASSERT_TRUE(p.problems.empty()) << p.problems[0].what;
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_EQ(p.entries[0].key, e.key);
  EXPECT_EQ(p.entries[0].rec.knobs, e.rec.knobs);
  EXPECT_EQ(p.entries[0].rec.median_us, 812.25);
  EXPECT_EQ(p.entries[0].rec.cublas_us, e.rec.cublas_us);
  EXPECT_EQ(p.entries[0].rec.trials, 17);
  EXPECT_EQ(p.entries[0].rec.date, e.rec.date);
  EXPECT_EQ(p.entries[0].rec.revision, "ea7c7b5");
  EXPECT_EQ(p.entries[0].rec.note, "a note\twith a tab");
  EXPECT_EQ(p.entries[1].rec.median_us, 3.5e-3);
  EXPECT_EQ(p.entry_lines, (std::vector<int>{2, 3}));
}

TEST(DbFile, EveryDefectIsAProblem) {
  std::string good = format_db({{key(0), rec(10)}, {key(1), rec(20)}});
  EXPECT_TRUE(parse_db(good).problems.empty());
  EXPECT_FALSE(parse_db("").problems.empty());
  EXPECT_FALSE(parse_db("loom-tuning-db v2\nend 0\n").problems.empty());
  EXPECT_FALSE(parse_db(good.substr(0, good.size() - 1)).problems.empty());  // no final newline
  // Cut at a line boundary: every remaining record verifies, the end line is missing.
  std::string cut = good.substr(0, good.rfind("end "));
  ParsedDb p = parse_db(cut);
  EXPECT_EQ(p.entries.size(), 2u);
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_NE(p.problems[0].what.find("end line"), std::string::npos);
  // A record dropped from the middle leaves the end line's count wrong.
  std::string dropped = good;
  size_t second = dropped.find('\n', dropped.find('\n') + 1) + 1;
  dropped.erase(dropped.find('\n') + 1, second - dropped.find('\n') - 1);
  EXPECT_FALSE(parse_db(dropped).problems.empty());
  // One flipped byte inside a record: that record's checksum fails, the other survives.
  std::string flipped = good;
  flipped[flipped.find("BM=128")] = 'X';
  p = parse_db(flipped);
  EXPECT_EQ(p.entries.size(), 1u);
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].line, 2);
  EXPECT_NE(p.problems[0].what.find("checksum"), std::string::npos);
}

TEST(TuningDb, RecordsAndLooksUpAcrossOpens) {
  std::string path = dbtest::scratch_dir() + "/sub/dir/tuning.db";  // directories made on demand
  TuningDb db = TuningDb::open(path);
  EXPECT_TRUE(db.entries().empty());
  EXPECT_EQ(db.record(key(0), rec(100)), TuningDb::Outcome::added);
  EXPECT_EQ(db.record(key(1), rec(50)), TuningDb::Outcome::added);
  TuningDb again = TuningDb::open(path);
  ASSERT_EQ(again.entries().size(), 2u);
  ASSERT_TRUE(again.lookup(key(0)));
  EXPECT_EQ(again.lookup(key(0))->median_us, 100);
  EXPECT_FALSE(again.lookup(key(2)));
  TuningKey other_driver = key(0);
  other_driver.driver = 12080;
  EXPECT_FALSE(again.lookup(other_driver)) << "the user database matches keys exactly";
  EXPECT_TRUE(parse_db(dbtest::slurp(path)).problems.empty());
  EXPECT_TRUE(dbtest::files_starting(std::filesystem::path(path).parent_path(), "tuning.db.tmp").empty())
      << "no temporary file is left behind";
}

TEST(TuningDb, FillsInTheDateAndRevision) {
  TuningDb db = TuningDb::open(dbtest::scratch_dir() + "/tuning.db");
  TuningRecord r = rec(10);
  r.date.clear();
  r.revision.clear();
  db.record(key(0), r);
  TuningRecord got = *TuningDb::open(db.path()).lookup(key(0));
  ASSERT_EQ(got.date.size(), std::string("2026-11-22T05:47:48Z").size()) << got.date;
  EXPECT_EQ(got.date[10], 'T');
  EXPECT_EQ(got.date.back(), 'Z');
  EXPECT_EQ(got.revision, build_revision());
}

TEST(TuningDb, KeepsTheFasterRecordUnlessToldToReplace) {
  TuningDb db = TuningDb::open(dbtest::scratch_dir() + "/tuning.db");
  db.record(key(0), rec(100, "BM=64"));
  EXPECT_EQ(db.record(key(0), rec(120, "BM=32")), TuningDb::Outcome::kept);
  EXPECT_EQ(db.lookup(key(0))->knobs, "BM=64");
  EXPECT_EQ(db.record(key(0), rec(90, "BM=128")), TuningDb::Outcome::improved);
  EXPECT_EQ(db.lookup(key(0))->knobs, "BM=128");
  EXPECT_EQ(db.record(key(0), rec(200, "BM=16"), /*replace=*/true), TuningDb::Outcome::replaced);
  EXPECT_EQ(TuningDb::open(db.path()).lookup(key(0))->knobs, "BM=16");
  EXPECT_EQ(db.entries().size(), 1u);
  EXPECT_EQ(db.clear(), 1u);
  EXPECT_TRUE(TuningDb::open(db.path()).entries().empty());
}

// Records since 2026-11-22 say how each time was taken (the L2 method). An old line (no `l2`)
// still reads, keeps its checksum through a rewrite, and stands for the write flush.
TEST(DbFile, TheL2MethodIsRecordedAndOldLinesStillRead) {
  TuningRecord now = rec(10);
  now.l2 = "rotate";
  const DbEntry old{key(0), rec(12)};
  const std::string text = format_db({old, {key(1), now}});
  EXPECT_EQ(format_entry(old).find("l2="), std::string::npos);
  EXPECT_NE(format_entry({key(1), now}).find("\tl2=rotate\tsum="), std::string::npos);
  ParsedDb p = parse_db(text);
  ASSERT_TRUE(p.problems.empty()) << p.problems[0].what;
  EXPECT_EQ(p.entries[0].rec.l2, "");
  EXPECT_EQ(timing_method(p.entries[0].rec), "flush");
  EXPECT_EQ(p.entries[1].rec.l2, "rotate");
  EXPECT_EQ(format_db(p.entries), text);
  // A method that is not one is a defect of its line.
  TuningRecord wrong = now;
  wrong.l2 = "sideways";
  EXPECT_FALSE(parse_db(format_db({{key(1), wrong}})).problems.empty());
}

// Records since 2026-11-23 say whether a time is a CUDA-graph replay (a short launch). Lines
// without `timed` (every earlier tune) read as event-timed and round-trip byte for byte;
// a graph time never competes on numbers with an event time of the same L2 method.
TEST(DbFile, TheReplayIsRecordedAndOldLinesReadAsEventTimed) {
  TuningRecord event = rec(11.81, "BM=128");
  event.l2 = "rotate";
  TuningRecord graph = rec(7.3, "BM=64");
  graph.l2 = "rotate";
  graph.timed = "graph";
  const std::string text = format_db({{key(0), event}, {key(1), graph}});
  EXPECT_EQ(format_entry({key(0), event}).find("timed="), std::string::npos);
  EXPECT_NE(format_entry({key(1), graph}).find("\tl2=rotate\ttimed=graph\tsum="),
            std::string::npos);
  ParsedDb p = parse_db(text);
  ASSERT_TRUE(p.problems.empty()) << p.problems[0].what;
  EXPECT_EQ(p.entries[0].rec.timed, "");
  EXPECT_EQ(timing_method(p.entries[0].rec), "rotate");
  EXPECT_EQ(p.entries[1].rec.timed, "graph");
  EXPECT_EQ(timing_method(p.entries[1].rec), "rotate, graph replay");
  EXPECT_EQ(format_db(p.entries), text);
  TuningRecord wrong = graph;
  wrong.timed = "sundial";
  EXPECT_FALSE(parse_db(format_db({{key(1), wrong}})).problems.empty());
  // Different methods: the newer record wins, whatever the numbers.
  graph.date = "2026-11-23T01:00:00Z";
  event.date = "2026-11-22T01:00:00Z";
  EXPECT_TRUE(prefer_record(graph, event));
  EXPECT_FALSE(prefer_record(event, graph));
  TuningRecord faster = graph;
  faster.median_us = 7.1;
  faster.date = event.date;
  EXPECT_TRUE(prefer_record(faster, graph));  // same method: by time
  EXPECT_FALSE(prefer_record(graph, faster));
}

// Times compare only when taken the same way: a record timed as the benchmark now times
// replaces an older flushed one whatever the numbers, never the other way round.
TEST(TuningDb, ARecordTimedTheBenchmarksWayReplacesAFlushedOne) {
  TuningDb db = TuningDb::open(dbtest::scratch_dir() + "/tuning.db");
  db.record(key(0), rec(100, "BM=64"));  // an old record: no method
  TuningRecord rotated = rec(110, "BM=128");
  rotated.l2 = "rotate";
  EXPECT_EQ(db.record(key(0), rotated), TuningDb::Outcome::improved);
  EXPECT_EQ(db.lookup(key(0))->knobs, "BM=128");
  EXPECT_EQ(db.record(key(0), rec(50, "BM=16")), TuningDb::Outcome::kept);
  EXPECT_EQ(db.lookup(key(0))->knobs, "BM=128");
  TuningRecord faster = rotated;
  faster.median_us = 105;
  faster.knobs = "BM=256";
  EXPECT_EQ(db.record(key(0), faster), TuningDb::Outcome::improved);
  TuningRecord slower = faster;
  slower.median_us = 106;
  slower.knobs = "BM=32";
  EXPECT_EQ(db.record(key(0), slower), TuningDb::Outcome::kept);
  EXPECT_EQ(TuningDb::open(db.path()).lookup(key(0))->l2, "rotate");
}

// 8 processes record 50 keys each at the same time: every read-modify-write must see
// the others' records (flock), and the file must verify at every moment (rename).
TEST(TuningDb, ConcurrentWritersLoseNothing) {
  std::string path = dbtest::scratch_dir() + "/tuning.db";
  constexpr int kProcs = 8, kKeys = 50;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        TuningDb db = TuningDb::open(path);
        for (int i = 0; i < kKeys; ++i) {
          db.record(key(p * kKeys + i), rec(1 + i));
          // A reader between writes sees a whole file.
          if (!parse_db(dbtest::slurp(path)).problems.empty()) rc = 3;
        }
      } catch (...) {
        rc = 4;
      }
      _exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  ParsedDb p = parse_db(dbtest::slurp(path));
  EXPECT_TRUE(p.problems.empty());
  EXPECT_EQ(p.entries.size(), size_t(kProcs * kKeys));
  TuningDb db = TuningDb::open(path);
  for (int i = 0; i < kProcs * kKeys; ++i) EXPECT_TRUE(db.lookup(key(i))) << i;
}

struct Corruption {
  const char* name;
  std::string (*damage)(const std::string& good);
};

class CorruptDb : public testing::TestWithParam<Corruption> {};

TEST_P(CorruptDb, IsSetAsideWithAWarningAndTheNextRecordWorks) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string other = dir + "/other.db";
  TuningDb::open(path).record(key(0), rec(10));
  TuningDb::open(path).record(key(1), rec(20));
  TuningDb::open(other).record(key(7), rec(70));
  std::string damaged = GetParam().damage(dbtest::slurp(path));
  dbtest::spit(path, damaged);

  testing::internal::CaptureStderr();
  TuningDb db = TuningDb::open(path);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(db.entries().empty());
  auto aside = dbtest::files_starting(dir, "tuning.db.corrupt-");
  ASSERT_EQ(aside.size(), 1u) << err;
  EXPECT_NE(err.find(path + " is corrupt"), std::string::npos) << err;
  EXPECT_NE(err.find("set aside as " + aside[0]), std::string::npos) << err;
  EXPECT_EQ(dbtest::slurp(aside[0]), damaged) << "the damaged file is kept as it was";
  EXPECT_FALSE(std::filesystem::exists(path));

  EXPECT_EQ(db.record(key(2), rec(30)), TuningDb::Outcome::added);
  TuningDb fresh = TuningDb::open(path);
  EXPECT_EQ(fresh.entries().size(), 1u);
  EXPECT_TRUE(parse_db(dbtest::slurp(path)).problems.empty());
  EXPECT_TRUE(TuningDb::open(other).lookup(key(7))) << "another database is untouched";
}

INSTANTIATE_TEST_SUITE_P(
    Damage, CorruptDb,
    testing::Values(Corruption{"garbage", [](const std::string&) { return std::string("\x01\x02 not a db\n"); }},
                    Corruption{"truncated", [](const std::string& g) { return g.substr(0, g.size() / 2); }},
                    Corruption{"flipped_byte",
                               [](const std::string& g) {
                                 std::string d = g;
                                 d[d.find("BM=128")] ^= 0x20;
                                 return d;
                               }},
                    Corruption{"bad_header", [](const std::string& g) { return "x" + g; }},
                    Corruption{"empty", [](const std::string&) { return std::string(); }}),
    [](const testing::TestParamInfo<Corruption>& i) { return std::string(i.param.name); });

TEST(TuningDb, CorruptionFoundByARecordIsSetAsideToo) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  TuningDb db = TuningDb::open(path);  // opened while the file was fine (absent)
  dbtest::spit(path, "garbage\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(db.record(key(0), rec(5)), TuningDb::Outcome::added);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("set aside"), std::string::npos) << err;
  EXPECT_EQ(dbtest::files_starting(dir, "tuning.db.corrupt-").size(), 1u);
  EXPECT_EQ(TuningDb::open(path).entries().size(), 1u);
}

TEST(TuningDb, ACorruptFileThatCannotBeSetAsideIsNeverOverwritten) {
  if (::geteuid() == 0) GTEST_SKIP() << "root renames in a read-only directory";
  std::string dir = dbtest::scratch_dir() + "/ro";
  std::filesystem::create_directories(dir);
  std::string path = dir + "/tuning.db";
  TuningDb db = TuningDb::open(path);
  db.record(key(0), rec(5));  // the lock file exists from here on
  dbtest::spit(path, "garbage\n");
  std::filesystem::permissions(dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  testing::internal::CaptureStderr();
  EXPECT_THROW(db.record(key(1), rec(5)), loom::Error);
  EXPECT_TRUE(TuningDb::open(path).entries().empty());
  std::string err = testing::internal::GetCapturedStderr();
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  EXPECT_EQ(dbtest::slurp(path), "garbage\n");
  EXPECT_NE(err.find("could not be set aside"), std::string::npos) << err;
}

TEST(TuningDb, ExportThenImportMergesByTheFasterRecord) {
  std::string dir = dbtest::scratch_dir();
  TuningDb a = TuningDb::open(dir + "/a.db");
  a.record(key(0), rec(100, "BM=64"));
  a.record(key(1), rec(10, "BM=32"));
  a.record(key(2), rec(5, "BM=16"));
  a.export_file(dir + "/export.db");
  EXPECT_TRUE(parse_db(dbtest::slurp(dir + "/export.db")).problems.empty());

  TuningDb b = TuningDb::open(dir + "/b.db");
  b.record(key(0), rec(200, "BM=128"));  // slower: the import replaces it
  b.record(key(1), rec(1, "BM=128"));    // faster: the import keeps it
  ImportReport r = b.import_file(dir + "/export.db");
  EXPECT_EQ(r.added, 1);
  EXPECT_EQ(r.improved, 1);
  EXPECT_EQ(r.kept, 1);
  EXPECT_TRUE(r.rejected.empty());
  TuningDb b2 = TuningDb::open(dir + "/b.db");
  EXPECT_EQ(b2.lookup(key(0))->knobs, "BM=64");
  EXPECT_EQ(b2.lookup(key(1))->knobs, "BM=128");
  EXPECT_EQ(b2.lookup(key(2))->knobs, "BM=16");
}

TEST(TuningDb, ImportTakesTheIntactLinesAndReportsEachReject) {
  std::string dir = dbtest::scratch_dir();
  std::string text = format_db({{key(0), rec(10)}, {key(1), rec(20)}, {key(2), rec(30, "NOT_A_KNOB=1")}});
  text[text.find("BM=128", text.find('\n', text.find('\n') + 1))] = 'Q';  // damage line 3
  dbtest::spit(dir + "/in.db", text);
  TuningDb db = TuningDb::open(dir + "/tuning.db");
  ImportReport r = db.import_file(dir + "/in.db");
  EXPECT_EQ(r.added, 1);
  ASSERT_EQ(r.rejected.size(), 2u);
  EXPECT_EQ(r.rejected[0].line, 3);
  EXPECT_NE(r.rejected[0].what.find("checksum"), std::string::npos);
  EXPECT_EQ(r.rejected[1].line, 4);
  EXPECT_NE(r.rejected[1].what.find("NOT_A_KNOB"), std::string::npos) << r.rejected[1].what;
  EXPECT_TRUE(db.lookup(key(0)));
  EXPECT_FALSE(db.lookup(key(2)));
  EXPECT_THROW(db.import_file(dir + "/missing.db"), loom::Error);
}

TEST(TuningDb, SetAsideFileCanBeImportedBack) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  TuningDb::open(path).record(key(0), rec(10));
  TuningDb::open(path).record(key(1), rec(20));
  std::string good = dbtest::slurp(path);
  dbtest::spit(path, good.substr(0, good.rfind("end ")));  // the end line lost
  testing::internal::CaptureStderr();
  TuningDb db = TuningDb::open(path);
  testing::internal::GetCapturedStderr();
  auto aside = dbtest::files_starting(dir, "tuning.db.corrupt-");
  ASSERT_EQ(aside.size(), 1u);
  ImportReport r = db.import_file(aside[0]);
  EXPECT_EQ(r.added, 2);
  EXPECT_EQ(r.rejected.size(), 1u);  // the missing end line, reported
}

TEST(TuningDb, DefaultPathFollowsTheEnvironment) {
  const char* saved_home = std::getenv("HOME");
  std::string home = saved_home ? saved_home : "";
  setenv("LOOM_TUNE_DB", "/x/custom.db", 1);
  setenv("XDG_DATA_HOME", "/x/data", 1);
  setenv("HOME", "/x/home", 1);
  EXPECT_EQ(default_db_path(), "/x/custom.db");
  unsetenv("LOOM_TUNE_DB");
  EXPECT_EQ(default_db_path(), "/x/data/loom/tuning.db");
  unsetenv("XDG_DATA_HOME");
  EXPECT_EQ(default_db_path(), "/x/home/.local/share/loom/tuning.db");
  unsetenv("HOME");
  std::string why;
  EXPECT_FALSE(default_db_path(&why));
  EXPECT_NE(why.find("LOOM_TUNE_DB"), std::string::npos);
  testing::internal::CaptureStderr();
  TuningDb off = TuningDb::open_default();
  TuningDb::open_default();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.lookup(key(0)));
  EXPECT_THROW(off.record(key(0), rec(1)), loom::Error);
  EXPECT_NE(err.find("tuning database disabled"), std::string::npos);
  EXPECT_EQ(err.find("disabled"), err.rfind("disabled")) << "one warning per process: " << err;
  if (saved_home) setenv("HOME", home.c_str(), 1);
}

}  // namespace
