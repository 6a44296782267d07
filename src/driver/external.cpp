#include "driver/external.h"

#include "driver/run.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "runtime/cubin_cache.h"
#include "runtime/nvrtc.h"

namespace loom {

ExternalProgram compile_external(const std::string& expression, const Knobs& knobs,
                                 const Target& target, const std::map<std::string, int64_t>& sizes,
                                 const ChooseTuned& choose_tuned, const DeviceInfo* device) {
  ExternalProgram p;
  p.expression = expression;
  const Graph parsed = parse_expression(expression);
  check_dims_named(parsed, sizes);
  Graph g = bind_sizes(parsed, sizes);
  CompileOptions copt;
  copt.knobs = knobs;
  copt.target = target;
  if (choose_tuned && device) choose_tuned(g, *device, copt);
  p.program = compile_graph(g, copt, expression);
  p.flops = expression_flops(g);
  // Every size is a number here (bind_sizes refused unbound symbols), so the shapes
  // evaluate without the launch's symbol table.
  const Expr::Env no_symbols;
  for (const auto& t : p.program.state.kernel.tensors) {
    if (t.role != TensorRole::Input && t.role != TensorRole::Output) continue;
    ExternalTensor e;
    e.name = t.name;
    e.role = t.role;
    e.dtype = t.dtype;
    for (const auto& d : t.shape) e.shape.push_back(d.eval(no_symbols));
    e.bytes = t.numel().eval(no_symbols) * int64_t(dtype_bytes(t.dtype));
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
