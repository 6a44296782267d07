// The cold-L2 methods of the timing protocol on a GPU (bench/timing_plan.h): rotation
// cycles input sets across candidates and inside the replay graphs, the read flush
// kernel builds and runs, and `loom run --bench` rotates a small problem's inputs and
// reports graph ratios. Every test skips with probe_device's reason without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "bench/cuda_call.h"
#include "bench/report.h"
#include "bench/timing.h"
#include "driver/run.h"
#include "runtime/device.h"

namespace loom {
namespace {

class TimingL2Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!probe_device(0, &why)) GTEST_SKIP() << why;
  }
};

struct Buffer {
  explicit Buffer(size_t bytes) { LOOM_CUDA_RT(cudaMalloc(&p, bytes)); }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* p = nullptr;
};

TEST_F(TimingL2Gpu, RotationCyclesSetsOverCandidatesAndGraphs) {
  constexpr int kSets = 4;
  std::vector<std::unique_ptr<Buffer>> bufs;
  for (int i = 0; i < kSets; ++i) bufs.push_back(std::make_unique<Buffer>(4096));
  std::vector<std::pair<int, int>> seen;  // (candidate, set), in enqueue order
  auto make = [&](int cand) {
    return [&, cand](cudaStream_t s, int set) {
      seen.push_back({cand, set});
      LOOM_CUDA_RT(cudaMemsetAsync(bufs[size_t(set)]->p, cand, 4096, s));
    };
  };
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  TimingOptions opt;
  opt.warmup = 1;
  opt.reps = 6;
  opt.l2 = L2Method::rotate;
  opt.input_sets = kSets;
  std::vector<Timing> t = time_candidates({make(0), make(1)}, s, opt);
  LOOM_CUDA_RT(cudaStreamDestroy(s));
  ASSERT_EQ(t.size(), 2u);
  // Warm-up and timed launches: one run-wide sequence, consecutive sets.
  const size_t timed = size_t(2 * (opt.warmup + opt.reps));
  ASSERT_GE(seen.size(), timed);
  for (size_t i = 0; i < timed; ++i) {
    EXPECT_EQ(seen[i].first, int(i % 2)) << i;
    EXPECT_EQ(seen[i].second, int(i % kSets)) << i;
  }
  // Then each candidate's graph capture: whole passes over the sets.
  ASSERT_EQ(seen.size(), timed + 2 * size_t(graph_launches(kSets)));
  for (size_t i = timed; i < seen.size(); ++i)
    EXPECT_EQ(seen[i].second, int((i - timed) % size_t(kSets))) << i;
  for (const Timing& x : t) ASSERT_TRUE(x.graph_median_us.has_value());
}

TEST_F(TimingL2Gpu, ReadFlushRunsAndColdCopiesAreNotFaster) {
  // 16 MiB fits in an H100's or H200's L2: with L2 off the copy's source stays warm.
  const size_t bytes = 16u << 20;
  Buffer src(bytes), dst(bytes);
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  auto copy = [&](cudaStream_t st) {
    LOOM_CUDA_RT(cudaMemcpyAsync(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice, st));
  };
  TimingOptions opt;
  opt.reps = 30;
  opt.graph_replay_if_short = false;
  std::vector<double> median;
  for (L2Method m : {L2Method::off, L2Method::read, L2Method::flush}) {
    opt.l2 = m;
    Timing t = time_interleaved({copy}, s, opt)[0];
    std::printf("16 MiB copy, L2 %s: %.1f us\n", l2_method_name(m), t.median_us);
    EXPECT_GT(t.median_us, 0.0);
    median.push_back(t.median_us);
  }
  LOOM_CUDA_RT(cudaStreamDestroy(s));
  EXPECT_GE(median[1], 0.9 * median[0]) << "a read-flushed copy ran faster than a warm one";
}

TEST_F(TimingL2Gpu, RunBenchRotatesSmallInputsAndReportsGraphRatios) {
  RunOptions opt;
  opt.bench = true;
  opt.timing.reps = 20;
  opt.use_cache = false;
  // 2.1 MiB of inputs: ~48-57 sets for twice an H100's or H200's L2.
  RunReport r = run_expression("matmul(A[64,1024]:bf16, B[1024,1024]:bf16)", opt);
  std::printf("%s", format_run_report(r).c_str());
  ASSERT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.header.find("rotate over "), std::string::npos) << r.header;
  ASSERT_EQ(r.backends.size(), 2u);
  for (const auto& b : r.backends) {
    EXPECT_LT(b.timing.median_us, kGraphReplayBelowUs) << b.name;
    EXPECT_TRUE(b.timing.graph_median_us.has_value()) << b.name;
  }
  EXPECT_NE(format_run_report(r).find("graph vs cuBLAS"), std::string::npos);
}

TEST_F(TimingL2Gpu, RunBenchHonoursAnExplicitMethod) {
  RunOptions opt;
  opt.bench = true;
  opt.timing.reps = 10;
  opt.l2 = L2Request::flush;
  RunReport r = run_expression("matmul(A[64,1024]:bf16, B[1024,1024]:bf16)", opt);
  ASSERT_TRUE(r.verify.passed) << r.verify.message;
  EXPECT_NE(r.header.find("flush: write"), std::string::npos) << r.header;
}

}  // namespace
}  // namespace loom
