// The pass interface and the state a compilation carries through the pipeline.
//
// A pass reads one IR level and writes the same level, except the three lowerings that
// move to the next level (l:000 Graph->Loop, t:010 Loop->Tile, k:010 Tile->Kernel).
// Each pass states the invariant it establishes and the knobs it reads; the pipeline
// (pipeline.cpp) lists them once, in order, with the reason for each position.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/program.h"
#include "passes/knobs.h"

namespace loom {

enum class Level { Graph, Loop, Tile, Kernel };
const char* level_name(Level l);  // "graph", "loop", "tile", "kernel"

// What the code is compiled for. Limits come from the device when there is one, else
// from the architecture's documented values (see target.cpp).
struct Target {
  std::string arch = "sm_90a";
  int sm_count = 132;
  int max_threads_per_block = 1024;
  int64_t smem_per_block = 232448;  // opt-in maximum, bytes
  int regs_per_thread = 255;
  // Peak DRAM bandwidth (bytes/s: memory clock x 2 x bus width); without a device, the
  // architecture's usual part (H100 SXM for sm_90*). The decode schedule sizes its grid by it.
  int64_t dram_bytes_per_s = 3352000000000;
  // L2 cache bytes (the device's, else the architecture's usual part: H100's 50 MB). The
  // attention walk sizes its L2 sections by it.
  int64_t l2_bytes = int64_t(50) << 20;
  static Target for_arch(const std::string& arch);  // throws for unsupported arch names
  // 90 for sm_90a, 80 for sm_80: which instructions the target has.
  int compute_capability() const;
};

struct CompileState {
  Graph graph;
  LoopProgram loop;
  TileProgram tile;
  KernelProgram kernel;
  Level level = Level::Graph;

  Knobs knobs;                                    // explicit values (CLI, env, tuner)
  std::map<std::string, std::string> used_knobs;  // every knob value a pass used, defaults too
  Target target;
  std::map<std::string, int64_t> sizes;  // known symbol values (shape hints for defaults)
  // Set on the copy that spell_symbols_apart (symbol_spelling.h) runs the passes on, so
  // that its l:000 does not look ahead again.
  bool spelling_symbols = false;

  // What a pass chose not to do that its knobs asked for, and why (e.g. an epilogue
  // operand TMA cannot address keeps its direct reads): `loom compile` and `loom run`
  // print them as notes (CompiledProgram::notes).
  std::vector<std::string> notes;

  // Record and return a knob: the explicit value if given, else `fallback`.
  int64_t knob(const std::string& name, int64_t fallback);
};

struct Pass {
  std::string id;         // "t:010_partition_loops": level prefix, order, name
  Level from, to;         // IR level read and written
  std::string invariant;  // what holds after it runs
  std::vector<std::string> knobs;  // knobs it reads
  std::function<void(CompileState&)> run;
};

// Print the IR of `level` held in `s` (used for -v/-vv and by tests).
std::string print_level(const CompileState& s, Level level);

}  // namespace loom
