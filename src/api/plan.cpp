// loom::Plan (include/loom/plan.h): the compile half is driver/compile.h's pipeline as
// driver/external.h runs it for loom_py; the run half keeps one launch state per stream.
//
// Why per stream: a program's Temps (split-K's workspace and tile counters) are written by
// every launch, so two launches in flight at once must not share them. Launches on one
// stream run in order and can; launches on two streams may overlap and cannot. The first
// execute() on a stream allocates that stream's Temps once; later ones reuse them and the
// launch arguments (TMA tensor maps included) resolved for the last pointer set.
#include "loom/plan.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "driver/compile.h"
#include "driver/executor.h"
#include "driver/run.h"
#include "driver/size_variants.h"
#include "frontend/parser.h"
#include "frontend/sizes.h"
#include "ir/graph.h"
#include "passes/knobs.h"
#include "runtime/cubin_cache.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"
#include "tune/tuned_knobs.h"

namespace loom {

namespace {

const char* role_name(TensorRole r) { return r == TensorRole::Input ? "input" : "output"; }

std::string hex(const void* p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

// Makes GPU `device` current for a scope and gives the caller's device back after: a
// caller's thread may work on another GPU between executions. A thread with no context
// yet gets none back (setting device 0 would create GPU 0's primary context).
class DeviceScope {
 public:
  explicit DeviceScope(int device) : device_(device) {
    CUcontext ctx = nullptr;
    check_cu(driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
    if (ctx && cudaGetDevice(&prev_) != cudaSuccess) {
      cudaGetLastError();
      prev_ = -1;
    }
    if (prev_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice (the plan's GPU)");
    ensure_context();  // a thread's first CUDA call: bind the primary context
  }
  ~DeviceScope() {
    if (prev_ >= 0 && prev_ != device_) cudaSetDevice(prev_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int device_;
  int prev_ = -1;
};

// cuMemGetAddressRange through cudart (runtime/driver.h says why the driver is not
// linked): the allocation a pointer lies in, so that execute() refuses a buffer that
// ends before its tensor does (the kernel would write past it, into someone else's
// memory). nullptr where the driver does not offer it: the check is then skipped.
using AddressRangeFn = decltype(&::cuMemGetAddressRange);
AddressRangeFn address_range_fn() {
  static const AddressRangeFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, CUDA_VERSION, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return AddressRangeFn(nullptr);
    }
    return reinterpret_cast<AddressRangeFn>(p);
  }();
  return fn;
}

}  // namespace

std::string no_gpu_reason(int device) {
  std::string why;
  return probe_device(device, &why) ? std::string() : why;
}

// One stream's launch state: its Temps (owned) and the launch resolved for `bound` and
// `bound_sizes`.
struct StreamState {
  std::mutex mu;  // two threads on one stream take turns
  std::map<std::string, void*> temps;
  std::map<std::string, void*> bound;
  std::map<std::string, int64_t> bound_sizes;
  std::unique_ptr<ProgramLauncher> launcher;
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

struct Plan::Impl {
  std::string expression;
  Graph graph;                       // PlanOptions::sizes bound; run-time sizes symbolic
  std::vector<std::string> runtime;  // PlanOptions::runtime_sizes
  // One kernel, or one per range of a run-time M (driver/size_variants.h); program() is
  // the top range's, whose tensors every variant shares.
  SizeVariants variants;
  const CompiledProgram& program() const { return variants.primary(); }
  std::vector<TensorInfo> tensors;
  std::vector<std::pair<std::string, std::string>> knobs;
  double flops = 0;
  int device = 0;
  std::string not_executable;  // empty when loaded
  std::vector<std::unique_ptr<Module>> modules;  // one per variant

  // Per stream; cudaStreamPerThread is a different stream in every thread, so its key
  // carries the thread.
  using StreamKey = std::pair<CUstream_st*, std::thread::id>;
  std::mutex streams_mu;
  std::map<StreamKey, std::unique_ptr<StreamState>> streams;

  ~Impl();
  void compile(const Graph& parsed, const PlanOptions& opt);
  void bind(const Graph& parsed, const PlanOptions& opt);
  void check_names(const std::map<std::string, void*>& ptrs) const;
  void check_sizes(const std::map<std::string, int64_t>& sizes) const;
  TensorInfo info(const TensorDecl& t, const Expr::Env& env) const;
  void check_device(const std::map<std::string, void*>& ptrs,
                    const std::map<std::string, int64_t>& sizes) const;
  StreamState& state_for(CUstream_st* stream);
  std::string tensor_names() const;
};

Plan::Impl::~Impl() {
  if (modules.empty()) return;
  // Freeing needs the plan's GPU current; a failure here has nobody to report to.
  try {
    DeviceScope scope(device);
    for (auto& [key, s] : streams)
      for (auto& [name, ptr] : s->temps) cudaFree(ptr);
    streams.clear();
    modules.clear();
  } catch (const Error&) {
  }
}

std::string Plan::Impl::tensor_names() const {
  std::string names;
  for (const auto& t : tensors) names += (names.empty() ? "" : ", ") + t.name;
  return names;
}

// Binds PlanOptions::sizes into `graph`, keeping runtime_sizes symbolic; every other
// symbol is an error naming both ways to give it a value.
void Plan::Impl::bind(const Graph& parsed, const PlanOptions& opt) {
  const std::vector<std::string> symbols = parsed.symbols();
  const std::string have = symbols.empty() ? std::string("it has no size symbols")
                                           : "its size symbols: " + joined(symbols);
  for (const auto& [name, value] : opt.sizes) {
    if (!contains(symbols, name))
      throw Error("PlanOptions::sizes gives " + name + ", which `" + expression + "` does not have; " + have);
    if (value < 1 || value > kMaxExtent)
      throw Error("PlanOptions::sizes: " + name + " = " + std::to_string(value) +
                  " is outside 1..2^48");
  }
  for (const auto& name : opt.runtime_sizes) {
    if (!contains(symbols, name))
      throw Error("PlanOptions::runtime_sizes lists " + name + ", which `" + expression +
                  "` does not have; " + have);
    if (opt.sizes.count(name))
      throw Error(name + " is in both PlanOptions::sizes and PlanOptions::runtime_sizes: keep it in one");
    if (!contains(runtime, name)) runtime.push_back(name);
  }
  for (const auto& sym : symbols)
    if (!opt.sizes.count(sym) && !contains(runtime, sym))
      throw Error("size symbol " + sym + " of `" + expression + "` has no value: set PlanOptions::sizes[\"" +
                  sym + "\"] (a plan for that size), or list " + sym +
                  " in PlanOptions::runtime_sizes to give it at each execute()");
  graph = parsed;
  for (auto& n : graph.nodes)
    for (auto& d : n.shape)
      if (d.is_sym() && opt.sizes.count(d.sym)) d = Dim{opt.sizes.at(d.sym), ""};
  check_tensor_sizes(graph);  // run-time sizes count as 1 here, and are checked at execute()
}

void Plan::Impl::check_sizes(const std::map<std::string, int64_t>& sizes) const {
  for (const auto& r : runtime)
    if (!sizes.count(r))
      throw ArgumentError("`" + expression + "` takes " + r + " at run time: pass its value in " +
                          "execute()'s sizes (its run-time sizes: " + joined(runtime) + ")");
  for (const auto& [name, value] : sizes) {
    if (!contains(runtime, name))
      throw ArgumentError(runtime.empty()
                              ? "`" + expression + "` has no run-time sizes, so execute() takes no " +
                                    name + ": its sizes were bound when the plan was made"
                              : "`" + expression + "` has no run-time size " + name +
                                    "; its run-time sizes: " + joined(runtime));
    if (value < 1 || value > kMaxExtent)
      throw ArgumentError("run-time size " + name + " = " + std::to_string(value) + " is outside 1..2^48");
  }
  if (runtime.empty()) return;
  try {
    check_tensor_sizes(graph, sizes);
  } catch (const Error& e) {
    throw ArgumentError(e.what());
  }
}

TensorInfo Plan::Impl::info(const TensorDecl& t, const Expr::Env& env) const {
  TensorInfo e;
  e.name = t.name;
  e.role = role_name(t.role);
  e.dtype = dtype_name(t.dtype);
  bool known = true;
  for (const auto& d : t.shape) {
    std::set<std::string> vars;
    d.collect_vars(vars);
    bool ok = true;
    for (const auto& v : vars) ok = ok && env.count(v);
    e.shape.push_back(ok ? d.eval(env) : -1);
    e.dims.push_back(vars.empty() ? std::to_string(d.eval(env)) : d.str());
    known = known && ok;
  }
  // A pitched view's pointer must reach its footprint (its last row ends at its width).
  e.bytes = known ? (t.pitched() ? t.footprint() : t.numel()).eval(env) * int64_t(dtype_bytes(t.dtype))
                  : -1;
  return e;
}

void Plan::Impl::compile(const Graph& parsed, const PlanOptions& opt) {
  device = opt.device;
  Target target;
  std::optional<DeviceInfo> dev;
  if (opt.target.empty()) {
    std::string why;
    dev = probe_device(opt.device, &why);
    if (!dev)
      throw NoGpuError("a Loom plan for GPU " + std::to_string(opt.device) + " needs that GPU: " + why +
                       " (set PlanOptions::target, e.g. \"sm_90a\", to compile without one)");
    target = target_for_device(*dev);
  } else {
    target = Target::for_arch(opt.target);
    not_executable = "it was compiled for " + opt.target +
                     " only (PlanOptions::target): make the plan without a target to run it on a GPU";
  }
  bind(parsed, opt);
  const Graph& g = graph;
  CompileOptions copt;
  copt.knobs = Knobs::parse(opt.knobs);
  copt.target = target;
  // The GPU current while the database is read and the module loaded, the caller's after.
  std::optional<DeviceScope> scope;
  if (dev) {
    scope.emplace(opt.device);
    tune::tuning_db_lookup(opt.use_tuning_db)(g, *dev, copt);
  }
  variants = compile_size_variants(g, copt, expression == "<graph>" ? "" : expression);
  const CompiledProgram& program = this->program();
  if (runtime.empty()) flops = expression_flops(g);

  const Expr::Env no_symbols;
  for (TensorRole role : {TensorRole::Input, TensorRole::Output})
    for (const auto& t : program.state.kernel.tensors)
      if (t.role == role) tensors.push_back(info(t, no_symbols));
  // Temps are allocated once per stream; one whose size moves with a run-time size
  // would need reallocating (and a device-wide sync) whenever the size grows.
  for (const auto& t : program.state.kernel.tensors) {
    if (t.role == TensorRole::Input || t.role == TensorRole::Output) continue;
    std::set<std::string> vars;
    t.numel().collect_vars(vars);
    if (!vars.empty())
      throw Error("`" + expression + "` with run-time sizes needs a workspace (" + t.name +
                  ") whose size depends on " + *vars.begin() + ": bind " + *vars.begin() +
                  " in PlanOptions::sizes, or choose knobs without a workspace (SPLITK=1, SPLIT_KV=1)");
  }
  for (const auto& d : knob_registry()) {
    auto it = program.state.used_knobs.find(d.name);
    if (it != program.state.used_knobs.end()) knobs.emplace_back(d.name, it->second);
  }

  if (!not_executable.empty()) return;
  CubinCache cache;
  for (const auto& v : variants.variants) {
    CompileResult cr = loom::compile(nvrtc_request(v.program.cuda, target.arch), &cache);
    modules.push_back(std::make_unique<Module>(Module::load(cr.cubin)));
  }
}

void Plan::Impl::check_names(const std::map<std::string, void*>& ptrs) const {
  for (const auto& t : tensors) {
    auto it = ptrs.find(t.name);
    if (it == ptrs.end())
      throw ArgumentError("no pointer for " + t.role + " " + t.name + " of `" + expression +
                          "`: pass one for each of " + tensor_names());
    if (!it->second)
      throw ArgumentError("the pointer for " + t.name + " of `" + expression +
                          "` is null: pass the device address of its " +
                          (t.bytes >= 0 ? std::to_string(t.bytes) + " bytes" : std::string("data")));
    if (reinterpret_cast<uintptr_t>(it->second) % kPointerAlignment != 0)
      throw ArgumentError("the pointer for " + t.name + " (" + hex(it->second) + ") is not " +
                          std::to_string(kPointerAlignment) +
                          "-byte aligned, as the kernel's TMA and vector accesses need: pass an aligned "
                          "address (cudaMalloc's are) or copy the tensor into an aligned buffer");
  }
  for (const auto& [name, ptr] : ptrs) {
    bool known = false;
    for (const auto& t : tensors) known = known || t.name == name;
    if (!known)
      throw ArgumentError("`" + expression + "` has no tensor named " + name + "; its tensors: " +
                          tensor_names());
  }
}

// Needs the plan's GPU current: where each pointer lives (cudaPointerGetAttributes) and
// how much of its allocation is left from it (cuMemGetAddressRange).
void Plan::Impl::check_device(const std::map<std::string, void*>& ptrs,
                              const std::map<std::string, int64_t>& sizes) const {
  const Expr::Env env(sizes.begin(), sizes.end());
  for (const auto& [name, ptr] : ptrs) {
    cudaPointerAttributes a{};
    cudaError_t e = cudaPointerGetAttributes(&a, ptr);
    if (e != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it so the caller's next call does not see it
      throw ArgumentError("the pointer for " + name + " (" + hex(ptr) + ") is not CUDA memory (" +
                          cudaGetErrorString(e) + "): pass device memory of GPU " +
                          std::to_string(device) + " (cudaMalloc)");
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
      throw ArgumentError("the pointer for " + name + " (" + hex(ptr) + ") is host memory" +
                          (a.type == cudaMemoryTypeHost ? " (pinned)" : "") +
                          ", not device memory: pass a buffer of GPU " + std::to_string(device) +
                          " (cudaMalloc) and copy the data there");
    if (a.type == cudaMemoryTypeDevice && a.device != device)
      throw ArgumentError("the pointer for " + name + " is on GPU " + std::to_string(a.device) +
                          " but the plan runs on GPU " + std::to_string(device) +
                          ": make the plan with PlanOptions::device = " + std::to_string(a.device) +
                          " or copy " + name + " to GPU " + std::to_string(device));
    CUdeviceptr base = 0;
    size_t size = 0;
    const AddressRangeFn range = address_range_fn();
    if (!range || range(&base, &size, CUdeviceptr(ptr)) != CUDA_SUCCESS) continue;
    const uint64_t left = uint64_t(base) + size - uint64_t(CUdeviceptr(ptr));
    for (const auto& t : program().state.kernel.tensors) {
      if (t.name != name) continue;
      const TensorInfo need = info(t, env);
      if (need.bytes >= 0 && uint64_t(need.bytes) > left) {
        std::string shape;
        for (const auto& d : need.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
        throw ArgumentError("the buffer for " + name + " (" + hex(ptr) + ") ends " + std::to_string(left) +
                            " bytes after the pointer, but " + name + " (" + need.dtype + "[" + shape +
                            "]) needs " + std::to_string(need.bytes) +
                            ": pass a buffer of at least that size (Plan::tensors() gives every tensor's bytes)");
      }
    }
  }
}

StreamState& Plan::Impl::state_for(CUstream_st* stream) {
  StreamKey key{stream, stream == cudaStreamPerThread ? std::this_thread::get_id() : std::thread::id()};
  std::lock_guard<std::mutex> lock(streams_mu);
  auto& s = streams[key];
  if (!s) {
    auto fresh = std::make_unique<StreamState>();
    const Expr::Env no_symbols;
    for (const auto& t : program().state.kernel.tensors) {
      if (t.role == TensorRole::Input || t.role == TensorRole::Output) continue;
      size_t bytes = size_t(t.numel().eval(no_symbols)) * size_t(dtype_bytes(t.dtype));
      void* d = nullptr;
      cudaError_t e = cudaMalloc(&d, std::max<size_t>(bytes, 16));
      if (e == cudaSuccess && t.zero_init) e = cudaMemset(d, 0, bytes);
      if (e != cudaSuccess) {
        cudaGetLastError();
        if (d) cudaFree(d);
        for (auto& [n, p] : fresh->temps) cudaFree(p);
        throw Error("cannot allocate the " + std::to_string(bytes) + "-byte workspace " + t.name +
                    " of `" + expression + "` on GPU " + std::to_string(device) + " (" +
                    cudaGetErrorString(e) + "): free GPU memory or pick knobs without split-K");
      }
      fresh->temps[t.name] = d;
    }
    s = std::move(fresh);
  }
  return *s;
}

Plan::Plan(const std::string& expression, const PlanOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->expression = expression;
  impl_->compile(parse_expression(expression), options);
}

Plan::Plan(const Graph& graph, const PlanOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->expression = "<graph>";
  impl_->compile(graph, options);
}

Plan::~Plan() = default;
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;

void Plan::check(const std::map<std::string, void*>& tensors,
                 const std::map<std::string, int64_t>& sizes) const {
  impl_->check_names(tensors);
  impl_->check_sizes(sizes);
  if (!impl_->not_executable.empty())
    throw NoGpuError("this plan of `" + impl_->expression + "` cannot execute: " + impl_->not_executable);
  DeviceScope scope(impl_->device);
  impl_->check_device(tensors, sizes);
}

void Plan::execute(const std::map<std::string, void*>& tensors,
                   const std::map<std::string, int64_t>& sizes, CUstream_st* stream) const {
  Impl& p = *impl_;
  p.check_names(tensors);
  p.check_sizes(sizes);
  if (!p.not_executable.empty())
    throw NoGpuError("this plan of `" + p.expression + "` cannot execute: " + p.not_executable);
  DeviceScope scope(p.device);
  StreamState& s = p.state_for(stream);
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.launcher || s.bound != tensors || s.bound_sizes != sizes) {
    p.check_device(tensors, sizes);
    std::map<std::string, void*> all = tensors;
    all.insert(s.temps.begin(), s.temps.end());
    DeviceTensors views;  // owns nothing: every tensor is given
    // The variant of these sizes: its own grid, functions and tensor maps.
    const size_t v = p.variants.index_for(sizes);
    const KernelProgram& kp = p.variants.variants[v].program.state.kernel;
    views.adopt(kp, all, sizes);
    if (s.launcher && s.bound_sizes == sizes) {
      s.launcher->rebind(views);  // new buffers only: keep grids, functions, layouts
    } else {
      s.launcher.reset();
      s.launcher = std::make_unique<ProgramLauncher>(kp, *p.modules[v], views, sizes);
    }
    s.bound = tensors;
    s.bound_sizes = sizes;
  }
  s.launcher->launch_all(stream);
}

void Plan::execute(const std::vector<void*>& tensors, const std::map<std::string, int64_t>& sizes,
                   CUstream_st* stream) const {
  const auto& ts = impl_->tensors;
  if (tensors.size() != ts.size())
    throw ArgumentError("execute() got " + std::to_string(tensors.size()) + " pointers for the " +
                        std::to_string(ts.size()) + " tensors of `" + impl_->expression +
                        "`: pass one for each, in this order: " + impl_->tensor_names());
  std::map<std::string, void*> named;
  for (size_t i = 0; i < ts.size(); ++i) named[ts[i].name] = tensors[i];
  execute(named, sizes, stream);
}

const std::string& Plan::expression() const { return impl_->expression; }
const std::vector<TensorInfo>& Plan::tensors() const { return impl_->tensors; }
const TensorInfo& Plan::tensor(const std::string& name) const {
  for (const auto& t : impl_->tensors)
    if (t.name == name) return t;
  throw ArgumentError("`" + impl_->expression + "` has no tensor named " + name + "; its tensors: " +
                      impl_->tensor_names());
}
TensorInfo Plan::tensor(const std::string& name, const std::map<std::string, int64_t>& sizes) const {
  tensor(name);  // the unknown-name error
  impl_->check_sizes(sizes);
  const Expr::Env env(sizes.begin(), sizes.end());
  for (const auto& t : impl_->program().state.kernel.tensors)
    if (t.name == name) return impl_->info(t, env);
  throw ArgumentError("no tensor " + name);  // unreachable: tensor(name) found it
                      }
                      const std::vector<std::string>& Plan::runtime_sizes() const { return impl_->runtime; }
                      const std::vector<std::pair<std::string, std::string>>& Plan::knobs() const { return impl_->knobs; }
                      std::string Plan::knobs_string() const {
                      std::string s;
  for (const auto& [k, v] : impl_->knobs) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}
const std::string& Plan::knob_source() const { return impl_->program().knob_source; }
const std::vector<std::string>& Plan::notes() const { return impl_->program().notes; }
const std::string& Plan::cuda_source() const { return impl_->program().cuda; }
const std::string& Plan::arch() const { return impl_->program().state.target.arch; }
double Plan::flops() const { return impl_->flops; }
int Plan::device() const { return impl_->device; }

std::vector<PlanVariant> Plan::variants() const {
  std::vector<PlanVariant> out;
  for (const auto& v : impl_->variants.variants) {
    PlanVariant pv;
    pv.size = v.range.symbol;
    pv.lo = v.range.lo;
    pv.hi = v.range.hi;
    for (const auto& d : knob_registry()) {
      auto it = v.program.state.used_knobs.find(d.name);
      if (it != v.program.state.used_knobs.end())
        pv.knobs += (pv.knobs.empty() ? "" : ",") + d.name + "=" + it->second;
    }
    pv.knob_source = v.program.knob_source;
    out.push_back(std::move(pv));
  }
  return out;
}

size_t Plan::variant_for(const std::map<std::string, int64_t>& sizes) const {
  impl_->check_sizes(sizes);
  return impl_->variants.index_for(sizes);
}
bool Plan::executable() const { return impl_->not_executable.empty(); }
const std::string& Plan::not_executable_reason() const { return impl_->not_executable; }

std::string Plan::describe() const {
  const Impl& p = *impl_;
  std::ostringstream s;
  s << "plan: " << p.expression << "\n";
  s << "  target: " << arch() << ", GPU " << p.device
    << (executable() ? " (loaded)" : " (compile only: " + p.not_executable + ")") << "\n";
  if (!p.runtime.empty()) s << "  run-time sizes: " << joined(p.runtime) << "\n";
  if (p.variants.variants.size() > 1) {
    s << "  kernels, one per range of " << p.variants.variants.front().range.symbol
      << " (each execute() runs its size's):\n" << p.variants.describe("    ");
  } else {
    s << "  knobs: " << knobs_string() << " (" << p.program().knob_source << ")\n";
  }
  for (const auto& t : p.tensors) {
    s << "  " << t.role << " " << t.name << ": " << t.dtype << "[";
    for (size_t i = 0; i < t.dims.size(); ++i) s << (i ? "," : "") << t.dims[i];
    s << "], " << (t.bytes >= 0 ? std::to_string(t.bytes) + " bytes" : std::string("bytes by run-time sizes"))
      << "\n";
  }
  for (const auto& n : p.program().notes) s << "  note: " << n << "\n";
  return s.str();
}

}  // namespace loom
