// loom._C: Loom's pipeline from Python, on PyTorch's tensors and stream. The package
// python/loom wraps it (python/loom/ops.py: the torch ops); scripts/attention_bench.py uses
// it directly. A thin layer over driver/external.h (compile, bind caller pointers,
// launch), the ladders (driver/ladder.h) and `loom run` (driver/run.h); every loom::Error
// arrives in Python as a RuntimeError with Loom's message, and every note of a compile
// (CompiledProgram::notes, which `loom` prints as "loom: note: ...") as a
// loom.NoteWarning through Python's warnings module.
//
// A Kernel launches on buffers the caller owns, its workspace (the program's Temps:
// split-K's partial sums and tile counters) included, and gives its shared-memory tensors
// no device buffer, so that launching allocates nothing and synchronizes nothing: PyTorch's caching allocator provides every byte, and a launch
// can be captured into a CUDA graph (python/loom/ops.py).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

#include "driver/external.h"
#include "driver/executor.h"
#include "driver/ladder.h"
#include "ir/program.h"
#include "driver/run.h"
#include "passes/knobs.h"
#include "runtime/cubin_cache.h"
#include "runtime/nvrtc.h"
#include "tune/tuned_knobs.h"

namespace nb = nanobind;
using namespace loom;

namespace {

nb::dict tensor_dict(const ExternalTensor& t) {
  nb::dict d;
  d["name"] = t.name;
  d["role"] = t.role == TensorRole::Input ? "input" : "output";
  d["dtype"] = dtype_name(t.dtype);
  d["shape"] = t.shape;
  d["bytes"] = t.bytes;
  return d;
}

// loom.NoteWarning (a UserWarning), set when the module loads.
PyObject* note_warning = nullptr;

// A compile's notes (knobs that did something their writer may not have meant) through
// warnings.warn rather than straight to stderr as `loom` does: they still reach stderr
// under Python's default filter, but a caller can filter them by category, turn them
// into errors (-W error, pytest's filterwarnings) or catch them, and the default filter
// shows each note once per call site rather than at every compile of a loop.
void warn_notes(const std::vector<std::string>& notes) {
  for (const auto& n : notes)
    if (PyErr_WarnEx(note_warning, n.c_str(), 1) < 0) throw nb::python_error();
}

nb::list tensor_list(const ExternalProgram& p) {
  nb::list l;
  for (const auto& t : p.tensors) l.append(tensor_dict(t));
  return l;
}

// The GPU a Kernel runs on: its DeviceInfo, made current (primary context).
DeviceInfo current_device(int ordinal) {
  std::string why;
  auto dev = probe_device(ordinal, &why);
  if (!dev) throw Error("loom needs a GPU for this: " + why);
  make_device_current(ordinal);
  return *dev;
}

// compile(expr, knobs, target, dims): the CPU half, for a named target (no GPU).
// "M,N" -> {"M", "N"}: the size symbols a launch gives (Kernel's and compile's runtime=).
std::vector<std::string> symbol_list(const std::string& runtime) {
  std::vector<std::string> names;
  for (size_t at = 0; at < runtime.size();) {
    size_t comma = std::min(runtime.find(',', at), runtime.size());
    if (comma > at) names.push_back(runtime.substr(at, comma - at));
    at = comma + 1;
  }
  return names;
}

ExternalProgram compile_for_target(const std::string& expr, const std::string& knobs,
                                   const std::string& target, const std::string& dims,
                                   const std::string& runtime) {
  ExternalProgram p = compile_external(expr, Knobs::parse(knobs), Target::for_arch(target),
                                       parse_dims(dims), nullptr, nullptr, symbol_list(runtime));
  warn_notes(p.program.notes);
  return p;
}

// A Kernel: compiled for GPU `device` (its SM count and shared memory, and the tuning
// database's record when use_db), NVRTC-compiled through the cubin cache and loaded there.
class Kernel {
 public:
  // runtime: size symbols left unbound ("M" or "M,N"), whose values every launch gives.
  Kernel(const std::string& expr, const std::string& knobs, int device, bool use_db,
         const std::string& dims, const std::string& runtime)
      : device_(device) {
    DeviceInfo dev = current_device(device);
    p_ = compile_external(expr, Knobs::parse(knobs), target_for_device(dev), parse_dims(dims),
                          tune::tuning_db_lookup(use_db), &dev, symbol_list(runtime));
    warn_notes(p_.program.notes);
    const Expr::Env no_symbols;
    for (const auto& t : p_.program.state.kernel.tensors) {
      if (t.role != TensorRole::Temp) continue;
      nb::dict w;
      w["name"] = t.name;
      w["bytes"] = t.numel().eval(no_symbols) * int64_t(dtype_bytes(t.dtype));
      w["zero_init"] = t.zero_init;
      workspace_.append(w);
      temps_.push_back(t.name);
    }
    CubinCache cache;
    for (const auto& v : p_.variants.variants) {
      CompileResult cr = compile(nvrtc_request(v.program.cuda, dev.arch()), &cache);
      modules_.push_back(std::make_unique<Module>(Module::load(cr.cubin)));
    }
  }
  // ptrs: tensor name -> device address (torch.Tensor.data_ptr()) for every input, output
  // and workspace buffer; stream: a cudaStream_t as an integer
  // (torch.cuda.current_stream().cuda_stream; 0 is the legacy stream). Arguments and TMA
  // maps are resolved again only when the pointers change; nothing is allocated, copied or
  // synchronized, so the launch may be captured into a CUDA graph.
  // sizes: the values of the run-time sizes ({"M": 1000}); the tensor maps and the grid
  // are made from them, again whenever they or the pointers change.
  void launch(const std::map<std::string, uintptr_t>& ptrs, uintptr_t stream,
              const std::map<std::string, int64_t>& sizes) {
    if (!launcher_ || ptrs != bound_ || sizes != bound_sizes_) {
      check_runtime_sizes(p_, sizes);
      std::map<std::string, uintptr_t> io;
      for (const auto& [name, ptr] : ptrs)
        if (std::find(temps_.begin(), temps_.end(), name) == temps_.end()) io[name] = ptr;
      check_external_pointers(p_, io);
      std::map<std::string, void*> external;
      for (const auto& [name, ptr] : ptrs) external[name] = reinterpret_cast<void*>(ptr);
      for (const auto& t : temps_) {
        auto it = ptrs.find(t);
        if (it == ptrs.end() || it->second == 0)
          throw Error("no workspace pointer for " + t + " of `" + p_.expression +
                      "`: pass a buffer for each entry of Kernel.workspace");
      }
      // No make_device_current here: its cudaFree(0) may not run inside a stream capture,
      // and the caller (python/loom/ops.py) has made the device current already.
      // The kernel of these sizes (one per range of a run-time M, driver/size_variants.h).
      const size_t v = p_.variants.index_for(sizes);
      const KernelProgram& kp = p_.variants.variants[v].program.state.kernel;
      // Shared-memory tensors live in each kernel's dynamic shared memory and are never a
      // kernel argument, but DeviceTensors::adopt gives a device buffer to every tensor it
      // is not handed: a cudaMalloc (and later a cudaFree) per rebind, which a CUDA graph
      // capture refuses. Handing them "no buffer" keeps the launch allocation-free.
      for (const auto& t : kp.tensors)
        if (t.role == TensorRole::Shared) external[t.name] = nullptr;
      if (launcher_ && sizes == bound_sizes_) {
        // New buffers for the same tensors (the usual case: each call's output is a new
        // allocation): only the arguments and the moved buffers' tensor maps change.
        tensors_->adopt(kp, external, sizes);
        launcher_->rebind(*tensors_);
      } else {
        // First launch, or new run-time sizes: the grid and every tensor map change.
        launcher_.reset();
        tensors_ = std::make_unique<DeviceTensors>();
        tensors_->adopt(kp, external, sizes);
        launcher_ = std::make_unique<ProgramLauncher>(kp, *modules_[v], *tensors_, sizes);
      }
      bound_ = ptrs;
      bound_sizes_ = sizes;
    }
    launcher_->launch_all(reinterpret_cast<cudaStream_t>(stream));
  }
  const ExternalProgram& program() const { return p_; }
  nb::list workspace() const { return workspace_; }
  // The kernels and the run-time sizes each serves (Plan::variants' fields), and which one
  // a launch with `sizes` runs.
  nb::list variants() const {
    nb::list l;
    for (const auto& v : p_.variants.variants) {
      nb::dict d;
      d["size"] = v.range.symbol;
      d["lo"] = v.range.lo;
      d["hi"] = v.range.hi;
      std::string knobs;
      for (const auto& r : knob_registry()) {
        auto it = v.program.state.used_knobs.find(r.name);
        if (it != v.program.state.used_knobs.end())
          knobs += (knobs.empty() ? "" : ",") + r.name + "=" + it->second;
      }
      d["knobs"] = knobs;
      d["knob_source"] = v.program.knob_source;
      l.append(d);
    }
    return l;
  }
  size_t variant_for(const std::map<std::string, int64_t>& sizes) const {
    check_runtime_sizes(p_, sizes);
    return p_.variants.index_for(sizes);
  }

