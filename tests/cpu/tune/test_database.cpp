// The tuning database: the file format round trip, the better-record rule, concurrent
// writers, damaged lines (each costs itself alone, kept in the side file), paths that are
// not a tuning database (refused, untouched), field validation, export and import.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>

#include "db_test_util.h"
#include "ir/error.h"
#include "tune/database.h"

namespace {

using namespace loom::tune;
using dbtest::key;
using dbtest::rec;

TEST(DbFile, RoundTripsEveryField) {
  DbEntry e{key(0, "GPU with \\ a backslash"), rec(812.25)};
  e.rec.note = "a note\twith a tab \\t";
  ParsedDb p = parse_db(format_db({e, {key(1), rec(0.35)}}));
  ASSERT_TRUE(p.problems.empty()) << p.problems[0].what;
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_EQ(p.entries[0].key, e.key);
  EXPECT_EQ(p.entries[0].rec.knobs, e.rec.knobs);
  EXPECT_EQ(p.entries[0].rec.median_us, 812.25);
  EXPECT_EQ(p.entries[0].rec.cublas_us, e.rec.cublas_us);
  EXPECT_EQ(p.entries[0].rec.trials, 17);
  EXPECT_EQ(p.entries[0].rec.date, e.rec.date);
  EXPECT_EQ(p.entries[0].rec.revision, "ea7c7b5");
  EXPECT_EQ(p.entries[0].rec.note, "a note\twith a tab \\t");
  EXPECT_EQ(p.entries[1].rec.median_us, 0.35);
  EXPECT_EQ(p.entry_lines, (std::vector<int>{2, 3}));
}

TEST(DbFile, EveryDefectIsAProblem) {
  std::string good = format_db({{key(0), rec(10)}, {key(1), rec(20)}});
  EXPECT_TRUE(parse_db(good).problems.empty());
  EXPECT_FALSE(parse_db("").problems.empty());
  EXPECT_FALSE(parse_db("loom-tuning-db v2\nend 0\n").problems.empty());
  // A missing final newline after a complete end line loses nothing: not a defect.
  EXPECT_TRUE(parse_db(good.substr(0, good.size() - 1)).problems.empty());
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

// A valid database text with one record.
std::string make_db_text() { return format_db({{key(0), rec(10)}}); }

// A database with records 0..n-1 (at lines 2..n+1), written by Loom itself.
std::string make_db(const std::string& path, int n) {
  for (int i = 0; i < n; ++i) TuningDb::open(path).record(key(i), rec(10 + i));
  return dbtest::slurp(path);
}

// The number (1-based) of the line of `text` that holds `part`. Records are sorted by
// key text, so key(1) (M=128) comes before key(0) (M=64).
int line_holding(const std::string& text, const std::string& part) {
  size_t at = text.find(part);
  EXPECT_NE(at, std::string::npos) << part;
  return 1 + int(std::count(text.begin(), text.begin() + std::ptrdiff_t(at), '\n'));
}

// The line `line` (1-based) of `text`, without its newline.
std::string line_of(const std::string& text, int line) {
  std::istringstream in(text);
  std::string l;
  for (int i = 0; i < line; ++i) std::getline(in, l);
  return l;
}

// One flipped byte in one record costs that record alone: the others are looked up, the
// damaged line is reported (line number, why) and kept in the side file, and the database
// is rewritten without it. Before: the whole file was set aside and none of its records
// were used.
TEST(TuningDb, OneFlippedByteCostsOneRecord) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string good = make_db(path, 4);
  std::string damaged = good;
  size_t third = damaged.find("M=192,");  // key(2)'s record
  const int n = line_holding(good, "M=192,");
  ASSERT_NE(third, std::string::npos);
  damaged[third + 2] ^= 0x01;
  const std::string damaged_line = line_of(damaged, n);
  dbtest::spit(path, damaged);

  testing::internal::CaptureStderr();
  TuningDb db = TuningDb::open(path);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(db.refused().empty()) << db.refused();
  EXPECT_EQ(db.entries().size(), 3u);
  EXPECT_TRUE(db.lookup(key(0)) && db.lookup(key(1)) && db.lookup(key(3)));
  EXPECT_FALSE(db.lookup(key(2)));
  ASSERT_EQ(db.damage().size(), 1u);
  EXPECT_EQ(db.damage()[0].line, n);
  EXPECT_NE(db.damage()[0].what.find("checksum"), std::string::npos);
  EXPECT_NE(err.find(path + ":" + std::to_string(n) + ": checksum mismatch"), std::string::npos) << err;
  EXPECT_NE(err.find("moved to " + path + ".rejected"), std::string::npos) << err;
  EXPECT_TRUE(dbtest::files_starting(dir, "tuning.db.corrupt").empty()) << "nothing is set aside whole";
  // The side file holds the damaged line byte for byte, under a comment saying where it was.
  std::string side = dbtest::slurp(path + ".rejected");
  EXPECT_TRUE(side.starts_with(std::string(kRejectedHeader))) << side;
  EXPECT_NE(side.find("# " + path + ":" + std::to_string(n) + " "), std::string::npos) << side;
  EXPECT_NE(side.find("\n" + damaged_line + "\n"), std::string::npos) << side;
  EXPECT_EQ(db.rejected_count(), 1u);
  // The database now verifies, holds the three, and says nothing on the next open.
  ParsedDb p = parse_db(dbtest::slurp(path));
  EXPECT_TRUE(p.problems.empty());
  EXPECT_EQ(p.entries.size(), 3u);
  testing::internal::CaptureStderr();
  TuningDb again = TuningDb::open(path);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(again.damage().empty());
  // A later rewrite keeps the side file as it was: the damaged line is not lost.
  EXPECT_EQ(again.record(key(9), rec(5)), TuningDb::Outcome::added);
  EXPECT_EQ(dbtest::slurp(path + ".rejected"), side);
  EXPECT_EQ(TuningDb::open(path).entries().size(), 4u);
}

// Damage a writer meets under its lock goes the same way: to the side file first, then
// the rewrite, with the damaged line reported and every intact record kept.
TEST(TuningDb, ARecordKeepsTheIntactRecordsOfADamagedFile) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string good = make_db(path, 3);
  TuningDb db = TuningDb::open(path, /*warn=*/false);  // opened while the file was fine
  std::string damaged = good;
  const int n = line_holding(good, "M=128,");
  damaged[damaged.find("M=128,") + 2] = 'x';
  dbtest::spit(path, damaged);
  EXPECT_EQ(db.record(key(7), rec(5)), TuningDb::Outcome::added);
  ASSERT_EQ(db.damage().size(), 1u);
  EXPECT_EQ(db.damage()[0].line, n);
  TuningDb fresh = TuningDb::open(path);
  EXPECT_EQ(fresh.entries().size(), 3u);  // keys 0, 2 and 7
  EXPECT_TRUE(fresh.lookup(key(0)) && fresh.lookup(key(2)) && fresh.lookup(key(7)));
  EXPECT_NE(dbtest::slurp(path + ".rejected").find(line_of(damaged, n)), std::string::npos);
}

