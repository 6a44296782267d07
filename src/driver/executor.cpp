#include "driver/executor.h"

#include <numeric>
#include <set>

#include "bench/cuda_call.h"
#include "bench/verify.h"
#include "codegen/cuda.h"
#include "ir/error.h"
#include "runtime/driver.h"

namespace loom {
namespace {

int64_t eval_size(const Expr& e, const std::map<std::string, int64_t>& symbols) {
  Expr::Env env(symbols.begin(), symbols.end());
  return e.eval(env);
}

// Bytes of a global tensor's storage: a pitched view's footprint (TensorDecl::pitch),
// after checking that its rows do not overlap.
size_t storage_bytes(const TensorDecl& t, const std::map<std::string, int64_t>& symbols) {
  if (t.pitched()) {
    t.check_pitch(Expr::Env(symbols.begin(), symbols.end()));
    if (eval_size(t.numel(), symbols) == 0) return 0;
  }
  const Expr n = t.pitched() ? t.footprint() : t.numel();
  return size_t(eval_size(n, symbols)) * size_t(dtype_bytes(t.dtype));
}

// Calls f(dense byte offset, strided byte offset, bytes) for each row of a pitched view.
template <class F>
void for_each_row(const TensorDecl& t, const std::map<std::string, int64_t>& symbols, F&& f) {
  const size_t rank = t.shape.size(), eb = size_t(dtype_bytes(t.dtype));
  std::vector<int64_t> shape, stride;
  for (const Expr& d : t.shape) shape.push_back(eval_size(d, symbols));
  for (const Expr& s : t.strides()) stride.push_back(eval_size(s, symbols));
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= shape[d];
  if (shape.back() == 0) return;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, at = 0;
    for (size_t d = rank - 1; d-- > 0;) {
      at += rest % shape[d] * stride[d];
      rest /= shape[d];
    }
    f(size_t(r * shape.back()) * eb, size_t(at) * eb, size_t(shape.back()) * eb);
  }
}

CUtensorMapDataType tensor_map_dtype(DType t) {
  switch (t) {
    case DType::F32:
    case DType::TF32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;  // tf32 is stored as f32
    case DType::F16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DType::BF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case DType::F64: return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    case DType::I32: return CU_TENSOR_MAP_DATA_TYPE_INT32;
  }
  throw Error("no tensor map data type for " + std::string(dtype_name(t)));
}

CUtensorMapSwizzle tensor_map_swizzle(int bytes) {
  switch (bytes) {
    case 0: return CU_TENSOR_MAP_SWIZZLE_NONE;
    case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
  }
  throw Error("TMA has no " + std::to_string(bytes) + "-byte swizzle (32, 64 or 128)");
}

}  // namespace

CUtensorMap encode_tensor_map(const TmaDescriptor& d, const TensorDecl& t, void* ptr,
                              const std::map<std::string, int64_t>& symbols) {
  const size_t rank = t.shape.size();
  const uint64_t eb = uint64_t(dtype_bytes(t.dtype));
  if (rank == 0 || rank > 5 || d.box.size() != rank)
    throw Error("tensor map " + d.name + ": tensor " + t.name + " has rank " +
                std::to_string(rank) + " and the box " + std::to_string(d.box.size()) +
                "; TMA needs equal ranks from 1 to 5");
  // The driver orders dimensions innermost first; strides skip the innermost (1 element).
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], elem_strides[5];
  for (size_t i = 0; i < rank; ++i) {
    int64_t n = eval_size(t.shape[rank - 1 - i], symbols);
    dims[i] = cuuint64_t(std::max<int64_t>(n, 1));
    box[i] = cuuint32_t(d.box[i]);
    elem_strides[i] = 1;
  }
  // A pitched view's strides are its buffer's (TensorDecl::strides), in bytes here.
  const std::vector<Expr> elem_stride = t.strides();
  for (size_t i = 1; i < rank; ++i)
    strides[i - 1] = cuuint64_t(eval_size(elem_stride[rank - 1 - i], symbols)) * eb;
  // With run-time sizes this is the first place a row's length is known: the message
  // names the knob whose tensor map it is (the TMA-store epilogue's for an output).
  for (size_t i = 1; i < rank && t.pitched(); ++i)
    if (strides[i - 1] % 16 != 0)
      throw Error(std::string(t.role == TensorRole::Output ? "EPILOGUE=tma_store" : "STAGE=tma") +
                  " needs the strides of " + t.name + " to be multiples of 16 bytes; its " +
                  (i == 1 ? "row pitch" : "stride of dimension " + std::to_string(rank - 1 - i)) +
                  " is " + std::to_string(strides[i - 1]) + " B: use " +
                  (t.role == TensorRole::Output ? "EPILOGUE=direct" : "STAGE=cp_async") +
                  " (or a buffer whose rows are whole 16-byte units)");
  if (rank > 1 && strides[0] % 16 != 0) {
    std::string rows = t.name + "'s rows are " + std::to_string(strides[0]) + " B";
    // A run-time row length: the size to change (or bind when compiling), by name.
    std::set<std::string> vars;
    t.shape[rank - 1].collect_vars(vars);
    if (vars.size() == 1) {
      const std::string& v = *vars.begin();
      rows += " at run-time size " + v + " = " + std::to_string(symbols.at(v)) + " (make " + v +
              " a multiple of " + std::to_string(16 / std::gcd<uint64_t>(16, eb)) +
              ", or bind it when compiling)";
    }
    if (t.role == TensorRole::Output)
      throw Error("EPILOGUE=tma_store needs rows of " + t.name + " to be a multiple of 16 bytes; " +
                  rows + ": use EPILOGUE=direct (or sizes whose rows are whole 16-byte units)");
    throw Error("STAGE=tma needs rows of " + t.name + " to be a multiple of 16 bytes; " + rows +
                ": use STAGE=cp_async");
  }
  CUtensorMap map;
  CUresult r = driver().cuTensorMapEncodeTiled(
      &map, tensor_map_dtype(t.dtype), cuuint32_t(rank), ptr, dims, strides, box, elem_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, tensor_map_swizzle(d.swizzle_bytes),
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  std::string what = "cuTensorMapEncodeTiled (tensor map " + d.name + " of " + t.name + ")";
  check_cu(r, what.c_str());
  return map;
}