 private:
  int device_ = 0;
  ExternalProgram p_;
  nb::list workspace_;
  std::vector<std::string> temps_;
  std::vector<std::unique_ptr<Module>> modules_;  // one per variant
  std::map<std::string, uintptr_t> bound_;
  std::map<std::string, int64_t> bound_sizes_;
  std::unique_ptr<DeviceTensors> tensors_;
  std::unique_ptr<ProgramLauncher> launcher_;
};

nb::dict ladder_dict(const Ladder& l) {
  nb::dict d;
  d["name"] = l.name;
  d["expression"] = l.expression;
  d["reference"] = l.reference;
  nb::list steps;
  for (const auto& s : l.steps) {
    nb::dict step;
    step["name"] = s.name;
    step["knobs"] = s.knobs;
    step["what"] = s.what;
    steps.append(step);
  }
  d["steps"] = steps;
  return d;
}

// `loom run [--bench]` on Loom's own seeded inputs: verification against the fp64
// reference (and Loom's own timing with --bench), as a dict.
nb::dict run(const std::string& expr, const std::string& knobs, bool bench, int reps,
             const std::string& l2, uint64_t seed, int device, bool use_db) {
  RunOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.bench = bench;
  opt.timing.reps = reps;
  opt.l2 = parse_l2_request(l2);
  opt.seed = seed;
  opt.device = device;
  opt.command_line = "loom.run";
  opt.choose_tuned = tune::tuning_db_lookup(use_db);
  RunReport r = run_expression(expr, opt);
  warn_notes(r.program.notes);
  nb::dict d;
  d["passed"] = r.verify.passed;
  d["verify"] = r.verify.message;
  d["flops"] = r.flops;
  d["knobs"] = r.kernels.empty() ? std::string() : r.kernels[0].knobs;
  d["report"] = format_run_report(r);
  d["notes"] = r.program.notes;
  nb::dict us;
  for (const auto& b : r.backends) us[b.name.c_str()] = b.timing.median_us;
  d["median_us"] = us;
  return d;
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "loom._C: Loom's compiler pipeline on PyTorch's tensors (python/README.md)";
  note_warning = PyErr_NewExceptionWithDoc(
      "loom.NoteWarning",
      "A compile's note: knobs that did something their writer may not have meant",
      PyExc_UserWarning, nullptr);
  m.attr("NoteWarning") = nb::handle(note_warning);

  nb::class_<ExternalProgram>(m, "Program")
      .def_ro("expression", &ExternalProgram::expression)
      .def_ro("flops", &ExternalProgram::flops)
      .def_ro("knobs", &ExternalProgram::knobs)
      .def_prop_ro("tensors", &tensor_list)
      .def_prop_ro("cuda", [](const ExternalProgram& p) { return p.program.cuda; })
      .def_prop_ro("summary", [](const ExternalProgram& p) { return p.program.summary; })
      .def_prop_ro("knob_source", [](const ExternalProgram& p) { return p.program.knob_source; })
      .def_prop_ro("notes", [](const ExternalProgram& p) { return p.program.notes; })
      .def("ir", [](const ExternalProgram& p, const std::string& level) -> std::string {
        if (level == "loop") return print(p.program.state.loop);
        if (level == "tile") return print(p.program.state.tile);
        if (level == "kernel") return print(p.program.state.kernel);
        if (level == "cuda") return p.program.cuda;
        throw Error("Program.ir: level '" + level + "' is not one of loop, tile, kernel, cuda");
      }, nb::arg("level") = "cuda",
           "One level of the program, as `loom compile --ir LEVEL` prints it (loop is the "
           "Loop IR after fusion)")
      .def("check_pointers", &check_external_pointers, nb::arg("ptrs"),
           "Raises unless ptrs names every input and output with a non-null address");

  m.def("compile", &compile_for_target, nb::arg("expression"), nb::arg("knobs") = "",
        nb::arg("target") = "sm_90a", nb::arg("dims") = "", nb::arg("runtime") = "",
        "Compile through the pipeline for a named target (no GPU needed); runtime: size "
        "symbols left unbound (\"M\"), as a Kernel's launches would give them");

  nb::class_<Kernel>(m, "Kernel")
      .def(nb::init<const std::string&, const std::string&, int, bool, const std::string&,
                    const std::string&>(),
           nb::arg("expression"), nb::arg("knobs") = "", nb::arg("device") = 0,
           nb::arg("use_db") = true, nb::arg("dims") = "", nb::arg("runtime") = "",
           "Compile for the GPU and load the kernels (knobs over the defaults or the tuned "
           "record); runtime: size symbols left unbound (\"M\"), given at each launch")
      .def("launch", &Kernel::launch, nb::arg("ptrs"), nb::arg("stream") = 0,
           nb::arg("sizes") = std::map<std::string, int64_t>{},
           "Enqueue the program on the caller's device pointers (inputs, outputs, workspace) "
           "and stream, with the run-time sizes' values: no allocation, no sync")
      .def_prop_ro("program", &Kernel::program, nb::rv_policy::reference_internal)
      .def_prop_ro("variants", &Kernel::variants,
                   "The kernels and the run-time sizes each serves: one, or one per range of a "
                   "run-time M (size, lo, hi, knobs, knob_source)")
      .def("variant_for", &Kernel::variant_for, nb::arg("sizes"),
           "The index in variants of the kernel a launch with these run-time sizes runs")
      .def_prop_ro("workspace", &Kernel::workspace,
                   "The program's own buffers (name, bytes, zero_init) the caller passes to "
                   "launch; zero_init ones must be zeroed (the kernels leave them zero)");

  m.def("ladder", [](const std::string& name, const std::string& shape, const std::string& dtype,
                     bool causal) { return ladder_dict(make_ladder(name, shape, dtype, causal)); },
        nb::arg("name"), nb::arg("shape") = "", nb::arg("dtype") = "", nb::arg("causal") = false,
        "A ladder's expression and steps, as `loom ladder` defines them");
  m.def("ladder_names", &ladder_names);
  m.def("knob_names", [] {
    std::vector<std::string> names;
    for (const auto& d : knob_registry()) names.push_back(d.name);
    return names;
  });
  m.def("run", &run, nb::arg("expression"), nb::arg("knobs") = "", nb::arg("bench") = false,
        nb::arg("reps") = 50, nb::arg("l2") = "auto", nb::arg("seed") = 1, nb::arg("device") = 0,
        nb::arg("use_db") = true, "`loom run [--bench]`: verify against fp64 (and time)");
  m.def("device", [](int ordinal) -> nb::object {
    std::string why;
    auto dev = probe_device(ordinal, &why);
    if (!dev) return nb::none();
    nb::dict d;
    d["name"] = dev->name;
    d["arch"] = dev->arch();
    d["sm_count"] = dev->sm_count;
    d["l2_bytes"] = dev->l2_bytes;
    d["driver_version"] = dev->driver_version;
    d["runtime_version"] = dev->runtime_version;
    return d;
  }, nb::arg("ordinal") = 0, "The GPU as Loom's cudart sees it, or None without one");
  m.def("no_device_reason", [](int ordinal) {
    std::string why;
    return probe_device(ordinal, &why) ? std::string() : why;
  }, nb::arg("ordinal") = 0);
}
