#include "bench/report.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "ir/error.h"

namespace loom {
namespace {

TEST(TextTable, AlignsColumnsUnderARule) {
  TextTable t({{"name", Align::Left}, {"value", Align::Right}});
  t.add_row({"a", "1.0"});
  t.add_row({"long name", "12.5"});
  EXPECT_EQ(t.str(),
            "name       value\n"
            "---------  -----\n"
            "a            1.0\n"
            "long name   12.5\n");
}

TEST(TextTable, CountsMultibyteCharactersAsOneColumn) {
  TextTable t({{"µs", Align::Right}});
  t.add_row({"3.0"});
  EXPECT_EQ(t.str(), " µs\n---\n3.0\n");
}

TEST(TextTable, RowWithWrongCellCountThrows) {
  TextTable t({{"a", Align::Left}, {"b", Align::Left}});
  EXPECT_THROW(t.add_row({"only one"}), Error);
}

TEST(Format, NumbersAndBytes) {
  EXPECT_EQ(format_us(12.345), "12.3");
  EXPECT_EQ(format_tflops(654.25), "654.2");
  EXPECT_EQ(format_ratio(1.0249), "1.02x");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(98304), "96 KiB");
  EXPECT_EQ(format_bytes(16896), "16.5 KiB");
  EXPECT_EQ(format_bytes(60 << 20), "60 MiB");
  EXPECT_EQ(format_bytes(52428800 + 524288), "50.5 MiB");
}

Timing timing(double median_us) {
  Timing t;
  t.median_us = t.min_us = t.p10_us = t.p90_us = median_us;
  t.reps = 50;
  return t;
}

TEST(FormatBackends, GoldenText) {
  const double flops = 2.0 * 2048 * 2048 * 2048;
  std::string s = format_backends({{"cuBLAS", timing(100.0)}, {"Loom", timing(80.0)}}, flops);
  EXPECT_EQ(s,
            "Backend     µs  TFLOP/s  vs cuBLAS\n"
            "-------  -----  -------  ---------\n"
            "cuBLAS   100.0    171.8      1.00x\n"
            "Loom      80.0    214.7      1.25x\n");
}

TEST(FormatBackends, GraphReplayColumnsShowTimeAndRatio) {
  // The decode case of 2026-11-22 (the epilogue work): events say 1.06x, the graphs 1.11x (H200).
  Timing cublas = timing(18.0), loom = timing(17.0);
  cublas.graph_median_us = 9.7;
  loom.graph_median_us = 8.7;
  std::string s = format_backends({{"cuBLAS", cublas}, {"Loom", loom}}, 1e6);
  EXPECT_EQ(s,
            "Backend    µs  TFLOP/s  vs cuBLAS  graph µs  graph vs cuBLAS\n"
            "-------  ----  -------  ---------  --------  ---------------\n"
            "cuBLAS   18.0      0.1      1.00x       9.7            1.00x\n"
            "Loom     17.0      0.1      1.06x       8.7            1.11x\n");
}

TEST(FormatBackends, GraphRatioNeedsTheReferencesGraph) {
  // Only one launch under the graph threshold: its graph time shows, no ratio does.
  Timing loom = timing(10.0);
  loom.graph_median_us = 6.25;
  std::string s = format_backends({{"cuBLAS", timing(22.0)}, {"Loom", loom}}, 1e6);
  EXPECT_EQ(s,
            "Backend    µs  TFLOP/s  vs cuBLAS  graph µs  graph vs cuBLAS\n"
            "-------  ----  -------  ---------  --------  ---------------\n"
            "cuBLAS   22.0      0.0      1.00x         -                -\n"
            "Loom     10.0      0.1      2.20x       6.2                -\n");
}

TEST(FormatKernels, GoldenText) {
  KernelReport a;
  a.name = "k_matmul";
  a.us = 80.0;
  a.grid = {32, 16, 1};
  a.block_threads = 256;
  a.smem_bytes = 49152;
  a.regs = 128;
  a.blocks_per_sm = 1;
  a.occupancy = 0.25;
  a.knobs = "BM=128,BN=128";
  KernelReport b;
  b.name = "k_reduce";
  b.grid = {4, 1, 1};
  b.block_threads = 128;
  b.regs = 32;
  b.spill_bytes = 24;
  EXPECT_EQ(format_kernels({a, b}),
            "kernel      µs   grid  block    smem  regs   occupancy  spills  knobs\n"
            "--------  ----  -----  -----  ------  ----  ----------  ------  -------------\n"
            "k_matmul  80.0  32x16    256  48 KiB   128  25% (1/SM)       0  BM=128,BN=128\n"
            "k_reduce     -      4    128     0 B    32           -    24 B  -\n");
  // A kernel whose wgmma ptxas serialized: a warning under the table, naming it and why.
  a.wgmma_serialized = "insufficient register resources";
  const std::string t = format_kernels({a, b});
  EXPECT_NE(t.find("k_reduce     -      4    128     0 B    32           -    24 B  -\n"
                   "warning: ptxas serialized the wgmma.mma_async of k_matmul (insufficient "
                   "register resources): each product waits for the one before it"),
            std::string::npos)
      << t;
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 5) << t;
}

