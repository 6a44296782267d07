// `loom tune` end to end on the GPU: space, compilation, measurement in the worker,
// successive halving, the confirming `loom run --bench`, and the database record that
// `loom run` then finds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "compile_first.h"
#include "planted_kernels.h"
#include "tune/worker.h"
#include "tune/database.h"
#include "tune/trial_timing.h"
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
  // A trial replays from a CUDA graph exactly when its event median is short, and the
  // winner is ranked and recorded by how it was timed.
  const Trial* last = nullptr;  // the search winner's latest trial
  const std::string searched_best = o.search_best_knobs.empty() ? o.best_knobs : o.search_best_knobs;
  for (const Trial& t : o.search.trials) {
    if (t.result.status != TrialStatus::ok) continue;
    EXPECT_EQ(t.result.graph_us > 0, t.result.median_us < kTrialGraphReplayBelowUs)
        << t.knobs << ": event " << t.result.median_us << " us, graph " << t.result.graph_us;
    if (t.knobs == searched_best) last = &t;
  }
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(o.search_best_knobs.empty() ? o.best_us : o.search_best_us, trial_us(last->result));
  if (o.search_best_knobs.empty()) {
    EXPECT_EQ(o.best_timed, trial_timed(last->result));
  }
  // A winner no faster than the default gives way to it, and nothing is recorded.
  if (default_won(o)) {
    EXPECT_EQ(o.best_knobs, o.default_knobs);
    EXPECT_NE(o.recorded.find("the default won"), std::string::npos) << o.recorded;
    EXPECT_TRUE(TuningDb::open(db).entries().empty());
    std::filesystem::remove(db);
    return;
  }
  EXPECT_NE(o.recorded.find("added"), std::string::npos) << o.recorded;

  TuningDb d = TuningDb::open(db);
  ASSERT_EQ(d.entries().size(), 1u);
  EXPECT_EQ(d.entries()[0].rec.knobs, o.best_knobs);
  EXPECT_GT(d.entries()[0].rec.cublas_us, 0);
  // Timed as `loom run --bench` times: 4 MiB of inputs rotate through input sets (2x the
  // L2), and the record says so.
  EXPECT_EQ(o.best_l2, "rotate");
  EXPECT_EQ(d.entries()[0].rec.l2, "rotate");
  EXPECT_EQ(d.entries()[0].rec.timed, o.best_timed);

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

// The search with planted bad candidates: the predicted-best one faults (illegal address),
// the next hangs (infinite loop). Both are reported with their reasons, cost one trial
// each, and a verified good candidate wins.
TEST(GpuTuner, PlantedFaultAndHangAreReportedAndAGoodCandidateWins) {
  const std::string expr = "matmul(A[512,512]:f32, B[512,512]:f32)";
  const std::vector<std::string> knobs = {
      "BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=sync,STAGES=2",      // planted: faults
      "BM=64,BN=64,FM=4,FN=4,BK=8,STAGE=sync,STAGES=2",       // planted: hangs
      "BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=cp_async,STAGES=3",  // good
      "BM=32,BN=64,FM=4,FN=4,BK=16,STAGE=sync,STAGES=2"};     // good
  for (const auto& k : knobs) compile_then_require_gpu(expr, k);
  if (IsSkipped() || HasFailure()) return;
  auto cuda_of = [&](const std::string& k) {
    CompileOptions opt;
    opt.knobs = Knobs::parse(k);
    return compile_expression(expr, opt).cuda;
  };
  const std::map<std::string, std::string> planted = {
      {knobs[0], plant_fault(cuda_of(knobs[0]))}, {knobs[1], plant_hang(cuda_of(knobs[1]))}};
  MeasureWorker worker(0, LOOM_BINARY);
  MeasureFn measure = [&](const RankedCandidate& c, int reps) {
    MeasureJob j;
    j.expression = expr;
    j.knobs = c.knobs;
    j.timing.reps = reps;
    if (auto it = planted.find(c.knobs); it != planted.end()) j.cuda_override = it->second;
    return worker.measure(j, 5);
  };
  std::vector<RankedCandidate> ranked;
  for (size_t i = 0; i < knobs.size(); ++i) ranked.push_back({knobs[i], double(i + 1)});
  StrategyResult r = successive_halving(ranked, measure, Budget{60, 0});
  std::map<std::string, TrialStatus> first_status;
  for (const Trial& t : r.trials) first_status.emplace(t.knobs, t.result.status);
  EXPECT_EQ(first_status.at(knobs[0]), TrialStatus::fault);
  EXPECT_EQ(first_status.at(knobs[1]), TrialStatus::timeout);
  EXPECT_EQ(r.failures(), 2) << "each bad candidate costs one trial";
  EXPECT_TRUE(r.winner_knobs == knobs[2] || r.winner_knobs == knobs[3]) << r.winner_knobs;
  EXPECT_GT(r.winner_us, 0);
}

}  // namespace
}  // namespace loom::tune
