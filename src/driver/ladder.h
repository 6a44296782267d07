// Ladders: a progression of knob sets run on the GPU, one optimization per step, each
// verified and timed against cuBLAS in the same run — the articles' figures as a
// runnable table (`loom ladder sgemm|splitk|swizzle|hgemm`).
#pragma once
#include <string>
#include <vector>

#include "driver/run.h"

namespace loom {

struct LadderStep {
  std::string name;   // "register tiling"
  std::string knobs;  // the full knob set of this step
  std::string what;   // one line: what the step changes and why it should pay
};

struct Ladder {
  std::string name;
  std::string expression;
  std::vector<LadderStep> steps;
};

// The known ladders, for an optional shape override "MxNxK" and, for hgemm, the operand
// type ("f16" by default, or "bf16").
Ladder make_ladder(const std::string& name, const std::string& shape,
                   const std::string& dtype = "");
std::vector<std::string> ladder_names();

struct LadderRow {
  LadderStep step;
  bool ok = false;         // compiled, ran and verified
  std::string error;       // why not, when !ok
  double us = 0, cublas_us = 0, tflops = 0;
};

// Runs every step (a failing step is reported, not fatal) and returns the rows.
std::vector<LadderRow> run_ladder(const Ladder& l, const RunOptions& base,
                                  const std::function<void(const LadderRow&)>& progress = nullptr);
std::string format_ladder(const Ladder& l, const std::vector<LadderRow>& rows);

}  // namespace loom
