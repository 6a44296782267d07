#include "runtime/ptxas_report.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

// A log as NVRTC 13.0 prints it for sm_80 (sm_90a omits the cmem item), with a non-entry
// function and a spilling kernel.
const char* kLog = R"(ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z6helperi
ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'k3' for 'sm_80'
ptxas info    : Function properties for k3
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem, 360 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compile time = 3.563 ms
ptxas info    : Compiling entry function '_Z2spPfi' for 'sm_80'
ptxas info    : Function properties for _Z2spPfi
ptxas         .     4056 bytes stack frame, 4044 bytes spill stores, 8068 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 4056 bytes cumulative stack size
ptxas info    : Compile time = 296.129 ms
)";

TEST(PtxasReport, ParsesEveryEntryFunction) {
  auto r = parse_ptxas_report(kLog);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_TRUE(r.count("k3"));
  ASSERT_TRUE(r.count("_Z2spPfi"));
  EXPECT_FALSE(r.count("_Z6helperi")) << "non-entry functions are not kernels";

  const ResourceReport& k3 = r["k3"];
  EXPECT_EQ(k3.registers, 10);
  EXPECT_EQ(k3.barriers, 1);
  EXPECT_EQ(k3.shared_bytes, 1024);
  EXPECT_EQ(k3.constant_bytes, 368);
  EXPECT_EQ(k3.stack_frame_bytes, 0);

  const ResourceReport& sp = r["_Z2spPfi"];
  EXPECT_EQ(sp.registers, 32);
  EXPECT_EQ(sp.shared_bytes, 0);
  EXPECT_EQ(sp.stack_frame_bytes, 4056);
  EXPECT_EQ(sp.spill_store_bytes, 4044);
  EXPECT_EQ(sp.spill_load_bytes, 8068);
}

TEST(PtxasReport, EmptyLogHasNoKernels) { EXPECT_TRUE(parse_ptxas_report("").empty()); }

// ptxas's note when it serializes a kernel's wgmma (NVRTC 13.0, sm_90a: the attention kernel
// at BLOCK_N=176 with ATTN_PEEL_MASK=1), with a second kernel it leaves alone and a note for
// a function that is not an entry.
const char* kSerializedLog = R"(ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the function 'k_attention'
ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls in the function '_Z6helperv'
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_attention' for 'sm_90a'
ptxas info    : Function properties for k_attention
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers
ptxas info    : Compiling entry function 'k_other' for 'sm_90a'
ptxas info    : Function properties for k_other
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 90 registers, used 1 barriers
)";

TEST(PtxasReport, SerializedWgmmaNamesTheKernelAndTheReason) {
  auto r = parse_ptxas_report(kSerializedLog);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r["k_attention"].wgmma_serialized, "insufficient register resources");
  EXPECT_EQ(r["k_attention"].registers, 168);
  EXPECT_EQ(r["k_attention"].spill_store_bytes, 0);
  EXPECT_EQ(r["k_other"].wgmma_serialized, "");
  const auto s = serialized_wgmma(kSerializedLog);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.at("_Z6helperv"), "the presence of Extern calls");
  EXPECT_TRUE(parse_ptxas_report(kLog)["k3"].wgmma_serialized.empty());
}

}  // namespace
}  // namespace loom
