#include "driver/compile.h"

#include "codegen/cuda.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "passes/defaults.h"

namespace loom {

namespace {

// The defaults an explicit knob kept (in keep but not in drop), for messages.
std::string kept_defaults(const Knobs& keep, const Knobs& drop) {
  std::string out;
  for (const auto& [name, value] : keep.values())
    if (!drop.has(name)) out += (out.empty() ? "" : ",") + name + "=" + value;
  return out;
}

}  // namespace

CompiledProgram compile_graph(const Graph& g, const CompileOptions& opt,
                              const std::string& expression_text) {
  CompiledProgram out;
  DefaultChoice d = default_knobs(g, opt.target);
  const std::string atom = opt.knobs.get_str("ATOM", "");
  const bool tuned = opt.tuned && (atom.empty() || atom == opt.tuned->get_str("ATOM", "fma"));
  // Explicit knobs over the defaults (or the tuned record): each replaces only itself
  // where it can (GroupMerge::keep), else, as before, its whole group's defaults drop.
  auto resolve = [&](GroupMerge merge) {
    if (tuned) return resolve_knobs(*opt.tuned, opt.knobs, *opt.tuned, merge);
    const std::string effective = atom.empty() ? d.knobs.get_str("ATOM", "fma") : atom;
    const bool wgmma = effective.rfind("wgmma_", 0) == 0;
    return resolve_knobs(d.knobs, opt.knobs, wgmma ? d.wgmma : d.mma, merge);
  };
  if (tuned) {
    out.knob_source = opt.tuned_source.empty() ? "tuned" : opt.tuned_source;
  } else {
    // The schedule of the atom that will run: the explicit one, else the class default's.
    const std::string effective = atom.empty() ? d.knobs.get_str("ATOM", "fma") : atom;
    const bool wgmma = effective.rfind("wgmma_", 0) == 0;
    out.knob_source = "default: class " + d.shape_class +
                      (effective == "fma" ? "" : wgmma ? ", wgmma schedule" : ", mma schedule");
    if (opt.tuned)
      out.knob_source += " (the tuned record, for ATOM=" + opt.tuned->get_str("ATOM", "fma") +
                         ", yields to the explicit ATOM=" + atom + ")";
    else if (!opt.tuned_source.empty())
      out.knob_source += " (" + opt.tuned_source + ")";
  }
  if (!opt.knobs.values().empty()) out.knob_source = "explicit over " + out.knob_source;

  auto attempt = [&](const Knobs& knobs) {
    CompileState s;
    s.graph = g;
    s.knobs = knobs;
    s.target = opt.target;
    s.sizes = opt.sizes;
    run_pipeline(s, opt.stop_after, opt.observer);
    return s;
  };
  const Knobs keep = resolve(GroupMerge::keep), drop = resolve(GroupMerge::drop);
  if (keep.values() == drop.values()) {
    out.state = attempt(keep);
  } else {
    try {
      out.state = attempt(keep);
    } catch (const Error& kept_error) {
      const std::string kept = kept_defaults(keep, drop);
      try {
        out.state = attempt(drop);
      } catch (const Error& dropped_error) {
        throw Error("the explicit knobs " + opt.knobs.str() + " fail with their groups' other "
                    "defaults (" + kept + ") kept: " + kept_error.what() +
                    "\nand with those defaults dropped: " + dropped_error.what());
      }
      out.knob_source += "; the group defaults " + kept + " were dropped: with them, " +
                         std::string(kept_error.what()).substr(0, 160);
    }
  }
  const CompileState& s = out.state;

  std::string knobs;
  for (const auto& k : knob_registry()) {
    auto it = s.used_knobs.find(k.name);
    if (it != s.used_knobs.end()) knobs += (knobs.empty() ? "" : ",") + k.name + "=" + it->second;
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
