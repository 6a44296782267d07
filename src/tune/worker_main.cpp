#include "tune/worker_main.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ir/error.h"
#include "tune/trial_runner.h"
#include "tune/worker_protocol.h"

namespace loom::tune {
namespace {

constexpr int kExitAfterFault = 3;

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t w = write(fd, s.data() + done, s.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += size_t(w);
  }
  return true;
}

// The worker sees only its own GPU, as device 0: CUDA_VISIBLE_DEVICES is narrowed to the
// N-th visible device before CUDA initializes, so every device-0 default in Loom (the
// reference DGEMM, the cuBLAS handle) lands on the GPU this worker measures.
void select_device(int ordinal) {
  std::string id = std::to_string(ordinal);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::vector<std::string> ids;
    std::stringstream ss(visible);
    std::string item;
    while (std::getline(ss, item, ',')) ids.push_back(item);
    if (ordinal < int(ids.size())) id = ids[size_t(ordinal)];
  }
  setenv("CUDA_VISIBLE_DEVICES", id.c_str(), 1);
}

}  // namespace

int tune_worker_main(int argc, char** argv) {
  int device = 0;
  pid_t parent = 0;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else if (a == "--parent" && i + 1 < argc) {
      parent = pid_t(std::atol(argv[++i]));
    } else {
      std::cerr << "loom tune-worker: unknown argument '" << a
                << "' (usage: loom tune-worker --device N [--parent PID]; the tuner starts it)\n";
      return 2;
    }
  }
  // The protocol owns the original stdout; anything else printed goes to stderr, which
  // the tuner keeps for its failure reports.
  const int out = dup(STDOUT_FILENO);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  select_device(device);
  // The tuner may die (Ctrl-C, a crash) while this process is stuck in a hung kernel, and
  // it runs in its own process group, so no signal reaches it: a watchdog ends it once
  // `parent` is no longer its parent.
  if (parent > 0)
    std::thread([parent] {
      while (getppid() == parent) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      _exit(0);
    }).detach();
  TrialRunner runner(0);

  MessageDecoder decoder;
  char buf[65536];
  while (true) {
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    decoder.feed(buf, size_t(n));
    while (true) {
      std::optional<Message> m;
      try {
        m = decoder.next();
      } catch (const Error& e) {
        std::cerr << "loom tune-worker: " << e.what() << "\n";
        return 2;
      }
      if (!m) break;
      Measurement r;
      bool poisoned = false;
      try {
        MeasureJob job = job_from_message(*m);
        r = runner.run(
            job,
            [&](const std::string& p, double host_s) {
              write_all(out, encode_message(phase_message(p, host_s)));
            },
            poisoned);
      } catch (const std::exception& e) {
        r.status = TrialStatus::worker_error;
        r.reason = e.what();
      }
      if (!write_all(out, encode_message(result_message(r)))) return 2;
      // Skip static destructors: with a poisoned context they would only fail again.
      if (poisoned || r.status == TrialStatus::fault) _exit(kExitAfterFault);
    }
  }
}

}  // namespace loom::tune
