// Text tables for `loom run --bench`: an aligned table formatter, the backend table
// (cuBLAS vs Loom), the per-kernel table (time, launch shape, resources, knobs) and the
// header block that records what a number was measured on (docs/benchmarking.md item 6).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "runtime/device.h"

namespace loom {

enum class Align { Left, Right };

// Columns separated by two spaces, a rule of '-' under the header, no trailing blanks.
// Widths count UTF-8 code points, so "µs" is two columns wide.
class TextTable {
 public:
  struct Column {
    std::string header;
    Align align = Align::Left;
  };
  explicit TextTable(std::vector<Column> columns);
  void add_row(std::vector<std::string> cells);  // one cell per column
  std::string str() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

std::string format_us(double us);          // "12.3"
std::string format_tflops(double tflops);  // "654.2"
std::string format_ratio(double r);        // "1.02x"
std::string format_bytes(int64_t bytes);   // "512 B", "96 KiB", "16.5 KiB", "60 MiB"

struct BackendResult {
  std::string name;  // "cuBLAS", "Loom"
  Timing timing;
};

// Backend | µs | TFLOP/s | vs <reference>, and when any row has a graph replay (a launch
// under kGraphReplayBelowUs) also graph µs | graph vs <reference>: event timings of short
// launches carry several µs of launch and event overhead that both libraries pay, which
// pulls their ratio toward 1; the graph ratio is the kernels'. `flops` is one launch's
// work (GEMM: 2·M·N·K); a ratio is throughput relative to rows[reference], i.e.
// reference µs / row µs.
std::string format_backends(const std::vector<BackendResult>& rows, double flops,
                            size_t reference = 0);

struct KernelReport {
  std::string name;
  std::optional<double> us;               // median, when timed on its own
  std::array<int64_t, 3> grid{1, 1, 1};
  int block_threads = 0;
  int64_t smem_bytes = 0;                 // static + dynamic
  int regs = 0;                           // per thread
  std::optional<int> blocks_per_sm;       // resident blocks per SM (occupancy query)
  std::optional<double> occupancy;        // resident warps / max warps per SM, 0..1
  std::optional<int> cluster_size;        // CTAs per cluster (thread-block clusters)
  std::optional<int> active_clusters;     // clusters resident at once (occupancy query)
  int64_t spill_bytes = 0;                // spill stores + loads (ptxas)
  std::string wgmma_serialized;           // ptxas's reason, when it serialized the wgmma
  std::string knobs;                      // "BM=128,BN=128,..."
};

// kernel | µs | grid | block | smem | regs | occupancy | spills | knobs, then a warning per
// kernel whose wgmma ptxas serialized.
std::string format_kernels(const std::vector<KernelReport>& kernels);

// "warning: ptxas serialized the wgmma of <kernel> (<reason>): .." and a newline; empty
// when it did not.
std::string serialized_wgmma_warning(const std::string& kernel, const std::string& reason);

struct BenchHeader {
  std::string gpu;             // device name
  std::string arch;            // "sm_90a"
  int sms = 0;
  int64_t l2_bytes = 0;
  int driver_version = 0;      // cudaDriverGetVersion: 13000 = CUDA 13.0
  int runtime_version = 0;
  int sm_clock_mhz = 0;        // maximum clocks as reported (0 = not read)
  int mem_clock_mhz = 0;
  std::string date;            // "2026-11-21 23:10:04 UTC"
  uint64_t seed = 0;
  std::string l2 = "flush";    // how each timed launch met a cold L2 (describe_l2)
  int reps = 0;
  int warmup = 0;
  std::string command;         // the exact command line, when known
};

// Dated now; the L2 line from opt (rotation's set count and bytes, or the flush method).
BenchHeader make_bench_header(const DeviceInfo& dev, uint64_t seed, const TimingOptions& opt,
                              std::string command);
std::string format_header(const BenchHeader& h);

}  // namespace loom
