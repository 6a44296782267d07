// loom::Plan: one problem compiled once (expression or GraphBuilder graph, knobs or the
// tuning database, for one GPU), then executed many times on the caller's device pointers
// and stream. docs/api.md has the whole contract; in short:
//
//   #include <loom/plan.h>
//   loom::Plan plan("matmul(A[1024,512]:bf16, B[512,2048]:bf16)");   // GPU 0, tuned knobs
//   plan.execute({{"A", a}, {"B", b}, {"out", c}}, stream);           // or {a, b, c}
//
// Thread safety: a Plan is immutable after construction except for its per-stream
// launch states (a mutex guards their map, another each state); execute() may be called
// concurrently from several threads, on the same or different streams. Each stream gets
// its own scratch memory (split-K and split-KV workspaces), so concurrent executions on
// different streams never share it.
//
// Sizes: a size symbol of the expression (M in A[M,K]) is bound when the plan is made
// (PlanOptions::sizes: a plan per size), or, listed in PlanOptions::runtime_sizes, given
// at each execute(). Run-time sizes suit attention (its kernels take batch and sequence
// lengths as arguments, with the knobs a bound prefill shape gets: 1.07x its time on
// the H100 shape docs/api.md measures); so do a 16-bit GEMM's M, N and K on sm_90a (the
// wgmma kernels; a run-time M alone gets one kernel per range of M, PlanVariant). Other
// GEMMs with run-time sizes compile to the CUDA-core kernels, several times slower than
// the tensor-core ones a bound size gets. docs/api.md says which to pick.
//
// Every failure is a loom::Error whose message names the problem and the fix.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/error.h"  // loom::Error

struct CUstream_st;  // cudaStream_t is CUstream_st*: no CUDA header is needed here

