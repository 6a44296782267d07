#include "runtime/device.h"

#include <gtest/gtest.h>

#include "ir/error.h"
#include "runtime/driver.h"

namespace loom {
namespace {

// CI has no GPU and the GPU machine has one: both outcomes are legal, but each must be
// complete — a device with sane numbers, or a reason a person can act on.
TEST(Device, ProbeReturnsADeviceOrAReason) {
  std::string why;
  auto dev = probe_device(0, &why);
  if (!dev) {
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(why.find('\n'), std::string::npos) << "one line: " << why;
    EXPECT_THROW(driver(), Error) << "the driver must not resolve without a device";
    try {
      driver();
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), why);
    }
    return;
  }
  EXPECT_FALSE(dev->name.empty());
  EXPECT_GE(dev->cc_major, 7);
  EXPECT_GT(dev->sm_count, 0);
  EXPECT_GT(dev->l2_bytes, 0);
  EXPECT_GE(dev->smem_per_block_optin, 48 * 1024);
  EXPECT_GT(dev->regs_per_sm, 0);
  EXPECT_GT(dev->clock_khz, 0);
  EXPECT_GT(dev->global_mem_bytes, 0);
  EXPECT_GE(dev->driver_version, dev->runtime_version);
}

TEST(Device, ProbeOfAMissingOrdinalGivesAReason) {
  std::string why;
  EXPECT_FALSE(probe_device(1 << 20, &why).has_value());
  EXPECT_FALSE(why.empty());
}

TEST(Device, ArchNeedsTheASuffixOnlyForHopper) {
  DeviceInfo d;
  d.cc_major = 9, d.cc_minor = 0;
  EXPECT_EQ(d.arch(), "sm_90a");
  d.cc_major = 8, d.cc_minor = 0;
  EXPECT_EQ(d.arch(), "sm_80");
  d.cc_major = 8, d.cc_minor = 6;
  EXPECT_EQ(d.arch(), "sm_86");
  d.cc_major = 8, d.cc_minor = 9;
  EXPECT_EQ(d.arch(), "sm_89");
}

}  // namespace
}  // namespace loom
