// Loom's compiled program run on device buffers somebody else owns — a PyTorch tensor's
// storage, on PyTorch's current stream: the layer under the Python binding
// (python/src/module.cpp), kept in C++ so that its contract is tested without Python and
// (up to the launch) without a GPU.
//
// Loom and PyTorch share one CUDA context: cudart (static in Loom, shared in PyTorch)
// makes the device's primary context current, so PyTorch's pointers and streams are valid
// in Loom's module loads and launches (docs/attention.md, "Benchmark against PyTorch").
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "driver/executor.h"
#include "driver/size_variants.h"
#include "runtime/device.h"

namespace loom {

// One tensor the caller provides: contiguous, row-major, of this dtype and shape.
struct ExternalTensor {
  std::string name;
  TensorRole role = TensorRole::Input;  // Input or Output (Temps are Loom's own)
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
};

struct ExternalProgram {
  std::string expression;
  CompiledProgram program;              // the top range's kernel (variants.primary())
  // Every kernel with the run-time sizes it serves: one, or one per range of a run-time M
  // (driver/size_variants.h); a launch runs variants.pick(sizes).
  SizeVariants variants;
  std::vector<ExternalTensor> tensors;  // Inputs and Outputs, in the program's order
  std::vector<std::string> runtime;     // the size symbols every launch gives
  double flops = 0;                     // expression_flops (docs/benchmarking.md item 7)
  std::string knobs;                    // every knob the pipeline read, "K=V,..."
};

// Parses `expression` (every size numeric after `sizes`, except the symbols `runtime`
// names: those stay symbolic, and every launch gives their values) and compiles it
// through the normal pipeline for `target`: explicit `knobs` over the defaults, or over
// the tuned record `choose_tuned` sets (as `loom run` does; `device` is the GPU it looks
// the record up for, unused without it). No GPU needed. A run-time size's dims are -1 in
// `tensors` (and their bytes -1); a workspace whose size depends on one is refused.
using ChooseTuned = std::function<void(const Graph&, const DeviceInfo&, CompileOptions&)>;
ExternalProgram compile_external(const std::string& expression, const Knobs& knobs,
                                 const Target& target,
                                 const std::map<std::string, int64_t>& sizes = {},
                                 const ChooseTuned& choose_tuned = nullptr,
                                 const DeviceInfo* device = nullptr,
                                 const std::vector<std::string>& runtime = {});

// Throws loom::Error unless `ptrs` names every Input and Output of `p` with a non-null
// pointer and nothing else (a misspelt name would otherwise leave a tensor unbound).
void check_external_pointers(const ExternalProgram& p, const std::map<std::string, uintptr_t>& ptrs);

// Throws loom::Error unless `sizes` gives every run-time size of `p` (and nothing else) a
// value in 1..2^48 that keeps every tensor under 2^48 bytes.
void check_runtime_sizes(const ExternalProgram& p, const std::map<std::string, int64_t>& sizes);

// A compiled program loaded on a GPU, launched on the caller's buffers and stream.
class ExternalRunner {
 public:
  // Compiles `p.program.cuda` with NVRTC (through the cubin cache) for the current GPU
  // and loads it; `device` must be the GPU `p` was compiled for.
  ExternalRunner(ExternalProgram p, int device);
  ~ExternalRunner();
  ExternalRunner(const ExternalRunner&) = delete;
  ExternalRunner& operator=(const ExternalRunner&) = delete;

  // Enqueues the whole program on `stream` (no host synchronization). Arguments (and TMA
  // tensor maps) are resolved once per distinct set of pointers, so a timing loop over
  // the same tensors launches without allocating. A program with run-time sizes is
  // refused (python/src/module.cpp's Kernel launches those).
  void launch(const std::map<std::string, uintptr_t>& ptrs, cudaStream_t stream);

  const ExternalProgram& program() const { return p_; }
  int device() const { return device_; }

 private:
  ExternalProgram p_;
  int device_ = 0;
  std::unique_ptr<Module> module_;
  std::map<std::string, uintptr_t> bound_;
  std::unique_ptr<DeviceTensors> tensors_;
  std::unique_ptr<ProgramLauncher> launcher_;
};

}  // namespace loom
