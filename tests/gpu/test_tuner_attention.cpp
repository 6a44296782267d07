// `loom tune` on attention end to end (the articles' knobs are tuner knobs):
// the attention space, trials verified by `loom run`'s attention check and timed as
// `loom run --bench` times, the default re-measured, the record written only when it
// beats the default, and `loom run` compiling the record's knobs.
#include <gtest/gtest.h>

#include <filesystem>

#include "compile_first.h"
#include "tune/database.h"
#include "tune/tuned_knobs.h"
#include "tune/tuner.h"

namespace loom::tune {
namespace {

const std::string kExpr =
    "attention(Q[2,8,1024,64]:bf16, K[2,8,1024,64]:bf16, V[2,8,1024,64]:bf16, causal=true)";

TEST(GpuTunerAttention, TunesVerifiesRecordsAndLoomRunFindsTheRecord) {
  compile_then_require_gpu(kExpr, "");
  if (IsSkipped() || HasFailure()) return;
  const std::string db = std::filesystem::temp_directory_path() / "loom-gpu-test-tuner-attn.db";
  std::filesystem::remove(db);
  TuneOptions opt;
  opt.budget.seconds = 40;
  opt.max_candidates = 6;
  opt.db_path = db;
  opt.loom_binary = LOOM_BINARY;
  opt.progress = false;
  TuneOutcome o = tune_expression(kExpr, 0, opt);
  ASSERT_EQ(o.error, "");
  std::cout << format_tune_report({o});
  EXPECT_FALSE(o.best_knobs.empty());
  EXPECT_GE(o.search.trials.size(), 2u);
  EXPECT_LT(o.seconds, opt.budget.seconds + 40) << "the budget covers the search";
  EXPECT_GT(o.flops, 0);
  // Every trial that ran was verified by the attention check, within its threshold.
  for (const Trial& t : o.search.trials)
    if (t.result.status == TrialStatus::ok) {
      EXPECT_GT(t.result.threshold, 0) << t.knobs;
      EXPECT_LE(t.result.rel_error, t.result.threshold) << t.knobs;
    }
  ASSERT_FALSE(o.default_knobs.empty());
  ASSERT_TRUE(o.default_us.has_value()) << o.default_note;
  ASSERT_TRUE(o.confirm_us.has_value()) << o.confirm_note;
  EXPECT_FALSE(o.cublas_us.has_value()) << "attention has no cuBLAS comparison";
  ASSERT_TRUE(o.entry.has_value());
  EXPECT_EQ(o.entry->key.shape, "B=2,Hq=8,Hkv=8,Sq=1024,Sk=1024,D=64");

  // Recorded exactly when the winner beat the re-measured default.
  const bool beat = o.best_knobs != o.default_knobs && o.best_us < *o.default_us;
  TuningDb d = TuningDb::open(db);
  if (beat) {
    EXPECT_NE(o.recorded.find("added"), std::string::npos) << o.recorded;
    ASSERT_EQ(d.entries().size(), 1u);
    EXPECT_EQ(d.entries()[0].key, o.entry->key);
    EXPECT_EQ(d.entries()[0].rec.knobs, o.best_knobs);
  } else {
    // "the default is as fast" here; review-debts's general rule says "the default won".
    EXPECT_NE(o.recorded.find("not recorded: the default"), std::string::npos) << o.recorded;
    EXPECT_TRUE(d.entries().empty());
    // The lookup below is checked all the same, on the entry the tuner would have written.
    d.record(o.entry->key, o.entry->rec);
  }

  // `loom run` takes the record as its knobs, and its check passes with them.
  RunOptions ro;
  ro.choose_tuned = [&](const Graph& g, const DeviceInfo& dev, CompileOptions& c) {
    choose_tuned_knobs(g, dev, TuningDb::open(db), c, {});
  };
  RunReport r = run_expression(kExpr, ro);
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.program.knob_source.find("tuned"), std::string::npos) << r.program.knob_source;
  const Knobs best = Knobs::parse(o.best_knobs);
  for (const auto& [name, value] : best.values()) {
    auto it = r.program.state.used_knobs.find(name);
    ASSERT_NE(it, r.program.state.used_knobs.end()) << name;
    EXPECT_EQ(it->second, value) << name;
  }
  std::filesystem::remove(db);
}

}  // namespace
}  // namespace loom::tune
