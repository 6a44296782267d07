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
  s.knobs = resolve_knobs(d.knobs, opt.knobs, d.mma);
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
