#include "runtime/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "ir/error.h"
#include "runtime/driver.h"

namespace loom {
namespace {

std::string seconds_str(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

double kernel_timeout_s() {
  if (const char* v = std::getenv("LOOM_KERNEL_TIMEOUT_S")) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(s > 0))
      throw Error(std::string("LOOM_KERNEL_TIMEOUT_S='") + v +
                  "' is not a positive number of seconds: set it like LOOM_KERNEL_TIMEOUT_S=30");
    return s;
  }
  return 60.0;
}

void sync_with_timeout(cudaStream_t stream, double limit_s, const std::string& what) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  // Poll: short sleeps first (most launches end within microseconds to milliseconds),
  // then at most one millisecond between queries, which costs nothing measurable.
  auto nap = std::chrono::microseconds(5);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check_cuda(e, "cudaStreamQuery (waiting for the launch)");
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (waited > limit_s)
      throw Error(what + " did not finish within " + seconds_str(limit_s) + " s: the kernel is hung, most likely a pipeline barrier waiting for an "
                  "arrival or TMA bytes that never come. Run the same knobs on a small shape "
                  "on the CPU interpreter (it reports the missing arrival as a deadlock), or "
                  "choose other knobs; LOOM_KERNEL_TIMEOUT_S changes the limit");
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace loom
