// Process supervision of the measurement worker, without a GPU: the real worker reports
// the missing GPU cleanly; stand-in children (small /bin/sh programs) hang, crash, exit,
// babble or answer, and the supervisor turns each into the right status, kills and
// reaps what it must, and starts a fresh child for the next job. The planted bad kernels
// of the GPU test compile here with NVRTC, so that test's cases are valid.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../../gpu/planted_kernels.h"
#include "driver/compile.h"
#include "driver/run.h"
#include "runtime/device.h"
#include "runtime/nvrtc.h"
#include "tune/worker.h"
#include "tune/worker_protocol.h"

namespace loom::tune {
namespace {

MeasureJob small_job() {
  MeasureJob j;
  j.expression = "matmul(A[64,64]:f32, B[64,64]:f32)";
  j.knobs = "BM=32,BN=32,FM=2,FN=2";
  j.timing.reps = 3;
  return j;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Processes of process group `pgid` that are not zombies, from /proc/<pid>/stat
// ("pid (comm) state ppid pgrp ...").
int live_processes_in_group(int pgid) {
  int live = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream f(e.path() / "stat");
    std::string stat;
    if (!f || !std::getline(f, stat)) continue;
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    int ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z') ++live;
  }
  return live;
}

bool process_gone(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  return !f || !std::getline(f, stat) || stat.find(") Z ") != std::string::npos;
}

std::vector<std::string> sh(const std::string& script, const std::string& arg = "") {
  std::vector<std::string> argv = {"/bin/sh", "-c", script, "sh"};
  if (!arg.empty()) argv.push_back(arg);
  return argv;
}

// A child that answers one job with `reply` and then hangs (never reads again).
std::vector<std::string> answers_once(const Measurement& reply) {
  std::string bytes =
      encode_message(phase_message("compile")) + encode_message(result_message(reply));
  return sh("printf '%s' \"$1\"; exec sleep 30", bytes);
}

TEST(MeasureWorker, RealWorkerWithoutGpuIsAWorkerError) {
  std::string why;
  if (probe_device(0, &why))
    GTEST_SKIP() << "a GPU is present: tests/gpu/test_tune_worker.cpp covers it";
  MeasureWorker w(0, LOOM_BINARY);
  for (int i = 0; i < 2; ++i) {
    Measurement m = w.measure(small_job(), 60);
    EXPECT_EQ(m.status, TrialStatus::worker_error)
        << trial_status_name(m.status) << ": " << m.reason;
    EXPECT_NE(m.reason.find("no GPU"), std::string::npos) << m.reason;
  }
  EXPECT_EQ(w.spawn_count(), 1) << "a worker that answered stays up";
  EXPECT_NE(w.child_pid(), 0);
}

TEST(MeasureWorker, RealWorkerRejectsUnknownArguments) {
  MeasureWorker w(std::vector<std::string>{LOOM_BINARY, "tune-worker", "--bogus"});
  Measurement m = w.measure(small_job(), 30);
  EXPECT_EQ(m.status, TrialStatus::worker_error);
  EXPECT_NE(m.reason.find("exited with status 2"), std::string::npos) << m.reason;
  EXPECT_NE(m.reason.find("unknown argument '--bogus'"), std::string::npos) << m.reason;
}

TEST(MeasureWorker, OrphanedRealWorkerExits) {
  // A shell starts the worker in the background, in a session of its own (out of reach
  // of the supervisor's group kill), prints its pid and exits: the worker is orphaned, as
  // when the tuner dies, with its stdin still open, and must end itself.
  std::string script = std::string("sleep 30 | setsid \"") + LOOM_BINARY +
                       "\" tune-worker --device 0 --parent $$ >/dev/null 2>&1 & echo $! >&2; exit 9";
  MeasureWorker w(sh(script));
  Measurement m = w.measure(small_job(), 10);
  size_t at = m.reason.find("its stderr: ");
  ASSERT_NE(at, std::string::npos) << m.reason;
  pid_t pid = pid_t(std::stol(m.reason.substr(at + 12)));
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    gone = process_gone(pid);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "orphaned worker " << pid << " still runs";
}

TEST(MeasureWorker, HungChildIsKilledWithinTheLimitAndReplaced) {
  MeasureWorker w(sh("exec sleep 30"));
  auto t0 = std::chrono::steady_clock::now();
  Measurement m = w.measure(small_job(), 0.3);
  double took = seconds_since(t0);
  EXPECT_EQ(m.status, TrialStatus::timeout) << m.reason;
  EXPECT_NE(m.reason.find("no answer within 0.3 s"), std::string::npos) << m.reason;
  EXPECT_GE(took, 0.3);
  EXPECT_LT(took, 2.0);
  EXPECT_EQ(w.child_pid(), 0) << "killed and reaped";
  m = w.measure(small_job(), 0.2);
  EXPECT_EQ(m.status, TrialStatus::timeout);
  EXPECT_EQ(w.spawn_count(), 2);
}

// A set-up phase that announces host work gets that much beyond the limit: a child that
// takes 0.6 s after announcing 2 s answers under a 0.3 s limit. One that overruns its
// allowance is killed, and the reason says host work, not a hung kernel.
TEST(MeasureWorker, AnnouncedHostWorkExtendsThatPhaseOnly) {
  Measurement ok;
  ok.status = TrialStatus::ok;
  ok.median_us = 12.5;
  ok.reps = 3;
  std::string slow_setup = encode_message(phase_message("setup: inputs", 2.0));
  std::string answer = encode_message(phase_message("run")) + encode_message(result_message(ok));
  MeasureWorker patient(std::vector<std::string>{
      "/bin/sh", "-c", "printf '%s' \"$1\"; sleep 0.6; printf '%s' \"$2\"; exec sleep 30", "sh",
      slow_setup, answer});
  Measurement m = patient.measure(small_job(), 0.3);
  EXPECT_EQ(m.status, TrialStatus::ok) << m.reason;
  EXPECT_EQ(m.median_us, 12.5);

  // The same child whose run phase (no allowance) takes 0.6 s is killed at 0.3 s.
  MeasureWorker gpu_bound(std::vector<std::string>{
      "/bin/sh", "-c", "printf '%s' \"$1\"; sleep 0.6; printf '%s' \"$2\"; exec sleep 30", "sh",
      encode_message(phase_message("run")), encode_message(result_message(ok))});
  m = gpu_bound.measure(small_job(), 0.3);
  EXPECT_EQ(m.status, TrialStatus::timeout) << m.reason;
  EXPECT_NE(m.reason.find("(a hung kernel?)"), std::string::npos) << m.reason;

  // Past its allowance, a set-up phase is killed too, and named as host work.
  MeasureWorker overrun(std::vector<std::string>{
      "/bin/sh", "-c", "printf '%s' \"$1\"; exec sleep 30", "sh",
      encode_message(phase_message("setup: inputs", 0.2))});
  auto t0 = std::chrono::steady_clock::now();
  m = overrun.measure(small_job(), 0.2);
  EXPECT_EQ(m.status, TrialStatus::timeout) << m.reason;
  EXPECT_GE(seconds_since(t0), 0.4);
  EXPECT_LT(seconds_since(t0), 3.0);
  EXPECT_NE(m.reason.find("in phase 'setup: inputs' (host work"), std::string::npos) << m.reason;
  EXPECT_NE(m.reason.find("raise --timeout"), std::string::npos) << m.reason;
  EXPECT_EQ(m.reason.find("hung kernel"), std::string::npos) << m.reason;
}

TEST(MeasureWorker, LeftoversOfAnExitedChildAreKilled) {
  MeasureWorker w(sh("sleep 30 & echo $$ >&2; exit 5"));
  Measurement m = w.measure(small_job(), 10);
  EXPECT_EQ(m.status, TrialStatus::worker_error) << m.reason;
  size_t at = m.reason.find("its stderr: ");
  ASSERT_NE(at, std::string::npos) << m.reason;
  int group = std::stoi(m.reason.substr(at + 12));
  int live = 1;
  for (int i = 0; i < 200 && live > 0; ++i) {
    live = live_processes_in_group(group);
    if (live > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(live, 0) << "the background sleep of group " << group << " survives";
}

TEST(MeasureWorker, KillReachesTheChildsOwnChildren) {
  // The shell forks `sleep` and waits for it: killing the shell alone would leave the
  // sleep running. The shell prints its pid, which is its process group's id.
  MeasureWorker w(sh("echo $$ >&2; sleep 30; true"));
  Measurement m = w.measure(small_job(), 0.5);
  ASSERT_EQ(m.status, TrialStatus::timeout);
  size_t at = m.reason.find("its stderr: ");
  ASSERT_NE(at, std::string::npos) << m.reason;
  int group = std::stoi(m.reason.substr(at + 12));
  // SIGKILL is delivered asynchronously to the orphaned sleep, which may then linger as
  // a zombie until its new parent reaps it: wait a little for it to die.
  int live = 1;
  for (int i = 0; i < 200 && live > 0; ++i) {
    live = live_processes_in_group(group);
    if (live > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(live, 0) << "process group " << group << " survives";
}

TEST(MeasureWorker, CrashIsAFaultWithTheSignal) {
  MeasureWorker w(sh("read line; kill -SEGV $$"));
  Measurement m = w.measure(small_job(), 10);
  EXPECT_EQ(m.status, TrialStatus::fault) << m.reason;
  EXPECT_NE(m.reason.find("signal 11"), std::string::npos) << m.reason;
  EXPECT_EQ(w.child_pid(), 0);
  m = w.measure(small_job(), 10);
  EXPECT_EQ(m.status, TrialStatus::fault);
  EXPECT_EQ(w.spawn_count(), 2);
}

TEST(MeasureWorker, SilentExitIsAWorkerErrorWithItsStderr) {
  MeasureWorker w(sh("echo 'cannot find libfoo' >&2; exit 4"));
  Measurement m = w.measure(small_job(), 10);
  EXPECT_EQ(m.status, TrialStatus::worker_error) << m.reason;
  EXPECT_NE(m.reason.find("exited with status 4"), std::string::npos) << m.reason;
  EXPECT_NE(m.reason.find("cannot find libfoo"), std::string::npos) << m.reason;
}

TEST(MeasureWorker, MissingProgramIsAWorkerError) {
  MeasureWorker w(std::vector<std::string>{"/nonexistent/loom", "tune-worker"});
  Measurement m = w.measure(small_job(), 10);
  EXPECT_EQ(m.status, TrialStatus::worker_error);
  EXPECT_NE(m.reason.find("cannot start the measurement worker"), std::string::npos) << m.reason;
}

TEST(MeasureWorker, GarbageOnTheProtocolIsAWorkerError) {
  MeasureWorker w(sh("echo this-is-not-the-protocol; exec sleep 30"));
  Measurement m = w.measure(small_job(), 10);
  EXPECT_EQ(m.status, TrialStatus::worker_error) << m.reason;
  EXPECT_NE(m.reason.find("protocol"), std::string::npos) << m.reason;
  EXPECT_EQ(w.child_pid(), 0) << "a child that breaks the protocol is not trusted again";
}

TEST(MeasureWorker, AnswerThenHangThenFreshChildAnswers) {
  Measurement ok;
  ok.status = TrialStatus::ok;
  ok.median_us = 123.5;
  ok.reps = 3;
  MeasureWorker w(answers_once(ok));
  Measurement a = w.measure(small_job(), 5);
  EXPECT_EQ(a.status, TrialStatus::ok) << a.reason;
  EXPECT_EQ(a.median_us, 123.5);
  EXPECT_EQ(a.l2, "");  // a stand-in that does not say how it timed
  Measurement b = w.measure(small_job(), 0.3);
  EXPECT_EQ(b.status, TrialStatus::timeout) << b.reason;
  Measurement c = w.measure(small_job(), 5);
  EXPECT_EQ(c.status, TrialStatus::ok) << c.reason;
  EXPECT_EQ(w.spawn_count(), 2);
}

// How the worker kept the L2 cold reaches the tuner with the time: the winner's record
// carries it (database.h).
TEST(MeasureWorker, TheTimingsL2MethodComesBackWithTheTime) {
  Measurement ok;
  ok.status = TrialStatus::ok;
  ok.median_us = 17.5;
  ok.reps = 5;
  ok.l2 = "rotate";
  ok.input_sets = 4;
  MeasureWorker w(answers_once(ok));
  Measurement a = w.measure(small_job(), 5);
  ASSERT_EQ(a.status, TrialStatus::ok) << a.reason;
  EXPECT_EQ(a.l2, "rotate");
  EXPECT_EQ(a.input_sets, 4);
}

TEST(MeasureWorker, ReportedFaultRetiresTheChild) {
  Measurement fault;
  fault.status = TrialStatus::fault;
  fault.reason = "checked run: an illegal memory access was encountered";
  MeasureWorker w(answers_once(fault));
  Measurement a = w.measure(small_job(), 5);
  EXPECT_EQ(a.status, TrialStatus::fault);
  EXPECT_EQ(a.reason, fault.reason);
  EXPECT_EQ(w.child_pid(), 0);
  w.measure(small_job(), 5);
  EXPECT_EQ(w.spawn_count(), 2);
}

TEST(MeasureWorker, LargeJobsDoNotDeadlockAChildThatIsNotReading) {
  // 1 MB of override source outgrows the socket buffer; the child never reads it.
  MeasureJob j = small_job();
  j.cuda_override = std::string(1 << 20, 'x');
  MeasureWorker w(sh("exec sleep 30"));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(w.measure(j, 0.3).status, TrialStatus::timeout);
  EXPECT_LT(seconds_since(t0), 2.0);
}

TEST(MeasureWorker, DestructorReapsTheChild) {
  pid_t pid = 0;
  {
    Measurement ok;
    ok.status = TrialStatus::ok;
    MeasureWorker w(answers_once(ok));
    EXPECT_EQ(w.measure(small_job(), 5).status, TrialStatus::ok);
    pid = w.child_pid();
    ASSERT_GT(pid, 0);
  }
  EXPECT_TRUE(process_gone(pid));
}

// The GPU test's planted kernels must be valid CUDA with the generated signatures.
TEST(PlantedKernels, CompileWithNvrtc) {
  CompileOptions opt;
  opt.knobs = Knobs::parse("BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=cp_async,STAGES=3");
  opt.target = Target::for_arch("sm_90a");
  std::string cuda = compile_expression("matmul(A[512,512]:f32, B[512,512]:f32)", opt).cuda;
  for (const std::string& planted :
       {plant_fault(cuda), plant_hang(cuda), plant_wrong_answer(cuda)}) {
    EXPECT_NE(planted, cuda);
    EXPECT_NO_THROW(compile(nvrtc_request(planted, "sm_90a"), nullptr));
  }
  EXPECT_THROW(plant_fault("no kernel here"), Error);
}

}  // namespace
}  // namespace loom::tune
