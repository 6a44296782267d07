// Expression -> CUDA source: the front half of Loom (no GPU needed).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pipeline.h"

namespace loom {

struct CompileOptions {
  Knobs knobs;                           // explicit knobs (CLI, LOOM_KNOBS, tuner)
  // A tuning-database record's full knob set: it replaces the shape-class defaults, and
  // explicit knobs merge over it group by group (resolve_knobs), so the precedence is
  // explicit > tuned > default. An explicit ATOM other than the record's drops it (its
  // tiles were found for another atom). A record the pipeline refuses (stale: made before
  // a default or a pass's limit changed) is dropped with a warning on stderr and the
  // compile goes on from the defaults; refused explicit knobs stay an error. The driver
  // never sees the database itself: callers look the record up (src/tune/tuned_knobs.h)
  // and pass it here.
  std::optional<Knobs> tuned;
  // Where `tuned` came from ("tuned: ~/.local/share/loom/tuning.db"), or, without it,
  // why there is none ("no record in ...", "--no-db"): shown in CompiledProgram.
  std::string tuned_source;
  Target target = Target::for_arch("sm_90a");
  std::map<std::string, int64_t> sizes;  // values of symbolic dims, when known
  // Run-time sizes whose defaults are chosen as if they had these values, the program
  // still taking them at run time: one range's kernel of a run-time size
  // (driver/size_variants.h).
  std::map<std::string, int64_t> defaults_as_if;
  std::string stop_after;                // run the pipeline up to this pass id
  PassObserver observer;                 // called after every pass (for -vv)
};

struct CompiledProgram {
  CompileState state;   // every level's IR as the pipeline left it
  std::string cuda;     // rendered source (empty when stopped early)
  std::string summary;  // one-line description: expression, target, knobs
  // Where the knobs came from: "default: class large", "tuned: <db path>", "explicit
  // over default: class large (no GPU: the tuning database was not consulted)", ...
  std::string knob_source;
  // Things the knobs did that their writer may not have meant, e.g. explicit tiling knobs
  // without ATOM selecting fma over the default wgmma atom; `loom compile` and `loom run`
  // print them on stderr as "loom: note: ...".
  std::vector<std::string> notes;
};

CompiledProgram compile_graph(const Graph& g, const CompileOptions& opt,
                              const std::string& expression_text = "");
CompiledProgram compile_expression(const std::string& expression, const CompileOptions& opt);

}  // namespace loom