// Lines ending in CRLF (a Windows editor, a transfer in text mode) load whole.
// Before: every line failed (the CR broke the header and each checksum).
TEST(TuningDb, CrlfLineEndingsLoadEveryRecord) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string good = make_db(path, 3);
  std::string crlf;
  for (char c : good) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  dbtest::spit(path, crlf);
  testing::internal::CaptureStderr();
  TuningDb db = TuningDb::open(path);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(db.entries().size(), 3u);
  EXPECT_TRUE(db.damage().empty());
  EXPECT_EQ(dbtest::slurp(path), crlf) << "a file that verifies is not rewritten by a read";
  EXPECT_FALSE(std::filesystem::exists(path + ".rejected"));
  EXPECT_EQ(parse_db(crlf).entries.size(), 3u);
  EXPECT_TRUE(parse_db(crlf).problems.empty());
  EXPECT_EQ(db.record(key(5), rec(1)), TuningDb::Outcome::added);
  EXPECT_EQ(TuningDb::open(path).entries().size(), 4u);
  // A Windows editor's byte-order mark in front, too.
  ParsedDb bom = parse_db("\xEF\xBB\xBF" + crlf);
  EXPECT_TRUE(bom.problems.empty()) << bom.problems[0].what;
  EXPECT_EQ(bom.entries.size(), 3u);
  EXPECT_EQ(classify_db_text("\xEF\xBB\xBF" + crlf), DbTextKind::loom);
}

