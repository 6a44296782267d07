// The kernel watchdog's limit (LOOM_KERNEL_TIMEOUT_S); the timeout itself needs a running
// kernel and is tested on the GPU (tests/gpu/test_runtime.cpp).
#include <gtest/gtest.h>

#include <cstdlib>

#include "ir/error.h"
#include "runtime/watchdog.h"

namespace loom {
namespace {

TEST(KernelWatchdog, LimitFromTheEnvironment) {
  unsetenv("LOOM_KERNEL_TIMEOUT_S");
  EXPECT_EQ(kernel_timeout_s(), 60.0);
  setenv("LOOM_KERNEL_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(kernel_timeout_s(), 2.5);
  for (const char* bad : {"0", "-3", "soon", "5s", ""}) {
    setenv("LOOM_KERNEL_TIMEOUT_S", bad, 1);
    try {
      kernel_timeout_s();
      ADD_FAILURE() << "'" << bad << "' must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("LOOM_KERNEL_TIMEOUT_S=30"), std::string::npos) << e.what();
    }
  }
  unsetenv("LOOM_KERNEL_TIMEOUT_S");
}

}  // namespace
}  // namespace loom