DeviceTensors::~DeviceTensors() {
  for (auto& [name, p] : ptrs_)
    if (owned_[name]) cudaFree(p);
}

void DeviceTensors::allocate(const ProgramBase& p, const Bindings& host,
                             const DeviceTensors* inputs_from, const DeviceTensors* outputs_from) {
  symbols_ = host.symbols;
  for (const auto& t : p.tensors) {
    size_t bytes = storage_bytes(t, host.symbols);
    const bool input = t.role == TensorRole::Input;
    if (const DeviceTensors* from = input ? inputs_from : outputs_from) {
      auto it = from->bytes_.find(t.name);
      if (it == from->bytes_.end() || it->second != bytes)
        throw Error(std::string("shared ") + (input ? "input " : "output or temporary ") + t.name +
                    " is missing or has another size");
      ptrs_[t.name] = from->ptrs_.at(t.name);
      bytes_[t.name] = bytes;
      owned_[t.name] = false;
      continue;
    }
    void* d = nullptr;
    LOOM_CUDA_RT(cudaMalloc(&d, std::max<size_t>(bytes, 16)));
    ptrs_[t.name] = d;
    bytes_[t.name] = bytes;
    owned_[t.name] = true;
    if (t.role == TensorRole::Input) {
      auto it = host.tensors.find(t.name);
      if (it == host.tensors.end()) throw Error("no host data for input tensor " + t.name);
      std::vector<char> raw = to_storage_bytes(it->second);
      if (t.pitched()) {
        // The view's rows into its buffer; the caller's elements between them are NaN
        // (all ones), so a kernel that reads there produces NaN.
        std::vector<char> pitched(bytes, char(0xFF));
        for_each_row(t, host.symbols, [&](size_t dense, size_t at, size_t n) {
          std::copy_n(raw.data() + dense, n, pitched.data() + at);
        });
        raw = std::move(pitched);
      }
      if (raw.size() != bytes)
        throw Error("input " + t.name + " has " + std::to_string(raw.size()) +
                    " bytes of data but its shape needs " + std::to_string(bytes));
      LOOM_CUDA_RT(cudaMemcpy(d, raw.data(), bytes, cudaMemcpyHostToDevice));
    }
    if (t.zero_init) LOOM_CUDA_RT(cudaMemset(d, 0, bytes));
  }
}

void DeviceTensors::adopt(const ProgramBase& p, const std::map<std::string, void*>& external,
                          const std::map<std::string, int64_t>& symbols) {
  for (const auto& t : p.tensors) {
    size_t bytes = storage_bytes(t, symbols);
    bytes_[t.name] = bytes;
    symbols_ = symbols;  // (the same for every tensor)
    auto it = external.find(t.name);
    if (it != external.end()) {
      ptrs_[t.name] = it->second;
      owned_[t.name] = false;
      continue;
    }
    if (t.role == TensorRole::Input || t.role == TensorRole::Output)
      throw Error("no buffer given for " + std::string(t.role == TensorRole::Input ? "input " : "output ") +
                  t.name + ": pass a pointer for every input and output");
    // Adopted again (new caller buffers, same program and sizes): a Temp this object
    // allocated before is kept, zero_init ones still zero (the kernels leave them so).
    auto own = owned_.find(t.name);
    if (own != owned_.end() && own->second) continue;
    void* d = nullptr;
    LOOM_CUDA_RT(cudaMalloc(&d, std::max<size_t>(bytes, 16)));
    ptrs_[t.name] = d;
    owned_[t.name] = true;
    if (t.zero_init) LOOM_CUDA_RT(cudaMemset(d, 0, bytes));
  }
}