struct Damage {
  const char* name;
  std::string (*damage)(const std::string& good);
  size_t intact;           // records still in use afterwards (of 3)
  size_t kept_aside;       // lines in the side file afterwards
};

class DamagedDb : public testing::TestWithParam<Damage> {};

TEST_P(DamagedDb, KeepsItsIntactRecordsAndTheDamagedLines) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string other = dir + "/other.db";
  std::string good = make_db(path, 3);
  TuningDb::open(other).record(key(7), rec(70));
  std::string damaged = GetParam().damage(good);
  dbtest::spit(path, damaged);

  testing::internal::CaptureStderr();
  TuningDb db = TuningDb::open(path);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(db.refused().empty()) << db.refused();
  EXPECT_EQ(db.entries().size(), GetParam().intact) << err;
  EXPECT_FALSE(db.damage().empty());
  EXPECT_NE(err.find(path + ":"), std::string::npos) << err;
  EXPECT_EQ(db.rejected_count(), GetParam().kept_aside) << dbtest::slurp(path + ".rejected");
  EXPECT_TRUE(parse_db(dbtest::slurp(path)).problems.empty()) << "rewritten with its intact records";
  EXPECT_EQ(db.record(key(4), rec(30)), TuningDb::Outcome::added);
  EXPECT_EQ(TuningDb::open(path).entries().size(), GetParam().intact + 1);
  EXPECT_TRUE(TuningDb::open(other).lookup(key(7))) << "another database is untouched";
}

INSTANTIATE_TEST_SUITE_P(
    Damage, DamagedDb,
    testing::Values(
        // Cut in the middle of the last record: two intact, the stump kept aside.
        Damage{"truncated", [](const std::string& g) { return g.substr(0, g.find("M=64,") + 10); }, 2, 1},
        // Cut at a line boundary: the records before the cut are intact; nothing to keep.
        Damage{"cut_at_a_line", [](const std::string& g) { return g.substr(0, g.rfind("end ")); }, 3, 0},
        Damage{"flipped_byte",
               [](const std::string& g) {
                 std::string d = g;
                 d[d.find("BM=128")] ^= 0x20;
                 return d;
               },
               2, 1},
        // A damaged header with intact records under it is still Loom's: the header line
        // is kept aside, the records stay.
        Damage{"damaged_header", [](const std::string& g) { return "x" + g; }, 3, 1},
        // The header line lost whole: the first line is a record, read as one.
        Damage{"lost_header", [](const std::string& g) { return g.substr(g.find('\n') + 1); }, 3, 0},
        Damage{"garbage_line", [](const std::string& g) {
                 std::string d = g;
                 d.insert(d.find('\n') + 1, "\x01\x02 garbage\n");
                 return d;
               }, 3, 1}),
    [](const testing::TestParamInfo<Damage>& i) { return std::string(i.param.name); });

// An empty file is an empty database: nothing to set aside, the first record fills it.
TEST(TuningDb, AnEmptyFileIsAnEmptyDatabase) {
  std::string path = dbtest::scratch_dir() + "/tuning.db";
  dbtest::spit(path, "");
  testing::internal::CaptureStderr();
  TuningDb db = TuningDb::open(path);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(db.refused().empty());
  EXPECT_TRUE(db.damage().empty());
  EXPECT_EQ(db.record(key(0), rec(1)), TuningDb::Outcome::added);
  EXPECT_EQ(TuningDb::open(path).entries().size(), 1u);
}