namespace loom {

struct Graph;  // ir/graph.h (loom/builder.h makes one)

// The loom::Errors a caller may want to tell apart (the C ABI's status codes do):
// a bad argument to execute() (missing, unknown, null, misaligned or foreign pointer),
// and a plan that needs a GPU it does not have (none present, or a compile-only plan).
class ArgumentError : public Error {
 public:
  using Error::Error;
};
class NoGpuError : public Error {
 public:
  using Error::Error;
};

struct PlanOptions {
  // Explicit knobs, "BM=128,BN=128" as `loom run --knobs` takes them
  // (docs/knobs.md); they merge over the tuned record or the defaults.
  std::string knobs;
  // Look the problem up in the tuning database (docs/tuning.md) for this GPU, as
  // `loom run` does; false uses the shape-class defaults.
  bool use_tuning_db = true;
  // The GPU the plan runs on (CUDA ordinal).
  int device = 0;
  // Values of the expression's size symbols: {{"M", 4096}}. Every symbol must be here or
  // in runtime_sizes.
  std::map<std::string, int64_t> sizes;
  // Size symbols left unbound: each execute() passes their values ({"B", "S"}).
  std::vector<std::string> runtime_sizes;
  // Empty: compile for `device` (a GPU is required). An arch such as "sm_90a": a
  // compile-only plan for it, made without touching any GPU (no tuning database, no
  // load): it describes itself, and execute() refuses.
  std::string target;
};

// One tensor the caller passes to execute(): contiguous, row-major storage.
struct TensorInfo {
  std::string name;          // as the expression names it; the result is "out"
  std::string role;          // "input" or "output"
  std::string dtype;         // "f32", "f16", "bf16", ...
  std::vector<int64_t> shape;  // storage shape (a .T operand: as stored); -1: a run-time size
  std::vector<std::string> dims;  // the same as text: "4096", or the symbol "S"
  int64_t bytes = 0;              // -1 when a dim is a run-time size
};

// One kernel of a plan and the run-time sizes it serves. A plan holds one kernel, or, for
// a 16-bit GEMM on sm_90a whose run-time size is M alone and whose knobs are the defaults,
// one per range of M (a swapped decode tile for a few rows, one row of 128-row tiles, the
// medium and the large persistent schedules): each execute() runs the one whose range
// holds its M. docs/api.md has the ranges.
struct PlanVariant {
  std::string size;  // the run-time size whose value picks it ("M"); "" for a single kernel
  int64_t lo = 1, hi = std::numeric_limits<int64_t>::max();  // its range of that size, both ends included
  std::string knobs;               // "K=V,K=V", as knobs_string()
  std::string knob_source;         // where they came from ("default: class decode as if M = 16, ...")
};

// Why GPU `device` cannot run plans ("no CUDA driver", ...), or "" when it can.
std::string no_gpu_reason(int device = 0);

// The alignment (bytes) execute() requires of every pointer: TMA tensor maps and the
// kernels' 16-byte vector loads and stores need it (cudaMalloc gives 256).
inline constexpr int64_t kPointerAlignment = 16;

class Plan {
 public:
  // Parses and compiles `expression` (the language of docs/cli.md), then loads it on
  // options.device. Throws loom::Error (bad expression, unbound size, refused knob) or
  // loom::NoGpuError (no GPU `device` and no PlanOptions::target).
  explicit Plan(const std::string& expression, const PlanOptions& options = {});
  // The same from a graph (loom/builder.h); its size symbols are bound from options.sizes.
  explicit Plan(const Graph& graph, const PlanOptions& options = {});
  ~Plan();
  // A moved-from Plan may only be destroyed or assigned to.
  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  // Enqueues the program on `stream` (nullptr: the legacy default stream) with the
  // caller's device pointers, by tensor name (every input and output, nothing else), or
  // positionally in the order of tensors(). No host synchronization; the pointers must
  // stay valid until the work completes. The plan's device is made current for the
  // launch and the caller's current device restored after. Throws loom::Error for a
  // missing, unknown or null pointer, one not on the plan's GPU, one not aligned to
  // kPointerAlignment (loom::ArgumentError), or a plan compiled without a GPU
  // (loom::NoGpuError); a failed CUDA call is a plain loom::Error.
  void execute(const std::map<std::string, void*>& tensors, CUstream_st* stream = nullptr) const {
    execute(tensors, {}, stream);
  }
  void execute(const std::vector<void*>& tensors, CUstream_st* stream = nullptr) const {
    execute(tensors, {}, stream);
  }
  // A braced list of pointers, {a, b, c}, is positional (and never read as a map's
  // iterator pair).
  void execute(std::initializer_list<void*> tensors, CUstream_st* stream = nullptr) const {
    execute(std::vector<void*>(tensors), {}, stream);
  }
  // With the values of the plan's run-time sizes ({{"S", 1000}}): every one of them and
  // nothing else (loom::ArgumentError otherwise).
  void execute(const std::map<std::string, void*>& tensors, const std::map<std::string, int64_t>& sizes,
               CUstream_st* stream = nullptr) const;
  void execute(const std::vector<void*>& tensors, const std::map<std::string, int64_t>& sizes,
               CUstream_st* stream = nullptr) const;
  // The checks of execute() without launching.
  void check(const std::map<std::string, void*>& tensors,
             const std::map<std::string, int64_t>& sizes = {}) const;

  // The expression (for a graph plan, "<graph>"), its tensors (inputs, then outputs, in
  // the order positional execute() takes them), the knobs the pipeline read, in the
  // registry's order, and where they came from.
  const std::string& expression() const;
  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo& tensor(const std::string& name) const;
  // The tensor with the plan's run-time sizes set to `sizes` (shape and bytes all known).
  TensorInfo tensor(const std::string& name, const std::map<std::string, int64_t>& sizes) const;
  const std::vector<std::string>& runtime_sizes() const;
  const std::vector<std::pair<std::string, std::string>>& knobs() const;
  std::string knobs_string() const;  // "K=V,K=V"
  const std::string& knob_source() const;
  const std::vector<std::string>& notes() const;  // knobs that did something unexpected
  const std::string& cuda_source() const;
  const std::string& arch() const;  // the compile target, e.g. "sm_90a"
  double flops() const;             // useful work of one execution (0 with run-time sizes)
  int device() const;
  // The plan's kernels, lowest range first (one entry for a plan with one kernel), and the
  // index of the one execute() runs at `sizes` (the plan's run-time sizes, as execute()
  // takes them). knobs(), knob_source() and cuda_source() are the last variant's.
  std::vector<PlanVariant> variants() const;
  size_t variant_for(const std::map<std::string, int64_t>& sizes) const;
  // Whether execute() can run (false for a compile-only plan) and, if not, why.
  bool executable() const;
  const std::string& not_executable_reason() const;
  // A few lines: expression, target, knobs and their source, tensors.
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom
