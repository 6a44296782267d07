// `loom run`'s memory check (driver/run_memory.h), with made-up availabilities: what a
// problem needs on each side, and the refusal that names those bytes and what the host
// and the GPU have. The CLI test (test_cli RunRefusesAProblemLargerThanMemory...) runs it
// end to end on a machine without a GPU.
#include "driver/run_memory.h"

#include <gtest/gtest.h>

#include "frontend/parser.h"

namespace loom {
namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(RunMemory, CountsInputsOutputReferenceAndBench) {
  // A 1024x512 f16 by 512x256 f16 GEMM: A 1 MiB, B 256 KiB, C 512 KiB in f16.
  Graph g = parse_expression("matmul(A[1024,512]:f16, B[512,256]:f16)");
  const int64_t a = 1024 * 512, b = 512 * 256, c = 1024 * 256;
  RunMemoryNeed plain = run_memory_need(g, nullptr, /*bench=*/false);
  // GPU: the tensors in f16, the fp64 reference's A, B, C.
  EXPECT_EQ(plain.device_bytes(), 2 * (a + b + c) + 8 * (a + b + c));
  // Host, all f64: the tensors, the inputs twice more, the reference's result, the download.
  EXPECT_EQ(plain.host_bytes(), 8 * (a + b + c) + 16 * (a + b) + 8 * c + 8 * c);
  RunMemoryNeed bench = run_memory_need(g, nullptr, /*bench=*/true);
  EXPECT_EQ(bench.device_bytes(), plain.device_bytes() + 2 * c);
  EXPECT_EQ(bench.host_bytes(), plain.host_bytes() + 16 * c);
}

TEST(RunMemory, AViewCountsTheStorageItReachesNotItsElements) {
  // A is a 1024x512 column slice of rows 1056 wide: its buffer reaches 1023 * 1056 + 512
  // elements, which the executor allocates (and fills) in full.
  Graph dense = parse_expression("matmul(A[1024,512]:f16, B[512,256]:f16)");
  Graph view = parse_expression("matmul(A[1024,512|1056]:f16, B[512,256]:f16)");
  const int64_t extra = (1023 * 1056 + 512) - 1024 * 512;
  const RunMemoryNeed d = run_memory_need(dense, nullptr, false), v = run_memory_need(view, nullptr, false);
  // The GPU holds the buffer in f16 (the fp64 reference copies the logical A, dense);
  // the host holds it as f64 and twice more for verification.
  EXPECT_EQ(v.device_bytes(), d.device_bytes() + 2 * extra);
  EXPECT_EQ(v.host_bytes(), d.host_bytes() + 8 * extra + 16 * extra);
}

TEST(RunMemory, RefusalNamesTheNeedAndWhatEachSideHas) {
  RunMemoryNeed need;
  need.host = {{"kernel tensors as f64", 3000}, {"fp64 reference", 1000}};
  need.device = {{"kernel tensors", 2048}};
  // Fits (and an unknown side is not judged).
  EXPECT_EQ(memory_refusal(need, {4000, 2048, "GPU"}), "");
  EXPECT_EQ(memory_refusal(need, {std::nullopt, std::nullopt, ""}), "");
  EXPECT_EQ(memory_refusal(need, {4000, std::nullopt, ""}), "");

  const std::string host = memory_refusal(need, {3999, std::nullopt, ""});
  EXPECT_TRUE(has(host, "does not fit in host memory")) << host;
  EXPECT_TRUE(has(host, "it needs 4000 bytes (3.9 KiB) on the host (kernel tensors as f64 2.9 KiB "
                        "+ fp64 reference 1000 B)")) << host;
  EXPECT_TRUE(has(host, "the host has 3999 bytes (3.9 KiB) available")) << host;
  EXPECT_TRUE(has(host, "the GPU was not asked yet")) << host;

  const std::string gpu = memory_refusal(need, {1 << 30, 2047, "NVIDIA H100"});
  EXPECT_TRUE(has(gpu, "does not fit in GPU memory")) << gpu;
  EXPECT_TRUE(has(gpu, "2048 bytes (2 KiB) on the GPU (kernel tensors 2 KiB)")) << gpu;
  EXPECT_TRUE(has(gpu, "the GPU (NVIDIA H100) 2047 bytes (2.0 KiB) free")) << gpu;
  EXPECT_TRUE(has(gpu, "Nothing was allocated")) << gpu;

  EXPECT_TRUE(has(memory_refusal(need, {1, 1, ""}), "does not fit in host or GPU memory"));
}

TEST(RunMemory, TheLargestTensorsDoNotOverflowTheCount) {
  // Two operands at the frontend's limit (2^48 bytes each): the sums stay exact.
  Graph g = parse_expression("matmul(A[8388608,8388608]:f32, B[8388608,8388608]:f32)");
  RunMemoryNeed need = run_memory_need(g, nullptr, true);
  EXPECT_GT(need.host_bytes(), int64_t(1) << 52);
  EXPECT_GT(need.device_bytes(), int64_t(1) << 50);
  EXPECT_TRUE(has(memory_refusal(need, {int64_t(1) << 40, int64_t(80) << 30, "H100"}),
                  "does not fit in host or GPU memory"));
}

TEST(RunMemory, HostAvailabilityIsKnownOnLinux) {
  auto bytes = host_available_bytes();
  ASSERT_TRUE(bytes.has_value());
  EXPECT_GT(*bytes, 0);
}

}  // namespace
}  // namespace loom
