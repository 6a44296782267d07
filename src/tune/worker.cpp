#include "tune/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "ir/error.h"
#include "tune/worker_protocol.h"

extern char** environ;

namespace loom::tune {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kStderrKeep = 8192;        // bytes of the child's stderr kept for reasons
constexpr size_t kStderrInReason = 600;     // of which the reason quotes the last
constexpr double kMaxTimeoutSeconds = 1e6;  // keeps the deadline arithmetic finite
constexpr int64_t kExitCheckMs = 100;       // how often a silent child is checked for exit

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

}  // namespace

std::vector<std::string> worker_command(const std::string& loom_binary, int device_ordinal) {
  return {loom_binary, "tune-worker", "--device", std::to_string(device_ordinal), "--parent",
          std::to_string(getpid())};
}

MeasureWorker::MeasureWorker(int device_ordinal, std::string loom_binary)
    : MeasureWorker(worker_command(loom_binary, device_ordinal)) {}

MeasureWorker::MeasureWorker(std::vector<std::string> child_argv) : argv_(std::move(child_argv)) {
  LOOM_CHECK(!argv_.empty(), "a worker needs a program to run");
}

MeasureWorker::~MeasureWorker() {
  // A healthy worker exits on end of file; one stuck in a kernel does not, so it gets a
  // moment and then SIGKILL.
  if (sock_ >= 0) ::shutdown(sock_, SHUT_RDWR);
  for (int i = 0; i < 100 && pid_ > 0; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = 0;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill_child();
}

std::string MeasureWorker::start_child() {
  int sv[2], err[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return std::string("socketpair: ") + std::strerror(errno);
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(sv[0]);
    close(sv[1]);
    return std::string("pipe: ") + std::strerror(errno);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so a kill reaches whatever the child started too.
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t def;
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &def);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv;
  for (auto& a : argv_) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(sv[1]);
  close(err[1]);
  if (rc != 0) {
    close(sv[0]);
    close(err[0]);
    return std::strerror(rc);
  }
  pid_ = group_ = pid;
  sock_ = sv[0];
  stderr_ = err[0];
  set_nonblocking(sock_);
  set_nonblocking(stderr_);
  stderr_buf_.clear();
  ++spawns_;
  return "";
}

void MeasureWorker::drain_stderr() {
  if (stderr_ < 0) return;
  char buf[4096];
  while (true) {
    ssize_t n = read(stderr_, buf, sizeof buf);
    if (n > 0) {
      stderr_buf_.append(buf, size_t(n));
      if (stderr_buf_.size() > kStderrKeep) stderr_buf_.erase(0, stderr_buf_.size() - kStderrKeep);
      continue;
    }
    if (n == 0) {  // every writer is gone
      close(stderr_);
      stderr_ = -1;
    }
    return;
  }
}

std::string MeasureWorker::stderr_tail() const {
  std::string t = stderr_buf_;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (t.empty()) return "";
  if (t.size() > kStderrInReason) t = "..." + t.substr(t.size() - kStderrInReason);
  return "; its stderr: " + t;
}

void MeasureWorker::kill_child() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  // Whatever the child started is killed too, also after the child itself has exited.
  if (group_ > 0) kill(-group_, SIGKILL);
  group_ = 0;
  if (sock_ >= 0) close(sock_);
  if (stderr_ >= 0) close(stderr_);
  sock_ = stderr_ = -1;
}

