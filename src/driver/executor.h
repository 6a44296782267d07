// Running a compiled KernelProgram on the GPU: device buffers for its tensors, kernel
// arguments in the order of each KernelOp's params (then its TMA tensor maps, encoded
// here from the buffers), launch geometry from its Exprs.
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/interpreter.h"
#include "ir/program.h"
#include "runtime/module.h"

namespace loom {

// Device memory for every tensor of a program; freed on destruction.
class DeviceTensors {
 public:
  DeviceTensors() = default;
  DeviceTensors(const DeviceTensors&) = delete;
  DeviceTensors& operator=(const DeviceTensors&) = delete;
  ~DeviceTensors();

  // Inputs are uploaded from `host` (storage layout, rounded to dtype); Outputs and
  // Temps are allocated and poisoned with NaN (all-ones bytes are NaN in f32/f16/bf16),
  // so an element a kernel fails to write fails verification; zero_init Temps (split-K's
  // workspace and tile counters) are cleared once here and left to the kernels, which
  // leave them zero again, so repeated launches need no memset. With `inputs_from`, Inputs
  // use that object's buffers instead (it must hold them and outlive this one): the
  // tuner uploads a problem's inputs once for all its candidates. With `outputs_from`,
  // Outputs and Temps do: the timing's rotated input sets (bench/timing_plan.h) share
  // one output and workspace, since their launches run one after another on one stream.
  void allocate(const ProgramBase& p, const Bindings& host,
                const DeviceTensors* inputs_from = nullptr,
                const DeviceTensors* outputs_from = nullptr);
  // The caller's buffers for the tensors in `external` (not freed here; each must hold
  // its tensor's bytes): a PyTorch tensor's storage (driver/external.h). Every other
  // tensor must be a Temp, allocated (and zeroed when zero_init) as allocate() does.
  // Called again with new buffers for the same program and symbols, it keeps the Temps
  // it allocated the first time.
  void adopt(const ProgramBase& p, const std::map<std::string, void*>& external,
             const std::map<std::string, int64_t>& symbols);
  void poison_outputs(const ProgramBase& p, cudaStream_t stream);
  void* ptr(const std::string& tensor) const;
  HostTensor download(const ProgramBase& p, const std::string& tensor,
                      const std::map<std::string, int64_t>& symbols) const;

 private:
  std::map<std::string, void*> ptrs_;
  std::map<std::string, size_t> bytes_;
  std::map<std::string, bool> owned_;
  // The sizes the buffers were made for: a pitched output's rows (poison_outputs).
  std::map<std::string, int64_t> symbols_;
};

// The tensor map of `d` over the device buffer `ptr` of tensor `t` (cuTensorMapEncodeTiled):
// dims and strides from its shape, the box from the descriptor, zeros for out-of-range
// elements. Throws loom::Error naming the tensor when the shape breaks a TMA rule.
CUtensorMap encode_tensor_map(const TmaDescriptor& d, const TensorDecl& t, void* ptr,
                              const std::map<std::string, int64_t>& symbols);

struct LaunchPlan {
  CUfunction fn = nullptr;
  LaunchConfig cfg;
  std::vector<int64_t> symbol_values;  // int params, in param order
};

// Resolve functions, grids and arguments once; launching is then allocation-free (the
// timing loop and CUDA-graph capture call launch_all many times). The KernelProgram must
// outlive the launcher (its arguments name the program's tensors and descriptors).
class ProgramLauncher {
 public:
  ProgramLauncher(const KernelProgram& p, const Module& m, const DeviceTensors& t,
                  const std::map<std::string, int64_t>& symbols);
  void launch_all(cudaStream_t stream) const;
  void launch_one(size_t kernel, cudaStream_t stream) const;
  size_t size() const { return plans_.size(); }
  const LaunchPlan& plan(size_t i) const { return plans_[i]; }
  // Points the launches at `t`'s buffers (the same program, sizes and symbols): tensor
  // arguments are replaced, and the tensor maps of the tensors whose buffer moved are
  // encoded again. Everything else resolved by the constructor (functions, grids, shared
  // memory opt-ins, layouts) is kept: this is the per-call cost of a caller whose
  // buffers change every call (PyTorch's allocator hands out new outputs), a few µs
  // against the constructor's tens.
  void rebind(const DeviceTensors& t);

 private:
  struct Arg {
    void* ptr = nullptr;
    int32_t i32 = 0;
    int64_t i64 = 0;
    bool wide = false;
    CUtensorMap* map = nullptr;  // passed by value: the argument is the map itself
    const std::string* tensor = nullptr;  // the tensor a pointer or map argument is of
    const TmaDescriptor* tma = nullptr;   // a map argument's descriptor
    const TensorDecl* decl = nullptr;     // and its tensor's declaration
  };
  std::vector<LaunchPlan> plans_;
  std::vector<std::vector<Arg>> args_;
  // Stable addresses for the maps' argument pointers (64-byte aligned by the type).
  std::vector<std::unique_ptr<CUtensorMap>> maps_;
  std::map<std::string, int64_t> symbols_;
};

}  // namespace loom
