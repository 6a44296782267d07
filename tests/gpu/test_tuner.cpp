// `loom tune` end to end on the GPU: space, compilation, measurement in the worker,
// successive halving, the confirming `loom run --bench`, and the database record that
// `loom run` then finds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "compile_first.h"
#include "tune/database.h"
#include "tune/tuned_knobs.h"
#include "tune/tuner.h"

namespace loom::tune {
namespace {

const std::string kExpr = "matmul(A[1024,1024]:bf16, B[1024,1024]:bf16)";

TEST(GpuTuner, TunesVerifiesRecordsAndLoomRunFindsTheRecord) {
  compile_then_require_gpu(kExpr, "");
  if (IsSkipped() || HasFailure()) return;
  const std::string db = std::filesystem::temp_directory_path() / "loom-gpu-test-tuner.db";
  std::filesystem::remove(db);
  TuneOptions opt;
  opt.budget.seconds = 25;
  opt.max_candidates = 8;
  opt.db_path = db;
  opt.loom_binary = LOOM_BINARY;
  opt.progress = false;
  TuneOutcome o = tune_expression(kExpr, 0, opt);
  ASSERT_EQ(o.error, "");
  EXPECT_FALSE(o.best_knobs.empty());
  EXPECT_GE(o.search.trials.size(), 2u);
  EXPECT_LT(o.seconds, opt.budget.seconds + 30) << "the budget covers the search";
  ASSERT_TRUE(o.confirm_us.has_value()) << o.confirm_note;
  ASSERT_TRUE(o.cublas_us.has_value());
  // The confirming run times the winner by the same protocol as the search's last round.
  EXPECT_NEAR(*o.confirm_us, o.best_us, 0.15 * o.best_us);
  EXPECT_NE(o.recorded.find("added"), std::string::npos) << o.recorded;

  TuningDb d = TuningDb::open(db);
  ASSERT_EQ(d.entries().size(), 1u);
  EXPECT_EQ(d.entries()[0].rec.knobs, o.best_knobs);
  EXPECT_GT(d.entries()[0].rec.cublas_us, 0);

  // `loom run` takes the record as its knobs.
  RunOptions ro;
  ro.choose_tuned = [&](const Graph& g, const DeviceInfo& dev, CompileOptions& c) {
    choose_tuned_knobs(g, dev, d, c, {});
  };
  RunReport r = run_expression(kExpr, ro);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.program.knob_source.find("tuned"), std::string::npos) << r.program.knob_source;
  std::filesystem::remove(db);
}

}  // namespace
}  // namespace loom::tune
