// A program with a run-time size compiled as a few kernels, each for a range of that size,
// and the rule that picks one at each launch.
//
// One kernel for every M costs small M dearly: the large schedule's 128 x 256 tiles give
// 16 CTAs over N = 4096 whatever M <= 128 is (2.4x the bound M's kernel at 128 rows). So
// the defaults of a run-time M come as a table of ranges (passes/defaults.h,
// runtime_size_ranges), each compiled with the defaults a bound M at the range's top
// gets, M still a kernel parameter; a launch runs the range its M falls in. The table is
// data: the executor asks `pick` and launches what it returns, with no rule of its own.
// Explicit knobs or a tuning record give one kernel for every size, as before.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "passes/defaults.h"

namespace loom {

struct SizeVariant {
  SizeRange range;  // symbol in [lo, hi]; the symbol is empty for a program without ranges
  CompiledProgram program;
};

struct SizeVariants {
  // Ascending, disjoint, covering 1..2^63-1 of the symbol; never empty.
  std::vector<SizeVariant> variants;

  // The variant for `sizes` (which give the ranges' symbol when there are ranges).
  size_t index_for(const std::map<std::string, int64_t>& sizes) const;
  const SizeVariant& pick(const std::map<std::string, int64_t>& sizes) const {
    return variants[index_for(sizes)];
  }
  // The kernel of the top range: the run-time default itself (the tensors, knobs and
  // source a caller sees first). Every variant has the same tensors.
  const CompiledProgram& primary() const { return variants.back().program; }
  // One line per variant: "M 1..16: <knobs> (<knob source>)"; "" without ranges.
  std::string describe(const std::string& indent = "  ") const;
};

// Compiles `g` as compile_graph does and, where the defaults of its run-time sizes come
// in ranges (no explicit knobs, no tuning record), one program per range. A range whose
// defaults do not serve a run-time size (another atom than wgmma, a workspace, a knob that
// needs the size's value: their compile refused) joins the range above it, and adjacent
// ranges that resolve to the same knobs are one. opt.observer sees the top range's
// compile only.
SizeVariants compile_size_variants(const Graph& g, const CompileOptions& opt,
                                   const std::string& expression_text = "");

// "M=1..16" or "M=513.." for a range; "every size" without one.
std::string range_string(const SizeRange& r);

}  // namespace loom
