// Expression -> CUDA source: the front half of Loom (no GPU needed).
#pragma once
#include <map>
#include <string>

#include "ir/graph.h"
#include "passes/pipeline.h"

namespace loom {

struct CompileOptions {
  Knobs knobs;                           // explicit knobs (CLI, LOOM_KNOBS, tuner)
  Target target = Target::for_arch("sm_90a");
  std::map<std::string, int64_t> sizes;  // values of symbolic dims, when known
  std::string stop_after;                // run the pipeline up to this pass id
  PassObserver observer;                 // called after every pass (for -vv)
};

struct CompiledProgram {
  CompileState state;   // every level's IR as the pipeline left it
  std::string cuda;     // rendered source (empty when stopped early)
  std::string summary;  // one-line description: expression, target, knobs
};

CompiledProgram compile_graph(const Graph& g, const CompileOptions& opt,
                              const std::string& expression_text = "");
CompiledProgram compile_expression(const std::string& expression, const CompileOptions& opt);

}  // namespace loom
