#include "driver/size_variants.h"

#include <limits>
#include <sstream>

#include "ir/error.h"

namespace loom {

namespace {

std::string used_knobs_string(const CompiledProgram& p) {
  std::string s;
  for (const auto& d : knob_registry()) {
    auto it = p.state.used_knobs.find(d.name);
    if (it != p.state.used_knobs.end()) s += (s.empty() ? "" : ",") + d.name + "=" + it->second;
  }
  return s;
}

// Whether a range's program can stand in for the top one on its sizes: the wgmma family
// (whose run-time sizes the GPU tests cover), the same tensors, and no workspace (a Plan
// and a loom_py Kernel allocate the top program's only).
bool serves_runtime_size(const CompiledProgram& p, const CompiledProgram& top) {
  auto it = p.state.used_knobs.find("ATOM");
  if (it == p.state.used_knobs.end() || it->second.rfind("wgmma_", 0) != 0) return false;
  for (const auto& t : p.state.kernel.tensors)
    if (t.role == TensorRole::Temp) return false;
  std::vector<std::string> a, b;
  for (const auto& t : p.state.kernel.tensors)
    if (t.role == TensorRole::Input || t.role == TensorRole::Output) a.push_back(t.name);
  for (const auto& t : top.state.kernel.tensors)
    if (t.role == TensorRole::Input || t.role == TensorRole::Output) b.push_back(t.name);
  return a == b;
}

}  // namespace

std::string range_string(const SizeRange& r) {
  if (r.symbol.empty()) return "every size";
  return r.symbol + "=" + std::to_string(r.lo) + ".." +
         (r.hi == std::numeric_limits<int64_t>::max() ? std::string() : std::to_string(r.hi));
}

size_t SizeVariants::index_for(const std::map<std::string, int64_t>& sizes) const {
  const std::string& sym = variants.front().range.symbol;
  if (sym.empty()) return 0;
  auto it = sizes.find(sym);
  if (it == sizes.end())
    throw Error("the kernel is chosen by the run-time size " + sym + ": pass its value");
  for (size_t i = 0; i < variants.size(); ++i)
    if (it->second <= variants[i].range.hi) return i;
  return variants.size() - 1;  // unreachable: the top range ends at 2^63-1
}

std::string SizeVariants::describe(const std::string& indent) const {
  if (variants.front().range.symbol.empty()) return "";
  std::ostringstream o;
  for (const auto& v : variants)
    o << indent << range_string(v.range) << ": " << used_knobs_string(v.program) << " ("
      << v.program.knob_source << ")\n";
  return o.str();
}

SizeVariants compile_size_variants(const Graph& g, const CompileOptions& opt,
                                   const std::string& expression_text) {
  SizeVariants out;
  const std::vector<SizeRange> ranges =
      opt.knobs.values().empty() && !opt.tuned ? runtime_size_ranges(g, opt.target)
                                               : std::vector<SizeRange>{};
  CompiledProgram top = compile_graph(g, opt, expression_text);
  if (ranges.empty()) {
    out.variants.push_back({SizeRange{"", 1, std::numeric_limits<int64_t>::max(), 0}, std::move(top)});
    return out;
  }
  CompileOptions each = opt;
  each.observer = nullptr;
  int64_t lo = 1;  // where the next kept range starts: refused ranges join the one above
  for (const SizeRange& r : ranges) {
    SizeRange kept = r;
    kept.lo = lo;
    if (r.as_if == 0) {  // the run-time default: the top range
      out.variants.push_back({kept, top});
      break;
    }
    each.defaults_as_if = {{r.symbol, r.as_if}};
    CompiledProgram p;
    try {
      p = compile_graph(g, each, expression_text);
    } catch (const Error&) {
      continue;  // e.g. split-K's workspace grows with M: the range above serves it
    }
    if (!serves_runtime_size(p, top)) continue;
    if (!out.variants.empty() &&
        used_knobs_string(out.variants.back().program) == used_knobs_string(p)) {
      // The same kernel: one range, described by its new top's defaults.
      out.variants.back().range.hi = r.hi;
      out.variants.back().program = std::move(p);
    } else {
      out.variants.push_back({kept, std::move(p)});
    }
    lo = r.hi + 1;
  }
  // The top range keeps its place even where a lower one resolved to its knobs.
  if (out.variants.size() > 1) {
    SizeVariant& below = out.variants[out.variants.size() - 2];
    if (used_knobs_string(below.program) == used_knobs_string(out.variants.back().program)) {
      out.variants.back().range.lo = below.range.lo;
      out.variants.erase(out.variants.end() - 2);
    }
  }
  if (out.variants.size() == 1) out.variants.front().range.symbol.clear();
  return out;
}

}  // namespace loom