TEST(FormatHeader, GoldenText) {
  BenchHeader h;
  h.gpu = "NVIDIA H200";
  h.arch = "sm_90a";
  h.sms = 132;
  h.l2_bytes = 60 << 20;
  h.driver_version = 13000;
  h.runtime_version = 12080;
  h.sm_clock_mhz = 1980;
  h.mem_clock_mhz = 3201;
  h.date = "2026-11-21 23:10:04 UTC";
  h.seed = 42;
  h.l2 = "rotate over 4 input sets of 32.1 MiB (128.5 MiB = 2.1x L2), no flush (auto: inputs "
         "under L2)";
  h.reps = 50;
  h.warmup = 5;
  h.command = "loom run 'C = A @ B' --bench";
  EXPECT_EQ(format_header(h),
            "GPU:     NVIDIA H200 (sm_90a, 132 SMs, L2 60.0 MiB)\n"
            "CUDA:    driver 13.0, runtime 12.8\n"
            "clocks:  SM 1980 MHz max, memory 3201 MHz max\n"
            "date:    2026-11-21 23:10:04 UTC\n"
            "seed:    42\n"
            "timing:  median of 50 reps after 5 warm-up, interleaved; graph replay under 20.0 µs\n"
            "L2:      rotate over 4 input sets of 32.1 MiB (128.5 MiB = 2.1x L2), no flush (auto: "
            "inputs under L2)\n"
            "command: loom run 'C = A @ B' --bench\n");
}

TEST(MakeBenchHeader, CopiesDeviceFactsAndDatesIt) {
  DeviceInfo d;
  d.name = "Test GPU";
  d.cc_major = 9;
  d.sm_count = 7;
  d.clock_khz = 1500000;
  TimingOptions opt;
  opt.l2 = L2Method::rotate;
  opt.input_sets = 4;
  opt.input_set_bytes = 32 << 20;
  opt.reps = 9;
  d.l2_bytes = 50 << 20;
  BenchHeader h = make_bench_header(d, 5, opt, "cmd");
  EXPECT_EQ(h.gpu, "Test GPU");
  EXPECT_EQ(h.sms, 7);
  EXPECT_EQ(h.sm_clock_mhz, 1500);
  EXPECT_EQ(h.l2, "rotate over 4 input sets of 32.0 MiB (128.0 MiB = 2.6x L2), no flush");
  EXPECT_EQ(h.reps, 9);
  EXPECT_EQ(h.date.size(), std::string("2026-11-21 23:10:04 UTC").size());
  EXPECT_NE(format_header(h).find("\nL2:      rotate over 4"), std::string::npos);
}

}  // namespace
}  // namespace loom