// Eight processes open one damaged database at once: each uses its intact records, and
// the damaged line lands in the side file once (the repair re-reads under the lock).
TEST(TuningDb, ConcurrentReadersOfADamagedFileKeepTheLineOnce) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string damaged = make_db(path, 3);
  damaged[damaged.find("M=128,") + 2] = 'x';
  dbtest::spit(path, damaged);
  std::vector<pid_t> kids;
  for (int p = 0; p < 8; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      TuningDb db = TuningDb::open(path, /*warn=*/false);
      _exit(db.entries().size() == 2 && db.lookup(key(0)) && db.lookup(key(2)) ? 0 : 3);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  EXPECT_EQ(TuningDb::open(path).rejected_count(), 1u) << dbtest::slurp(path + ".rejected");
  EXPECT_EQ(TuningDb::open(path).entries().size(), 2u);
}

TEST(TuningDb, DamageThatCannotBeKeptAsideLeavesTheFileAsItIs) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes in a read-only directory";
  std::string dir = dbtest::scratch_dir() + "/ro";
  std::filesystem::create_directories(dir);
  std::string path = dir + "/tuning.db";
  std::string damaged = make_db(path, 2);  // the lock file exists from here on
  damaged[damaged.find("M=128,") + 2] = 'x';
  dbtest::spit(path, damaged);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  testing::internal::CaptureStderr();
  TuningDb db = TuningDb::open(path);
  EXPECT_EQ(db.entries().size(), 1u) << "the intact record is used all the same";
  EXPECT_THROW(db.record(key(1), rec(5)), loom::Error);
  std::string err = testing::internal::GetCapturedStderr();
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  EXPECT_EQ(dbtest::slurp(path), damaged);
  EXPECT_NE(err.find("could not be moved aside"), std::string::npos) << err;
}

// A side file that is not Loom's (someone's file under that name) is never written to,
// and the database is then not rewritten either (the damaged line has nowhere to go).
TEST(TuningDb, AForeignSideFileIsNotWrittenAndTheDatabaseIsNotRewritten) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string damaged = make_db(path, 2);
  damaged[damaged.find("M=128,") + 2] = 'x';
  dbtest::spit(path, damaged);
  dbtest::spit(path + ".rejected", "my own notes\n");
  testing::internal::CaptureStderr();
  TuningDb db = TuningDb::open(path);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(db.entries().size(), 1u);
  EXPECT_NE(err.find(path + ".rejected exists and is not Loom's"), std::string::npos) << err;
  EXPECT_THROW(db.record(key(5), rec(1)), loom::Error);
  EXPECT_EQ(dbtest::slurp(path + ".rejected"), "my own notes\n");
  EXPECT_EQ(dbtest::slurp(path), damaged);
}

// What a path must not be. Each is refused by open (no records, the reason naming the
// path), record/clear/import throw it, and nothing at or beside the path changes: no
// rename, no lock or side or temporary file. Before: each was renamed to
// `<path>.corrupt-<time>` and a fresh database created in its place.
struct NotADb {
  const char* name;
  // Makes the thing at `path` (in the scratch dir `dir`); returns the words the refusal
  // must hold.
  std::string (*make)(const std::string& dir, const std::string& path);
};

class RefusedPath : public testing::TestWithParam<NotADb> {};

