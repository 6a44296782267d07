// Ladders: a progression of knob sets run on the GPU, one optimization per step, each
// verified and timed against cuBLAS in the same run — the articles' figures as a
// runnable table (`loom ladder sgemm|splitk|swizzle|hgemm|tf32|hopper|flash`). The flash
// ladder (attention) has no reference in-process: FlashAttention-2 lives in PyTorch, so
// scripts/attention_bench.py --ladder flash runs the same steps (through the Python
// binding, python/) with an FA2 column.
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
  std::string reference = "cuBLAS";  // timed beside every step; empty: none (flash)
};

// The known ladders, for an optional shape override ("MxNxK"; flash: "BxHxSxD", Q, K and
// V all [B,H,S,D]), the operand type of hgemm, hopper ("f16" or "bf16") and flash ("bf16"
// or "f16"), and flash's mask (`causal`: FlashAttention's causal=true; an error for the
// GEMM ladders).
Ladder make_ladder(const std::string& name, const std::string& shape,
                   const std::string& dtype = "", bool causal = false);
std::vector<std::string> ladder_names();

struct LadderRow {
  LadderStep step;
  bool ok = false;         // compiled, ran and verified
  std::string error;       // why not, when !ok
  std::string knobs_used;  // the whole knob set the step compiled with (defaults included)
  double us = 0, cublas_us = 0, tflops = 0;  // cublas_us: the reference's, 0 without one
};

// Runs every step (a failing step is reported, not fatal) and returns the rows.
std::vector<LadderRow> run_ladder(const Ladder& l, const RunOptions& base,
                                  const std::function<void(const LadderRow&)>& progress = nullptr);
std::string format_ladder(const Ladder& l, const std::vector<LadderRow>& rows);

}  // namespace loom
