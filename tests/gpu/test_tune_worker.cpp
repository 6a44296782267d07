// The tuner's measurement worker on a GPU: a good candidate measures ok (verified, then
// timed); planted bad candidates (tests/gpu/planted_kernels.h) come back as a fault, a
// timeout within the limit and a wrong answer; after each, the next good candidate still
// measures ok in a fresh or surviving worker. Skips with the reason on a GPU-less machine
// (after compiling every case, so a broken case fails CPU CI).
#include <gtest/gtest.h>

#include <chrono>

#include "compile_first.h"
#include "planted_kernels.h"
#include "tune/worker.h"

namespace loom::tune {
namespace {

const char* kExpr = "matmul(A[512,512]:f32, B[512,512]:f32)";
const char* kKnobs = "BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=cp_async,STAGES=3";
const char* kBf16Expr = "matmul(A[256,384]:bf16, B[384,640]:bf16)";

MeasureJob job(const std::string& expr, const std::string& knobs, const std::string& cuda = "") {
  MeasureJob j;
  j.expression = expr;
  j.knobs = knobs;
  j.timing.reps = 10;
  j.cuda_override = cuda;
  return j;
}

std::string generated_cuda(const std::string& expr, const std::string& knobs) {
  CompileOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.target = Target::for_arch("sm_90a");
  return compile_expression(expr, opt).cuda;
}

class GpuTuneWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    expect_case_compiles(kExpr, kKnobs);
    expect_case_compiles(kBf16Expr, "");
    if (HasFailure()) GTEST_SKIP() << "not run: a case does not compile";
    std::string why;
    if (!probe_device(0, &why)) GTEST_SKIP() << "no GPU: " << why;
  }
};

void expect_ok(const Measurement& m, const std::string& what) {
  EXPECT_EQ(m.status, TrialStatus::ok)
      << what << ": " << trial_status_name(m.status) << ": " << m.reason;
  EXPECT_GT(m.median_us, 0) << what;
  EXPECT_GT(m.reps, 0) << what;
  EXPECT_LE(m.rel_error, m.threshold) << what;
}

TEST_F(GpuTuneWorker, GoodCandidatesSurviveFaultHangAndWrongAnswer) {
  MeasureWorker w(0, LOOM_BINARY);
  const std::string cuda = generated_cuda(kExpr, kKnobs);
  expect_ok(w.measure(job(kExpr, kKnobs), 60), "first good candidate");
  EXPECT_EQ(w.spawn_count(), 1);

  Measurement fault = w.measure(job(kExpr, kKnobs, plant_fault(cuda)), 60);
  EXPECT_EQ(fault.status, TrialStatus::fault)
      << trial_status_name(fault.status) << ": " << fault.reason;
  EXPECT_NE(fault.reason.find("context poisoned"), std::string::npos) << fault.reason;
  expect_ok(w.measure(job(kExpr, kKnobs), 60), "good candidate after the fault");
  EXPECT_EQ(w.spawn_count(), 2) << "the faulted worker must be replaced";

  const double limit = 5;
  auto t0 = std::chrono::steady_clock::now();
  Measurement hang = w.measure(job(kExpr, kKnobs, plant_hang(cuda)), limit);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(hang.status, TrialStatus::timeout)
      << trial_status_name(hang.status) << ": " << hang.reason;
  EXPECT_NE(hang.reason.find("phase 'run'"), std::string::npos) << hang.reason;
  // Each phase may take up to the limit; the problem is already set up, so compile and
  // the hung run are all that can count.
  EXPECT_LT(took, 2 * limit + 5);
  expect_ok(w.measure(job(kExpr, kKnobs), 60), "good candidate after the hang");
  EXPECT_EQ(w.spawn_count(), 3) << "the hung worker must be replaced";

  Measurement wrong = w.measure(job(kExpr, kKnobs, plant_wrong_answer(cuda)), 60);
  EXPECT_EQ(wrong.status, TrialStatus::wrong_answer)
      << trial_status_name(wrong.status) << ": " << wrong.reason;
  expect_ok(w.measure(job(kExpr, kKnobs), 60), "good candidate after the wrong answer");
  EXPECT_EQ(w.spawn_count(), 3) << "a wrong answer leaves the context healthy: no respawn";
}

TEST_F(GpuTuneWorker, SwitchesProblemsAndReportsCompileErrors) {
  MeasureWorker w(0, LOOM_BINARY);
  expect_ok(w.measure(job(kBf16Expr, ""), 60), "bf16 defaults");
  expect_ok(w.measure(job(kExpr, kKnobs), 60), "f32 after bf16");
  Measurement bad = w.measure(job(kExpr, "BM=64,BN=64,FM=4,FN=4,BK=16", "this is not CUDA"), 60);
  EXPECT_EQ(bad.status, TrialStatus::compile_error) << bad.reason;
  expect_ok(w.measure(job(kBf16Expr, ""), 60), "bf16 again");
  EXPECT_EQ(w.spawn_count(), 1);
}

}  // namespace
}  // namespace loom::tune