TEST_P(RefusedPath, IsLeftUntouchedAndNamed) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string words = GetParam().make(dir, path);
  const std::string before = dbtest::tree(dir);

  testing::internal::CaptureStderr();
  TuningDb db = TuningDb::open(path);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(db.entries().empty());
  EXPECT_NE(db.refused().find(path), std::string::npos) << db.refused();
  EXPECT_NE(db.refused().find(words), std::string::npos) << db.refused();
  EXPECT_NE(db.refused().find("untouched"), std::string::npos) << db.refused();
  EXPECT_NE(err.find(db.refused()), std::string::npos) << "a lookup warns: " << err;
  for (int i = 0; i < 3; ++i) {
    try {
      if (i == 0) db.record(key(0), rec(1));
      if (i == 1) db.clear();
      if (i == 2) {
        dbtest::spit("/tmp/loom-db-refused-import-" + std::to_string(::getpid()), make_db_text());
        db.import_file("/tmp/loom-db-refused-import-" + std::to_string(::getpid()));
      }
      ADD_FAILURE() << "change " << i << " went through";
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove("/tmp/loom-db-refused-import-" + std::to_string(::getpid()));
  EXPECT_EQ(dbtest::tree(dir), before) << "nothing changed at or beside the path";
}

INSTANTIATE_TEST_SUITE_P(
    NotADb, RefusedPath,
    testing::Values(
        NotADb{"directory",
               [](const std::string&, const std::string& p) {
                 std::filesystem::create_directories(p + "/inside");
                 dbtest::spit(p + "/inside/file", "keep me\n");
                 return std::string("is a directory");
               }},
        NotADb{"fifo",
               [](const std::string&, const std::string& p) {
                 EXPECT_EQ(::mkfifo(p.c_str(), 0644), 0);
                 return std::string("is a FIFO");
               }},
        NotADb{"socket",
               [](const std::string&, const std::string& p) {
                 int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
                 sockaddr_un a{};
                 a.sun_family = AF_UNIX;
                 std::snprintf(a.sun_path, sizeof a.sun_path, "%s", p.c_str());
                 EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << p;
                 ::close(fd);
                 return std::string("is a socket");
               }},
        NotADb{"link_to_a_directory",
               [](const std::string& d, const std::string& p) {
                 std::filesystem::create_directories(d + "/real");
                 std::filesystem::create_directory_symlink(d + "/real", p);
                 return std::string("is a directory");
               }},
        NotADb{"link_to_a_device",
               [](const std::string&, const std::string& p) {
                 std::filesystem::create_symlink("/dev/null", p);
                 return std::string("is a character device");
               }},
        NotADb{"dangling_link",
               [](const std::string& d, const std::string& p) {
                 std::filesystem::create_symlink(d + "/nowhere/tuning.db", p);
                 return std::string("symbolic link to nothing");
               }},
        NotADb{"text_file",
               [](const std::string&, const std::string& p) {
                 dbtest::spit(p, "my shopping list\nmilk\teggs\n");
                 return std::string("is not a Loom tuning database");
               }},
        NotADb{"binary_garbage",
               [](const std::string&, const std::string& p) {
                 dbtest::spit(p, std::string("\x01\x02\x00 not a db\n", 13));
                 return std::string("is not a Loom tuning database");
               }},
        // Loom's own side file of damaged lines holds intact records, but is no database.
        NotADb{"side_file",
               [](const std::string&, const std::string& p) {
                 dbtest::spit(p, std::string(kRejectedHeader) + "\n# from x:2\n" +
                                     format_entry({key(0), rec(10)}) + "\n");
                 return std::string("is not a Loom tuning database");
               }},
        NotADb{"newer_format",
               [](const std::string&, const std::string& p) {
                 dbtest::spit(p, "loom-tuning-db v2\nsomething new\nend 1\n");
                 return std::string("a tuning database format this build does not read");
               }}),
    [](const testing::TestParamInfo<NotADb>& i) { return std::string(i.param.name); });

// A character device given directly (LOOM_TUNE_DB=/dev/null; a null device node in the
// scratch directory stands for it): refused, and nothing is created beside it (a .lock,
// a .corrupt-<time>).
TEST(TuningDb, ADeviceIsRefusedAndNothingIsCreatedBesideIt) {
  std::string dir = dbtest::scratch_dir();
  std::string dev = dir + "/null";
  dbtest::make_device(dev);
  const std::string before = dbtest::tree(dir);
  TuningDb db = TuningDb::open(dev, /*warn=*/false);
  EXPECT_NE(db.refused().find("is a character device"), std::string::npos) << db.refused();
  EXPECT_NE(db.refused().find(dev), std::string::npos) << db.refused();
  EXPECT_THROW(db.record(key(0), rec(1)), loom::Error);
  EXPECT_EQ(dbtest::tree(dir), before);
}

// A link to a database (kept in a dotfiles repository) is followed: the file it names is
// read and replaced, the link stays a link.
TEST(TuningDb, ALinkToADatabaseIsFollowedAndKept) {
  std::string dir = dbtest::scratch_dir();
  std::string real = dir + "/real.db";
  make_db(real, 1);
  std::filesystem::create_symlink(real, dir + "/tuning.db");
  TuningDb db = TuningDb::open(dir + "/tuning.db");
  EXPECT_EQ(db.entries().size(), 1u);
  EXPECT_EQ(db.record(key(1), rec(2)), TuningDb::Outcome::added);
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/tuning.db"));
  EXPECT_EQ(TuningDb::open(real).entries().size(), 2u);
}

// Loom's own files beside the database are only ever regular files it made: a lock path
// that is a link or a directory stops the change with a message, and is not followed.
TEST(TuningDb, ALockPathThatIsNotAFileIsNotFollowed) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  dbtest::spit(dir + "/victim", "someone's file\n");
  std::filesystem::create_symlink(dir + "/victim", path + ".lock");
  TuningDb db = TuningDb::open(path);
  try {
    db.record(key(0), rec(1));
    ADD_FAILURE() << "recorded through a linked lock file";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ".lock is a symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dbtest::slurp(dir + "/victim"), "someone's file\n");
  EXPECT_FALSE(std::filesystem::exists(path));
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

// The side file imports like a database: its comment lines are skipped, each line under
// them is checked again and reported by its line in the side file.
TEST(TuningDb, TheSideFileImportsByItsOwnLineNumbers) {
  std::string dir = dbtest::scratch_dir();
  std::string path = dir + "/tuning.db";
  std::string damaged = make_db(path, 2);
  damaged[damaged.find("M=128,") + 2] = 'x';
  dbtest::spit(path, damaged);
  TuningDb db = TuningDb::open(path, /*warn=*/false);
  ASSERT_EQ(db.rejected_count(), 1u);
  // A record another Loom appended to the side file by hand: intact, so it imports.
  std::ofstream(path + ".rejected", std::ios::app) << "# added by hand\n" << format_entry({key(5), rec(3)}) << "\n";
  ImportReport r = db.import_file(path + ".rejected");
  EXPECT_EQ(r.added, 1);
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_EQ(r.rejected[0].line, 3) << r.rejected[0].what;  // header, comment, the damaged line
  EXPECT_NE(r.rejected[0].what.find("checksum"), std::string::npos);
  EXPECT_TRUE(db.lookup(key(5)));
}

// Every field of a record is checked, on import and on load alike: a nonsense value with
// a valid checksum (forged, or written by a broken tool) is refused by its line, and the
// good lines around it still go in. Before: each of these imported (us=1e-300 then beat
// every real record for its shape for ever; inf and nan compared as nothing does).
struct Nonsense {
  const char* name;
  size_t field;            // index in dbtest::good_fields(); past its end: an added field
  std::string value;       // the whole `name=value`
  std::string words;       // what the reason must say
};

class NonsenseField : public testing::TestWithParam<Nonsense> {};

TEST_P(NonsenseField, IsRefusedOnImportAndOnLoad) {
  std::vector<std::string> f = dbtest::good_fields();
  if (GetParam().field < f.size())
    f[GetParam().field] = GetParam().value;
  else
    f.push_back(GetParam().value);
  const std::string bad = dbtest::line_with_sum(dbtest::join_fields(f));
  const std::string good = format_entry({key(3), rec(50)});
  const std::string text = std::string(kDbHeader) + "\n" + good + "\n" + bad + "\nend 2\n";

  ParsedDb p = parse_db(text);  // what a load sees
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_EQ(p.problems[0].line, 3);
  EXPECT_NE(p.problems[0].what.find(GetParam().words), std::string::npos) << p.problems[0].what;
  EXPECT_EQ(p.problems[0].text, bad) << "the line is kept as it was";
  EXPECT_EQ(p.entries.size(), 1u);
  for (char c : p.problems[0].what)
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "the reason quotes printable text only: " << p.problems[0].what;

  std::string dir = dbtest::scratch_dir();
  dbtest::spit(dir + "/in.db", text);
  TuningDb db = TuningDb::open(dir + "/tuning.db");
  ImportReport r = db.import_file(dir + "/in.db");
  EXPECT_EQ(r.added, 1);
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_EQ(r.rejected[0].line, 3);
  EXPECT_NE(r.rejected[0].what.find(GetParam().words), std::string::npos) << r.rejected[0].what;
  EXPECT_EQ(TuningDb::open(dir + "/tuning.db").entries().size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, NonsenseField,
    testing::Values(
        Nonsense{"us_inf", 7, "us=inf", "not a plausible kernel time"},
        Nonsense{"us_nan", 7, "us=nan", "not a plausible kernel time"},
        Nonsense{"us_negative", 7, "us=-5", "not a plausible kernel time"},
        Nonsense{"us_zero", 7, "us=0", "not a plausible kernel time"},
        Nonsense{"us_denormal", 7, "us=1e-300", "not a plausible kernel time"},
        Nonsense{"us_below_the_floor", 7, "us=0.05", "not a plausible kernel time"},
        Nonsense{"us_huge", 7, "us=1e300", "not a plausible kernel time"},
        Nonsense{"us_text", 7, "us=fast", "us='fast' is not a number"},
        Nonsense{"cublas_negative", 8, "cublas_us=-1", "cublas_us=-1"},
        Nonsense{"cublas_inf", 8, "cublas_us=inf", "cublas_us=inf"},
        Nonsense{"trials_negative", 9, "trials=-3", "trials=-3"},
        Nonsense{"sms_zero", 1, "sms=0", "sms=0"},
        Nonsense{"driver_negative", 3, "driver=-1", "CUDA version"},
        Nonsense{"op_garbage", 4, "op=garbage", "the op 'garbage' does not parse"},
        Nonsense{"op_unbalanced", 4, "op=matmul(f32[M,K], f32[K,N]", "does not parse"},
        Nonsense{"op_bad_dtype", 4, "op=matmul(f8[M,K], f32[K,N]):f32", "'f8' is not a dtype"},
        Nonsense{"op_no_contraction", 4, "op=relu(f32[M,N]):f32", "no matmul or attention"},
        Nonsense{"op_matmul_arity", 4, "op=matmul(f32[M,K]):f32", "matmul takes two operands"},
        Nonsense{"op_trailing", 4, "op=matmul(f32[M,K], f32[K,N]):f32 junk", "does not parse"},
        Nonsense{"op_attention_option_elsewhere", 4, "op=add(matmul(f32[M,K], f32[K,N]):f32, causal=true):f32",
                 "not an attention option"},
        Nonsense{"shape_garbage", 5, "shape=big", "is not NAME=SIZE pairs"},
        Nonsense{"shape_zero", 5, "shape=M=0,N=4096,K=4096", "is not NAME=SIZE pairs"},
        Nonsense{"shape_twice", 5, "shape=M=1,M=2,N=4096,K=4096", "names M twice"},
        Nonsense{"shape_not_the_ops_dims", 5, "shape=M=256,N=4096", "are not the op's dims"},
        Nonsense{"gpu_escape", 0, "gpu=NVIDIA \x1b[31mH100", "control character"},
        Nonsense{"gpu_escaped_newline", 0, "gpu=NVIDIA\\nH100", "control character"},
        Nonsense{"gpu_c1_control", 0, "gpu=NVIDIA \xc2\x9b" "31mH100", "control character"},
        Nonsense{"gpu_bad_utf8", 0, "gpu=NVIDIA \xff H100", "not valid UTF-8"},
        Nonsense{"gpu_empty", 0, "gpu=", "gpu name is empty"},
        Nonsense{"note_bell", 12, "note=ring\x07", "control character"},
        Nonsense{"rev_escape", 11, "rev=\x1b]0;pwned\x07", "control character"},
        Nonsense{"knobs_empty", 6, "knobs=", "knobs are empty"},
        Nonsense{"knobs_garbage", 6, "knobs=go fast", "not NAME=VALUE pairs"},
        Nonsense{"knobs_no_value", 6, "knobs=BM=,BN=64", "not NAME=VALUE pairs"},
        Nonsense{"knobs_twice", 6, "knobs=BM=64,BM=32", "set BM twice"},
        Nonsense{"date_text", 10, "date=yesterday", "not a UTC time"},
        Nonsense{"date_impossible", 10, "date=2026-02-30T00:00:00Z", "not a UTC time"},
        Nonsense{"l2_unknown", 13, "l2=sideways", "l2 is not one of"}),
    [](const testing::TestParamInfo<Nonsense>& i) { return std::string(i.param.name); });

// What only import checks: the knobs by this build's registry, and a date in the future
// (which would win every comparison between timing methods). A load keeps such a record
// (a newer Loom's knob; lookup skips it with a warning).
TEST(TuningDb, ImportChecksTheKnobRegistryAndTheDate) {
  std::string dir = dbtest::scratch_dir();
  TuningRecord future = rec(10);
  future.date = "2098-01-01T00:00:00Z";
  const std::string text = format_db({{key(0), rec(10, "NOT_A_KNOB=1")}, {key(1), future}, {key(2), rec(10)}});
  EXPECT_TRUE(parse_db(text).problems.empty());
  dbtest::spit(dir + "/in.db", text);
  TuningDb db = TuningDb::open(dir + "/tuning.db");
  ImportReport r = db.import_file(dir + "/in.db");
  EXPECT_EQ(r.added, 1);
  ASSERT_EQ(r.rejected.size(), 2u);
  EXPECT_EQ(r.rejected[0].line, 2);
  EXPECT_NE(r.rejected[0].what.find("NOT_A_KNOB"), std::string::npos) << r.rejected[0].what;
  EXPECT_EQ(r.rejected[1].line, 3);
  EXPECT_NE(r.rejected[1].what.find("in the future"), std::string::npos) << r.rejected[1].what;
}

// record() refuses what a load would refuse, so Loom never writes a line it would then
// take out again.
TEST(TuningDb, RecordRefusesAnImplausibleRecord) {
  TuningDb db = TuningDb::open(dbtest::scratch_dir() + "/tuning.db");
  EXPECT_THROW(db.record(key(0), rec(1e-300)), loom::Error);
  EXPECT_THROW(db.record(key(0), rec(std::nan(""))), loom::Error);
  EXPECT_THROW(db.record(key(0), rec(10, "")), loom::Error);
  TuningKey odd = key(0);
  odd.op = "nonsense";
  EXPECT_THROW(db.record(odd, rec(10)), loom::Error);
  EXPECT_TRUE(TuningDb::open(db.path()).entries().empty());
  EXPECT_FALSE(std::filesystem::exists(db.path()));
}

// Export writes a new file or replaces a tuning database, and refuses anything else.
TEST(TuningDb, ExportRefusesToOverwriteWhatIsNotADatabase) {
  std::string dir = dbtest::scratch_dir();
  TuningDb db = TuningDb::open(dir + "/tuning.db");
  db.record(key(0), rec(10));
  dbtest::spit(dir + "/notes.txt", "my notes\n");
  std::filesystem::create_directories(dir + "/somedir");
  dbtest::make_device(dir + "/null");
  const std::string before = dbtest::tree(dir);
  for (std::string target : {dir + "/notes.txt", dir + "/somedir", dir + "/null"}) {
    try {
      db.export_file(target);
      ADD_FAILURE() << "exported over " << target;
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find(target), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(dbtest::tree(dir), before);
  db.export_file(dir + "/out.db");
  db.export_file(dir + "/out.db");  // over its own earlier export
  EXPECT_EQ(parse_db(dbtest::slurp(dir + "/out.db")).entries.size(), 1u);
}

// Keys Loom makes pass its own key check (tests/cpu/tune/test_tuning_key checks more).
TEST(DbFile, TheTestKeysAreValid) {
  EXPECT_EQ(key_problem(key(0)), "");
  EXPECT_EQ(record_problem(rec(10)), "");
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