void DeviceTensors::poison_outputs(const ProgramBase& p, cudaStream_t stream) {
  for (const auto& t : p.tensors) {
    if (t.role == TensorRole::Input || t.zero_init) continue;
    if (!t.pitched()) {
      LOOM_CUDA_RT(cudaMemsetAsync(ptrs_.at(t.name), 0xFF, bytes_.at(t.name), stream));
      continue;
    }
    // A pitched output's buffer is the caller's between its rows: poison the rows only.
    char* base = static_cast<char*>(ptrs_.at(t.name));
    for_each_row(t, symbols_, [&](size_t, size_t at, size_t n) {
      LOOM_CUDA_RT(cudaMemsetAsync(base + at, 0xFF, n, stream));
    });
  }
}

void* DeviceTensors::ptr(const std::string& tensor) const {
  auto it = ptrs_.find(tensor);
  if (it == ptrs_.end()) throw Error("no device buffer for tensor " + tensor);
  return it->second;
}

HostTensor DeviceTensors::download(const ProgramBase& p, const std::string& tensor,
                                   const std::map<std::string, int64_t>& symbols) const {
  const TensorDecl& t = p.tensor(tensor);
  std::vector<int64_t> shape;
  for (const auto& d : t.shape) shape.push_back(eval_size(d, symbols));
  std::vector<char> raw(bytes_.at(tensor));
  LOOM_CUDA_RT(cudaMemcpy(raw.data(), ptr(tensor), raw.size(), cudaMemcpyDeviceToHost));
  if (t.pitched()) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<char> dense(size_t(n) * size_t(dtype_bytes(t.dtype)));
    for_each_row(t, symbols, [&](size_t d, size_t at, size_t bytes) {
      std::copy_n(raw.data() + at, bytes, dense.data() + d);
    });
    raw = std::move(dense);
  }
  return from_device_bytes(raw.data(), raw.size(), t.dtype, shape);
}

ProgramLauncher::ProgramLauncher(const KernelProgram& p, const Module& m, const DeviceTensors& t,
                                 const std::map<std::string, int64_t>& symbols)
    : symbols_(symbols) {
  bool wide = std::string(index_ctype(p)) != "int";
  for (const auto& k : p.kernels) {
    LaunchPlan plan;
    plan.fn = m.function(k.name);
    for (int d = 0; d < 3; ++d) {
      int64_t g = eval_size(k.grid[d], symbols);
      if (g < 1) throw Error("kernel " + k.name + " has an empty grid (dimension " +
                             std::to_string(d) + " = " + std::to_string(g) + ")");
      plan.cfg.grid[d] = unsigned(g);
    }
    plan.cfg.block[0] = unsigned(k.block_threads);
    int64_t smem = kernel_smem_bytes(shared_layout(p, k), k);
    plan.cfg.dynamic_smem = unsigned(smem);
    plan.cfg.programmatic_dependent = k.wait_prior_grid;
    // Above 48 KiB a kernel must opt in to dynamic shared memory.
    if (smem > 48 * 1024) set_dynamic_smem(plan.fn, int(smem));
    std::vector<Arg> args;
    for (const auto& name : k.params) {
      Arg a;
      if (p.has_tensor(name)) {
        a.ptr = t.ptr(name);
        a.tensor = &name;
      } else {
        int64_t v = eval_size(Expr::var(name), symbols);
        a.wide = wide;
        a.i64 = v;
        a.i32 = int32_t(v);
        plan.symbol_values.push_back(v);
      }
      args.push_back(a);
    }
    for (const TmaDescriptor& d : k.tma) {
      maps_.push_back(std::make_unique<CUtensorMap>(
          encode_tensor_map(d, p.tensor(d.tensor), t.ptr(d.tensor), symbols)));
      Arg a;
      a.map = maps_.back().get();
      a.ptr = t.ptr(d.tensor);  // the buffer the map was encoded over
      a.tensor = &d.tensor;
      a.tma = &d;
      a.decl = &p.tensor(d.tensor);
      args.push_back(a);
    }
    plans_.push_back(plan);
    args_.push_back(std::move(args));
  }
}

void ProgramLauncher::rebind(const DeviceTensors& t) {
  for (auto& args : args_)
    for (auto& a : args) {
      if (!a.tensor) continue;
      void* ptr = t.ptr(*a.tensor);
      if (ptr == a.ptr) continue;
      if (a.map) *a.map = encode_tensor_map(*a.tma, *a.decl, ptr, symbols_);
      a.ptr = ptr;
    }
}

void ProgramLauncher::launch_one(size_t i, cudaStream_t stream) const {
  std::vector<void*> argv;
  for (const auto& a : args_[i]) {
    if (a.map) argv.push_back(const_cast<CUtensorMap*>(a.map));
    else if (a.tensor) argv.push_back(const_cast<void**>(&a.ptr));
    else argv.push_back(a.wide ? const_cast<int64_t*>(&a.i64) : static_cast<void*>(const_cast<int32_t*>(&a.i32)));
  }
  LaunchConfig cfg = plans_[i].cfg;
  cfg.stream = stream;
  launch(plans_[i].fn, cfg, argv.data());
}

void ProgramLauncher::launch_all(cudaStream_t stream) const {
  for (size_t i = 0; i < plans_.size(); ++i) launch_one(i, stream);
}

}  // namespace loom
