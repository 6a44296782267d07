#include "driver/external.h"

#include <algorithm>
#include <set>

#include "driver/run.h"
#include "frontend/parser.h"
#include "frontend/sizes.h"
#include "ir/error.h"
#include "runtime/cubin_cache.h"
#include "runtime/nvrtc.h"

namespace loom {

ExternalProgram compile_external(const std::string& expression, const Knobs& knobs,
                                 const Target& target, const std::map<std::string, int64_t>& sizes,
                                 const ChooseTuned& choose_tuned, const DeviceInfo* device,
                                 const std::vector<std::string>& runtime) {
  ExternalProgram p;
  p.expression = expression;
  const Graph parsed = parse_expression(expression);
  check_dims_named(parsed, sizes);
  const std::vector<std::string> symbols = parsed.symbols();
  for (const auto& r : runtime) {
    if (std::find(symbols.begin(), symbols.end(), r) == symbols.end())
      throw Error("run-time size " + r + ": `" + expression + "` has no such symbol");
    if (sizes.count(r)) throw Error(r + " is both bound and a run-time size: keep it in one");
    if (std::find(p.runtime.begin(), p.runtime.end(), r) == p.runtime.end()) p.runtime.push_back(r);
  }
  // The run-time sizes stay symbolic: bound to themselves here, checked at each launch.
  Graph g = parsed;
  if (p.runtime.empty()) {
    g = bind_sizes(parsed, sizes);
  } else {
    std::map<std::string, int64_t> bound = sizes;
    for (const auto& r : p.runtime) bound[r] = 1;
    bind_sizes(parsed, bound);  // every other symbol has a value; sizes in range
    for (auto& n : g.nodes)
      for (auto& d : n.shape)
        if (d.is_sym() && sizes.count(d.sym)) d = Dim{sizes.at(d.sym), ""};
  }
  CompileOptions copt;
  copt.knobs = knobs;
  copt.target = target;
  if (choose_tuned && device) choose_tuned(g, *device, copt);
  p.variants = compile_size_variants(g, copt, expression);
  p.program = p.variants.primary();
  p.flops = p.runtime.empty() ? expression_flops(g) : 0;
  const Expr::Env no_symbols;
  auto known = [](const Expr& e) {
    std::set<std::string> vars;
    e.collect_vars(vars);
    return vars.empty();
  };
  for (const auto& t : p.program.state.kernel.tensors) {
    if (t.role == TensorRole::Temp && !known(t.numel()))
      throw Error("`" + expression + "` with run-time sizes needs a workspace (" + t.name +
                  ") that grows with them: bind the sizes, or choose knobs without one (SPLITK=1)");
    if (t.role != TensorRole::Input && t.role != TensorRole::Output) continue;
    ExternalTensor e;
    e.name = t.name;
    e.role = t.role;
    e.dtype = t.dtype;
    for (const auto& d : t.shape) e.shape.push_back(known(d) ? d.eval(no_symbols) : -1);
    // A pitched view's buffer reaches its footprint (its last row ends at its width).
    const Expr elems = t.pitched() ? t.footprint() : t.numel();
    e.bytes = known(elems) ? elems.eval(no_symbols) * int64_t(dtype_bytes(t.dtype)) : -1;
    p.tensors.push_back(e);
  }
  for (const auto& d : knob_registry()) {
    auto it = p.program.state.used_knobs.find(d.name);
    if (it != p.program.state.used_knobs.end())
      p.knobs += (p.knobs.empty() ? "" : ",") + d.name + "=" + it->second;
  }
  return p;
}

void check_external_pointers(const ExternalProgram& p, const std::map<std::string, uintptr_t>& ptrs) {
  std::string names;
  for (const auto& t : p.tensors) names += (names.empty() ? "" : ", ") + t.name;
  for (const auto& t : p.tensors) {
    auto it = ptrs.find(t.name);
    if (it == ptrs.end())
      throw Error("no pointer for " + std::string(t.role == TensorRole::Input ? "input " : "output ") +
                  t.name + " of `" + p.expression + "`: pass one for each of " + names);
    if (it->second == 0) throw Error("the pointer for " + t.name + " is null");
  }
  for (const auto& [name, ptr] : ptrs) {
    bool known = false;
    for (const auto& t : p.tensors) known = known || t.name == name;
    if (!known)
      throw Error("`" + p.expression + "` has no tensor named " + name + "; its tensors: " + names);
  }
}

void check_runtime_sizes(const ExternalProgram& p, const std::map<std::string, int64_t>& sizes) {
  std::string list;
  for (const auto& r : p.runtime) list += (list.empty() ? "" : ", ") + r;
  for (const auto& r : p.runtime)
    if (!sizes.count(r))
      throw Error("`" + p.expression + "` takes " + r + " at run time: pass its value with the launch"
                  " (its run-time sizes: " + list + ")");
  for (const auto& [name, value] : sizes) {
    if (std::find(p.runtime.begin(), p.runtime.end(), name) == p.runtime.end())
      throw Error("`" + p.expression + "` has no run-time size " + name +
                  (list.empty() ? std::string(": its sizes were bound when it was compiled")
                                : "; its run-time sizes: " + list));
    if (value < 1 || value > kMaxExtent)
      throw Error("run-time size " + name + " = " + std::to_string(value) + " is outside 1..2^48");
  }
  const Expr::Env env(sizes.begin(), sizes.end());
  for (const auto& t : p.program.state.kernel.tensors) {
    // Each factor is at most 2^48: the running product stays within 64 bits until it passes.
    long double bytes = dtype_bytes(t.dtype);
    for (const auto& d : t.shape) bytes *= static_cast<long double>(d.eval(env));
    if (bytes > static_cast<long double>(kMaxTensorBytes))
      throw Error("tensor " + t.name + " of `" + p.expression + "` would take more than 2^48 bytes "
                  "at these run-time sizes");
  }
}

ExternalRunner::ExternalRunner(ExternalProgram p, int device) : p_(std::move(p)), device_(device) {
  std::string why;
  auto dev = probe_device(device, &why);
  if (!dev) throw Error("running a Loom kernel needs a GPU: " + why);
  make_device_current(device);
  if (p_.program.state.target.arch != dev->arch())
    throw Error("`" + p_.expression + "` was compiled for " + p_.program.state.target.arch +
                " but GPU " + std::to_string(device) + " is " + dev->arch() +
                ": compile it for this GPU");
  CubinCache cache;
  CompileResult cr = compile(nvrtc_request(p_.program.cuda, dev->arch()), &cache);
  module_ = std::make_unique<Module>(Module::load(cr.cubin));
}

ExternalRunner::~ExternalRunner() = default;

void ExternalRunner::launch(const std::map<std::string, uintptr_t>& ptrs, cudaStream_t stream) {
  if (!p_.runtime.empty())
    throw Error("`" + p_.expression + "` has run-time sizes: ExternalRunner launches bound "
                "programs only (compile it with every size bound)");
  if (!launcher_ || ptrs != bound_) {
    check_external_pointers(p_, ptrs);
    std::map<std::string, void*> external;
    for (const auto& [name, ptr] : ptrs) external[name] = reinterpret_cast<void*>(ptr);
    const KernelProgram& kp = p_.program.state.kernel;
    if (launcher_) {  // new buffers for the same tensors: rebind, keep what was resolved
      tensors_->adopt(kp, external, {});
      launcher_->rebind(*tensors_);
    } else {
      tensors_ = std::make_unique<DeviceTensors>();
      tensors_->adopt(kp, external, {});
      launcher_ = std::make_unique<ProgramLauncher>(kp, *module_, *tensors_, std::map<std::string, int64_t>{});
    }
    bound_ = ptrs;
  }
  launcher_->launch_all(stream);
}

}  // namespace loom