std::string MeasureWorker::exit_description(std::optional<int> reaped_status) {
  int status = reaped_status.value_or(0);
  pid_t got = reaped_status ? pid_ : 0;
  // The child closed its end; give it a moment to finish exiting before forcing it.
  for (int i = 0; i < 200 && got == 0; ++i) {
    got = waitpid(pid_, &status, WNOHANG);
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string what;
  if (got == pid_) {
    if (WIFSIGNALED(status))
      what = "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
             strsignal(WTERMSIG(status)) + ")";
    else
      what = "exited with status " + std::to_string(WEXITSTATUS(status));
    pid_ = 0;
  } else {
    what = "closed its output but did not exit (killed)";
  }
  drain_stderr();
  kill_child();
  return what;
}

Measurement MeasureWorker::measure(const MeasureJob& job, double timeout_s) {
  if (pid_ == 0) {
    std::string why = start_child();
    if (!why.empty())
      return failed_measurement(TrialStatus::worker_error,
                                "cannot start the measurement worker '" + argv_[0] + "': " + why);
  }
  stderr_buf_.clear();  // a failure's reason quotes what the child said during this job
  const std::string out = encode_message(job_message(job));
  size_t written = 0;
  MessageDecoder decoder;
  std::string phase = "start";
  double phase_host_s = 0;  // the host work the worker announced for this phase
  timeout_s = std::clamp(timeout_s, 1e-3, kMaxTimeoutSeconds);
  auto timeout =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  Clock::time_point deadline = Clock::now() + timeout;

  auto died = [&](std::optional<int> reaped_status) {
    std::string how = exit_description(reaped_status);
    bool signaled = how.rfind("was killed by signal", 0) == 0;
    return failed_measurement(signaled ? TrialStatus::fault : TrialStatus::worker_error,
                              "the measurement worker " + how + " during phase '" + phase +
                                  "' without answering" + stderr_tail());
  };
  // Phases restart the clock; the result ends the job. Throws loom::Error on garbage.
  auto take_result = [&]() -> std::optional<Measurement> {
    while (auto m = decoder.next()) {
      if (field(*m, "type").value_or("") == "phase") {
        phase = field(*m, "phase").value_or("?");
        phase_host_s = std::min(phase_host_seconds(*m), kMaxTimeoutSeconds);
        deadline = Clock::now() + timeout +
                   std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(phase_host_s));
        continue;
      }
      Measurement res = result_from_message(*m);
      // A worker that reported a fault exits (its context is poisoned); reap it now so
      // the next job starts a fresh one.
      if (res.status == TrialStatus::fault) kill_child();
      return res;
    }
    return std::nullopt;
  };
  // Reads what the child has written; false at end of file or on an error.
  auto receive = [&]() {
    char buf[65536];
    while (true) {
      ssize_t r = recv(sock_, buf, sizeof buf, MSG_DONTWAIT);
      if (r > 0) {
        decoder.feed(buf, size_t(r));
        continue;
      }
      return r < 0 && (errno == EAGAIN || errno == EINTR);
    }
  };

  try {
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        drain_stderr();
        std::string tail = stderr_tail();
        kill_child();
        // A phase with announced host work (a problem's set-up) is slow on the host, not
        // hung on the GPU: say which, and what buys it more time.
        std::string why = phase_host_s > 0
                              ? " (host work, " + seconds_text(phase_host_s) +
                                    " allowed beyond the limit; raise --timeout)"
                              : " (a hung kernel?)";
        return failed_measurement(TrialStatus::timeout,
                                  "no answer within " + seconds_text(timeout_s + phase_host_s) +
                                      " in phase '" + phase + "'" + why +
                                      ": the worker was killed" + tail);
      }
      pollfd fds[2] = {{sock_, short(POLLIN | (written < out.size() ? POLLOUT : 0)), 0},
                       {stderr_, POLLIN, 0}};
      int wait_ms = int(std::min<int64_t>(left.count() + 1, kExitCheckMs));
      if (poll(fds, stderr_ >= 0 ? 2 : 1, wait_ms) < 0 && errno != EINTR) {
        kill_child();
        return failed_measurement(TrialStatus::worker_error,
                                  std::string("poll: ") + std::strerror(errno));
      }
      if (stderr_ >= 0 && fds[1].revents) drain_stderr();
      if (fds[0].revents & POLLOUT) {
        ssize_t w = send(sock_, out.data() + written, out.size() - written,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) written += size_t(w);
        else if (w < 0 && errno != EAGAIN && errno != EINTR) return died(std::nullopt);
      }
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        bool open = receive();
        if (auto res = take_result()) return *res;
        if (!open) return died(std::nullopt);
      }
      // Something the child started may keep the socket open after the child exited (no
      // end of file then): notice the exit itself, after taking what it wrote.
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        receive();
        if (auto res = take_result()) {
          kill_child();
          return *res;
        }
        return died(status);
      }
    }
  } catch (const Error& e) {
    drain_stderr();
    std::string tail = stderr_tail();
    kill_child();
    return failed_measurement(TrialStatus::worker_error, std::string(e.what()) + tail);
  }
}

}  // namespace loom::tune
