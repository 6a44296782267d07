// Expression -> verified (and optionally benchmarked) run on the GPU: the back half of
// Loom, as `loom run` and the GPU tests use it.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/report.h"
#include "bench/timing.h"
#include "bench/verify.h"
#include "driver/compile.h"
#include "runtime/compile_result.h"
#include "runtime/device.h"
#include "runtime/nvrtc.h"

namespace loom {

struct RunOptions {
  Knobs knobs;
  std::map<std::string, int64_t> sizes;  // values for symbolic dims (all must be bound)
  uint64_t seed = 1;
  int device = 0;                        // CUDA ordinal the run compiles for and runs on
  bool bench = false;                    // time against cuBLAS (after verification)
  TimingOptions timing;                  // its l2 fields are set from `l2` (below)
  L2Request l2 = L2Request::automatic;   // how timed launches meet a cold L2 (--l2)
  std::string command_line;              // recorded in the bench header
  bool use_cache = true;
  // Called with the bound graph and the GPU before compiling: sets CompileOptions::tuned
  // and tuned_source (the tuner library's tuning-database lookup; the driver cannot link
  // it). Unset: shape-class defaults.
  std::function<void(const Graph&, const DeviceInfo&, CompileOptions&)> choose_tuned;
};

struct RunReport {
  DeviceInfo device;
  CompiledProgram program;
  CompileResult nvrtc;
  VerifyResult verify;                      // Loom's output vs the fp64 reference
  std::optional<VerifyResult> lse_verify;   // attention with lse=true: its LSE, likewise
  std::optional<VerifyResult> cublas_verify;  // cuBLAS's output vs the same reference
  bool cublas_has_epilogue = false;         // cuBLAS timed the GEMM only
  double flops = 0;
  std::vector<BackendResult> backends;      // cuBLAS first (the reference), then Loom
  std::vector<KernelReport> kernels;
  std::string header;                       // bench header text
  BenchHeader header_fields;                // the same header as fields (--json)
};

// Replace symbolic dims by the values in `sizes`; an unbound symbol is an error that
// names it and says how to bind it.
Graph bind_sizes(const Graph& g, const std::map<std::string, int64_t>& sizes);

// "M=4096,N=512" (the --dims option of loom compile, run and tune) -> sizes; throws
// loom::Error naming a malformed entry and the expected form, a value outside
// [1, kMaxExtent] (frontend/sizes.h) and a name given twice.
std::map<std::string, int64_t> parse_dims(const std::string& text);

// Throws loom::Error when `sizes` names a dimension `g` does not have (a typo such as
// --dims k=64 for K would otherwise be ignored), listing the symbols `g` has.
void check_dims_named(const Graph& g, const std::map<std::string, int64_t>& sizes);

// The compile target of a GPU: its arch, SM count, opt-in shared memory per block, L2 and
// DRAM bandwidth (the defaults that read them: L2-sized causal sections, fast-DRAM rings).
Target target_for_device(const DeviceInfo& dev);
// The target for compiling `arch` on this machine: the GPU's own (target_for_device) when
// `arch` is its arch, so `loom compile` and the demo show the kernel `loom run` runs there;
// otherwise the arch's documented limits (Target::for_arch).
Target target_for_arch_here(const std::string& arch, const std::optional<DeviceInfo>& dev);

// NVRTC's request for a generated kernel source: the source and Loom's device header.
CompileRequest nvrtc_request(const std::string& cuda, const std::string& arch);

// The threshold `loom run` judges a compiled program's output by: the dtypes' (tf32's
// when ATOM=mma_tf32 computes f32 tensors), or the f16-accumulation contract's when an
// atom accumulates in f16 (docs/verification.md). `g` has its sizes bound.
double run_verify_threshold(const Graph& g, const CompileState& s);

// The FLOPs a run of `g` (sizes bound) is credited with (docs/benchmarking.md item 7):
// 2·batch·M·N·K for its contraction, or for attention 4·D per (query, key) pair the mask
// keeps — about half of them when causal.
double expression_flops(const Graph& g);

// Throws loom::Error when there is no GPU (with the reason), when the result fails
// verification is *not* an error: check report.verify.passed.
RunReport run_expression(const std::string& expression, const RunOptions& opt);

// The two tables of `loom run --bench` and the verification lines.
std::string format_run_report(const RunReport& r);

}  // namespace loom
