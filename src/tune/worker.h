// Measurement in an isolated process. A candidate kernel can fault (an illegal address
// poisons the whole CUDA context: every later call in that process fails), hang (an
// infinite loop never returns from the synchronize) or crash the host code; none of that
// may stop the tuner or spoil the measurements of the other candidates. So each
// measurement runs in a child process — by default `loom tune-worker --device N` — that
// the tuner supervises:
//
//   - jobs and results travel over a socket on the child's stdin/stdout in the protocol
//     of worker_protocol.h; the child's stderr is kept (its tail explains a crash);
//   - the tuner waits at most `timeout_s` for each phase of a job (compile, problem
//     setup, run + verify, timing); past it the child's process group gets SIGKILL, is
//     reaped, the job is recorded `timeout`, and the next job starts a fresh child;
//   - a child that reports a CUDA fault exits (its context is unusable), one killed by a
//     signal is recorded `fault` with the signal; both are respawned for the next job;
//   - a child that exits without answering, cannot be started or breaks the protocol is
//     a `worker_error` (the worker is broken, not the candidate).
//
// One worker drives one GPU; the tuner runs one per device for --devices. Not
// thread-safe: one job at a time per worker.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "tune/measurement.h"

namespace loom::tune {

// argv of the default child: `<loom> tune-worker --device N --parent <this pid>` (the
// worker exits once orphaned: a tuner that dies leaves no worker stuck in a hung kernel
// behind). /proc/self/exe is the `loom` binary when the tuner runs inside it; tests pass
// the LOOM_BINARY path.
std::vector<std::string> worker_command(const std::string& loom_binary, int device_ordinal);

class MeasureWorker {
 public:
  explicit MeasureWorker(int device_ordinal, std::string loom_binary = "/proc/self/exe");
  // Any child program that speaks the protocol (tests use /bin/sh scripts that hang or
  // die to exercise the supervision).
  explicit MeasureWorker(std::vector<std::string> child_argv);
  MeasureWorker(const MeasureWorker&) = delete;
  MeasureWorker& operator=(const MeasureWorker&) = delete;
  ~MeasureWorker();  // kills and reaps the child

  // Never throws for anything the candidate or the child does: every failure is a
  // Measurement with a non-ok status and a reason. `timeout_s` bounds each phase; the
  // timing phase runs up to job.timing.max_seconds, so give it more than that.
  Measurement measure(const MeasureJob& job, double timeout_s);

  int spawn_count() const { return spawns_; }  // children started so far
  pid_t child_pid() const { return pid_; }     // 0 when none is running

 private:
  std::string start_child();  // empty on success, else why it failed
  void kill_child();
  // Reaps the child (unless already reaped with `reaped_status`) and kills its group:
  // "exited with status 3", "was killed by signal 11 (Segmentation fault)".
  std::string exit_description(std::optional<int> reaped_status);
  std::string stderr_tail() const;
  void drain_stderr();

  std::vector<std::string> argv_;
  pid_t pid_ = 0;
  pid_t group_ = 0;  // the child's process group (its pid), killed with it
  int sock_ = -1;    // our end of the child's stdin/stdout
  int stderr_ = -1;  // read end of the child's stderr
  std::string stderr_buf_;
  int spawns_ = 0;
};

}  // namespace loom::tune
