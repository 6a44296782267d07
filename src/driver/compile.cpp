#include "driver/compile.h"

#include "codegen/cuda.h"
#include "frontend/parser.h"
#include "passes/defaults.h"

namespace loom {

CompiledProgram compile_graph(const Graph& g, const CompileOptions& opt,
                              const std::string& expression_text) {
  CompiledProgram out;
  CompileState& s = out.state;
  s.graph = g;
  DefaultChoice d = default_knobs(g, opt.target);
  const std::string atom = opt.knobs.get_str("ATOM", "");
  const bool tuned = opt.tuned && (atom.empty() || atom == opt.tuned->get_str("ATOM", "fma"));
  if (tuned) {
    s.knobs = resolve_knobs(*opt.tuned, opt.knobs, *opt.tuned);
    out.knob_source = opt.tuned_source.empty() ? "tuned" : opt.tuned_source;
  } else {
    // The schedule of the atom that will run: the explicit one, else the class default's.
    const std::string effective = atom.empty() ? d.knobs.get_str("ATOM", "fma") : atom;
    const bool wgmma = effective.rfind("wgmma_", 0) == 0;
    s.knobs = resolve_knobs(d.knobs, opt.knobs, wgmma ? d.wgmma : d.mma);
    out.knob_source = "default: class " + d.shape_class +
                      (effective == "fma" ? "" : wgmma ? ", wgmma schedule" : ", mma schedule");
    if (opt.tuned)
      out.knob_source += " (the tuned record, for ATOM=" + opt.tuned->get_str("ATOM", "fma") +
                         ", yields to the explicit ATOM=" + atom + ")";
    else if (!opt.tuned_source.empty())
      out.knob_source += " (" + opt.tuned_source + ")";
  }
  if (!opt.knobs.values().empty()) out.knob_source = "explicit over " + out.knob_source;
  s.target = opt.target;
  s.sizes = opt.sizes;
  run_pipeline(s, opt.stop_after, opt.observer);

  std::string knobs;
  for (const auto& d : knob_registry()) {
    auto it = s.used_knobs.find(d.name);
    if (it != s.used_knobs.end()) knobs += (knobs.empty() ? "" : ",") + d.name + "=" + it->second;
  }
  out.summary = (expression_text.empty() ? std::string("graph") : expression_text) +
                " | target " + s.target.arch + " | knobs " + (knobs.empty() ? "-" : knobs);
  if (s.level == Level::Kernel && opt.stop_after.empty())
    out.cuda = render_cuda(s.kernel, RenderOptions{out.summary});
  return out;
}

CompiledProgram compile_expression(const std::string& expression, const CompileOptions& opt) {
  return compile_graph(parse_expression(expression), opt, expression);
}

}  // namespace loom
