// From a tuning run to the shipped defaults (`loom tune --export-shipped FILE`): winners
// merge into the file, which then reads back through the same lookup `loom run` uses;
// older records (timed before the L2 method was recorded) are kept byte for byte until a
// winner timed the benchmark's way replaces them.
#include <gtest/gtest.h>

#include "db_test_util.h"
#include "ir/error.h"
#include "tune/shipped.h"

namespace loom::tune {
namespace {

using dbtest::key;
using dbtest::rec;
using dbtest::scratch_dir;
using dbtest::slurp;
using dbtest::spit;

std::vector<ShippedDb> as_shipped(const std::string& path) {
  return {ShippedDb{path, parse_db(slurp(path))}};
}

TuningRecord timed(double us, const std::string& l2, const std::string& knobs = "BM=64,BN=64,BK=16") {
  TuningRecord r = rec(us, knobs);
  r.l2 = l2;
  r.date = "2026-11-22T22:00:00Z";
  return r;
}

TEST(ShippedExport, RoundTripsThroughTheShippedLookup) {
  const std::string file = scratch_dir() + "/h100.db";
  ShippedExport r = export_shipped(file, {{{key(0), timed(12.5, "rotate")}, false},
                                          {{key(1), timed(900.0, "read")}, false}});
  EXPECT_EQ(r.added, 2);
  auto dbs = as_shipped(file);
  ASSERT_TRUE(dbs[0].parsed.problems.empty()) << dbs[0].parsed.problems[0].what;
  // Another CUDA version on the same GPU model still finds it (shipped files match so).
  TuningKey other = key(0);
  other.cuda_runtime = 13010;
  auto hit = lookup_shipped(other, dbs);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->rec.median_us, 12.5);
  EXPECT_EQ(hit->rec.l2, "rotate");
  EXPECT_EQ(lookup_shipped(key(1), dbs)->rec.l2, "read");
  EXPECT_FALSE(lookup_shipped(key(2), dbs));
}

TEST(ShippedExport, AWinnerTimedTheBenchmarksWayReplacesAnOlderFlushedRecord) {
  const std::string file = scratch_dir() + "/h100.db";
  // The shipped file as tunes before 2026-11-22's small-launch work wrote it: no l2 field.
  const DbEntry legacy{key(0), rec(10.0)};
  const DbEntry untouched{key(3), rec(50.0, "BM=32,BN=32,BK=8")};
  spit(file, format_db({legacy, untouched}));
  const std::string untouched_line = format_entry(untouched);
  EXPECT_EQ(untouched_line.find("l2="), std::string::npos);
  // Slower in microseconds (the flush timed it at another L2 state), still the record now.
  ShippedExport r = export_shipped(file, {{{key(0), timed(11.0, "rotate", "BM=128")}, false}});
  EXPECT_EQ(r.replaced, 1);
  auto hit = lookup_shipped(key(0), as_shipped(file));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->rec.knobs, "BM=128");
  EXPECT_NE(slurp(file).find(untouched_line + "\n"), std::string::npos)
      << "an old record not exported over must stay byte for byte";
  // Timed the same way, the faster stays.
  r = export_shipped(file, {{{key(0), timed(11.5, "rotate", "BM=256")}, false}});
  EXPECT_EQ(r.kept, 1);
  EXPECT_EQ(lookup_shipped(key(0), as_shipped(file))->rec.knobs, "BM=128");
  r = export_shipped(file, {{{key(0), timed(10.5, "rotate", "BM=256")}, false}});
  EXPECT_EQ(r.replaced, 1);
  EXPECT_EQ(lookup_shipped(key(0), as_shipped(file))->rec.knobs, "BM=256");
}

TEST(ShippedExport, WhenTheDefaultWinsNoRecordPinsTheShape) {
  const std::string file = scratch_dir() + "/h100.db";
  spit(file, format_db({DbEntry{key(0), rec(10.0)}}));
  ShippedExport r = export_shipped(file, {{{key(0), timed(9.0, "read")}, true},
                                          {{key(1), timed(9.0, "read")}, true}});
  EXPECT_EQ(r.removed, 1);
  EXPECT_EQ(r.skipped, 1);
  auto dbs = as_shipped(file);
  EXPECT_TRUE(dbs[0].parsed.problems.empty());
  EXPECT_TRUE(dbs[0].parsed.entries.empty());
}

TEST(ShippedExport, AFileThatDoesNotVerifyIsRefusedAndLeftAlone) {
  const std::string file = scratch_dir() + "/h100.db";
  std::string text = format_db({DbEntry{key(0), rec(10.0)}});
  text[text.find("us=") + 3] = '7';  // the checksum no longer matches
  spit(file, text);
  try {
    export_shipped(file, {{{key(1), timed(9.0, "read")}, false}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not verify"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(file), text);
}

// The shipped file is written by the database's rules: only a new path or a tuning
// database is replaced (a temporary file renamed into place); a text file or a directory
// under that name is refused and left alone, and an unrelated `<file>.tmp` is never
// written (before: the export truncated `<file>.tmp` whatever it was).
TEST(ShippedExport, WritesOnlyANewFileOrADatabase) {
  const std::string dir = scratch_dir();
  const std::string text_file = dir + "/notes.db";
  spit(text_file, "my notes\n");
  std::filesystem::create_directories(dir + "/adir.db");
  for (const std::string& f : {text_file, dir + "/adir.db"}) {
    try {
      export_shipped(f, {{{key(1), timed(9.0, "read")}, false}});
      ADD_FAILURE() << "exported into " << f;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(slurp(text_file), "my notes\n");
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/adir.db"));
  const std::string file = dir + "/h100.db";
  spit(file + ".tmp", "someone's file\n");
  export_shipped(file, {{{key(1), timed(9.0, "read")}, false}});
  EXPECT_EQ(slurp(file + ".tmp"), "someone's file\n");
  EXPECT_EQ(as_shipped(file)[0].parsed.entries.size(), 1u);
}

}  // namespace
}  // namespace loom::tune
