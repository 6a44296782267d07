#include "passes/pass.h"

#include <cstdlib>

#include "ir/error.h"

namespace loom {

const char* level_name(Level l) {
  switch (l) {
    case Level::Graph: return "graph";
    case Level::Loop: return "loop";
    case Level::Tile: return "tile";
    case Level::Kernel: return "kernel";
  }
  return "?";
}

int Target::compute_capability() const {
  return arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0;
}

Target Target::for_arch(const std::string& arch) {
  Target t;
  t.arch = arch;
  // Documented per-architecture limits, used when no device is present to ask.
  if (arch == "sm_90a" || arch == "sm_90") {
    t.sm_count = 132;
    t.smem_per_block = 232448;  // 227 KB opt-in
  } else if (arch == "sm_80") {
    t.sm_count = 108;
    t.smem_per_block = 166912;  // 163 KB opt-in
    t.dram_bytes_per_s = 2039000000000;  // A100 80GB
    t.l2_bytes = int64_t(40) << 20;
  } else if (arch == "sm_86" || arch == "sm_89") {
    t.sm_count = arch == "sm_86" ? 84 : 128;
    t.smem_per_block = 101376;  // 99 KB opt-in
    t.dram_bytes_per_s = arch == "sm_86" ? 936000000000 : 1008000000000;  // RTX 3090 / 4090
    t.l2_bytes = int64_t(arch == "sm_86" ? 6 : 72) << 20;
  } else {
    throw Error("unsupported target '" + arch + "': Loom targets sm_80, sm_86, sm_89, sm_90, sm_90a");
  }
  return t;
}

int64_t CompileState::knob(const std::string& name, int64_t fallback) {
  int64_t v = knobs.get_int(name, fallback);
  used_knobs[name] = std::to_string(v);
  return v;
}

std::string print_level(const CompileState& s, Level level) {
  switch (level) {
    case Level::Graph: return s.graph.str();
    case Level::Loop: return print(s.loop);
    case Level::Tile: return print(s.tile);
    case Level::Kernel: return print(s.kernel);
  }
  return "";
}

}  // namespace loom
