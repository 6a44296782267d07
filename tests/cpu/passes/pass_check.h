// Helpers shared by the pass tests: run a program at one IR level on the CPU
// interpreter, verify a level, and compare outputs within the output dtype's tolerance.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/same.h"
#include "frontend/parser.h"
#include "passes/pass.h"
#include "passes/pipeline.h"

namespace loom::passcheck {

// Elementwise tolerance of a pass-equivalence check: reassociated sums (fusion, split-K,
// FMA atoms) may flip the last bit of an f16/bf16 output; f32 outputs agree to ~1e-7.
inline double tolerance(DType out) {
  switch (out) {
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    default: return 1e-5;
  }
}

// The program of `level` held in `s`, run on `b`.
inline void interpret_level(const CompileState& s, Level level, Bindings& b) {
  switch (level) {
    case Level::Loop: interpret(s.loop, b); break;
    case Level::Tile: interpret(s.tile, b); break;
    case Level::Kernel: interpret(s.kernel, b); break;
    case Level::Graph: ADD_FAILURE() << "graph is not executable"; break;
  }
}

// Runs the program of `level` held in `s` on a copy of `inputs`; returns `out`.
inline HostTensor run_level(const CompileState& s, Level level, const Bindings& inputs) {
  Bindings b = inputs;
  interpret_level(s, level, b);
  return b.tensors.at("out");
}

// The program of one level as the last interpretation ran it, and what it computed. A
// pass that leaves the program of its level the same (same_program: every field of every
// statement, tensor and kernel) would compute the same again: the interpreter is
// deterministic and the inputs do not change. The pass checks then compare that result
// instead of running the program again, which most passes (those whose knobs are off)
// would otherwise cost.
class LastRun {
 public:
  // Whether `s` holds, at `level`, the program run last.
  bool same(const CompileState& s, Level level) const {
    if (level != level_) return false;
    switch (level) {
      case Level::Loop: return same_program(s.loop, loop_);
      case Level::Tile: return same_program(s.tile, tile_);
      case Level::Kernel: return same_program(s.kernel, kernel_);
      case Level::Graph: return false;
    }
    return false;
  }
  void keep(const CompileState& s, Level level, Bindings result) {
    level_ = level;
    loop_ = level == Level::Loop ? s.loop : LoopProgram{};
    tile_ = level == Level::Tile ? s.tile : TileProgram{};
    kernel_ = level == Level::Kernel ? s.kernel : KernelProgram{};
    result_ = std::move(result);
  }
  const Bindings& result() const { return result_; }

 private:
  Level level_ = Level::Graph;
  LoopProgram loop_;
  TileProgram tile_;
  KernelProgram kernel_;
  Bindings result_;
};

// Runs the program of `level` held in `s` on a copy of `inputs`, or takes the result of
// `last` when it ran the same program; returns every tensor.
inline const Bindings& run_level_once(const CompileState& s, Level level, const Bindings& inputs,
                                      LastRun& last) {
  if (last.same(s, level)) return last.result();
  Bindings b = inputs;
  interpret_level(s, level, b);
  last.keep(s, level, std::move(b));
  return last.result();
}

inline void verify_level(const CompileState& s, Level level) {
  switch (level) {
    case Level::Loop: verify(s.loop); break;
    case Level::Tile: verify(s.tile); break;
    case Level::Kernel: verify(s.kernel); break;
    case Level::Graph: break;
  }
}

// Every element written (no NaN left from the poison) and within the tolerance of `dt`.
inline void expect_close(const HostTensor& got, const HostTensor& want, DType dt,
                         const std::string& ctx) {
  ASSERT_EQ(got.data.size(), want.data.size()) << ctx;
  double tol = tolerance(dt);
  for (size_t i = 0; i < got.data.size(); ++i) {
    ASSERT_FALSE(std::isnan(got.data[i])) << ctx << ": element " << i << " never written";
    ASSERT_NEAR(got.data[i], want.data[i], tol * std::max(1.0, std::fabs(want.data[i])))
        << ctx << ": element " << i;
  }
}

// A pass that changes the numerical contract on purpose: ACC=f16 makes every mma round
// its sums to f16 from k:025_lower_mma on, which no earlier level does. From pass `from`
// on, outputs are compared with `reference` (computed from the same inputs) instead of
// the naive Loop IR's.
struct ContractChange {
  std::string from;
  std::function<HostTensor(const Bindings& inputs)> reference;
};

// The property every pass test checks: compile `expr` with `knobs` for sm_90a, verify
// the IR each pass writes, run it on the CPU interpreter and compare the output with
// the Loop IR straight from lowering (the naive program), or from `change.from` on with
// `change.reference`. `sizes` binds symbolic dimensions; `prepare` may adjust the random
// inputs once they exist (e.g. round them to tf32). Stops at the first failing pass;
// returns the final state for shape checks.
inline CompileState check_every_pass(
    const std::string& expr, const Knobs& knobs, uint64_t seed,
    const std::map<std::string, int64_t>& sizes = {},
    const std::function<void(const LoopProgram&, Bindings&)>& prepare = {},
    const std::optional<ContractChange>& change = std::nullopt,
    const Target& target = Target::for_arch("sm_90a")) {
  SCOPED_TRACE(expr + " knobs=" + knobs.str());
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = knobs;
  s.target = target;
  Bindings inputs;
  inputs.symbols = sizes;
  HostTensor reference;
  bool changed = false;
  LastRun last;
  for (const auto& p : pipeline()) {
    p.run(s);
    verify_level(s, p.to);
    if (p.to == Level::Loop && reference.data.empty()) {
      make_random_inputs(s.loop, inputs, seed);
      if (prepare) prepare(s.loop, inputs);
      reference = run_level_once(s, Level::Loop, inputs, last).tensors.at("out");
      continue;
    }
    if (change && p.id == change->from) {
      reference = change->reference(inputs);
      changed = true;
    }
    if (p.to == Level::Graph) {
      ADD_FAILURE() << "graph is not executable";
      break;
    }
    expect_close(run_level_once(s, p.to, inputs, last).tensors.at("out"), reference,
                 s.graph.node(s.graph.result()).dtype,
                 "after " + p.id + (changed ? " (vs the changed contract's reference)" : ""));
    if (::testing::Test::HasFailure()) break;
  }
  if (change && !::testing::Test::HasFailure()) {
    EXPECT_TRUE(changed) << "no pass " << change->from << " in the pipeline";
  }
  return s;
}

// Every output tensor of the program (`out`, and attention's `lse`): like expect_close,
// with an infinity required to be the same infinity (an empty attention row's LSE).
inline void expect_outputs_close(const ProgramBase& p, const Bindings& got,
                                 const Bindings& want, DType out_dtype, const std::string& ctx) {
  for (const TensorDecl& t : p.tensors) {
    if (t.role != TensorRole::Output) continue;
    const HostTensor& g = got.tensors.at(t.name);
    const HostTensor& w = want.tensors.at(t.name);
    ASSERT_EQ(g.data.size(), w.data.size()) << ctx << ": " << t.name;
    double tol = tolerance(t.name == "out" ? out_dtype : t.dtype);
    for (size_t i = 0; i < g.data.size(); ++i) {
      ASSERT_FALSE(std::isnan(g.data[i])) << ctx << ": " << t.name << "[" << i << "] never written";
      if (std::isinf(w.data[i])) {
        ASSERT_EQ(g.data[i], w.data[i]) << ctx << ": " << t.name << "[" << i << "]";
        continue;
      }
      ASSERT_NEAR(g.data[i], w.data[i], tol * std::max(1.0, std::fabs(w.data[i])))
          << ctx << ": " << t.name << "[" << i << "]";
    }
  }
}

// check_every_pass for programs whose lowering stops at Loop IR (attention, until its
// Tile lowering exists): runs the Loop-level passes only, and compares every output
// tensor of each with the naive Loop IR's. Returns the state after the last loop pass.
inline CompileState check_loop_passes(const std::string& expr, const Knobs& knobs,
                                      uint64_t seed,
                                      const std::map<std::string, int64_t>& sizes = {}) {
  SCOPED_TRACE(expr + " knobs=" + knobs.str());
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = knobs;
  s.target = Target::for_arch("sm_90a");
  Bindings inputs, reference;
  inputs.symbols = sizes;
  LastRun last;
  for (const auto& p : pipeline()) {
    if (p.from != Level::Graph && p.to != Level::Loop) break;
    p.run(s);
    verify_level(s, p.to);
    if (reference.tensors.empty()) {
      make_random_inputs(s.loop, inputs, seed);
      reference = run_level_once(s, Level::Loop, inputs, last);
      continue;
    }
    const Bindings& got = run_level_once(s, Level::Loop, inputs, last);
    expect_outputs_close(s.loop, got, reference, s.graph.node(s.graph.result()).dtype,
                         "after " + p.id);
    if (::testing::Test::HasFailure()) break;
  }
  return s;
}

// The whole pipeline (up to `last`, when given) for `target`, without the interpreter:
// for tests of the IR's shape and of the passes' errors.
inline CompileState compile_for(const Target& target, const std::string& expr,
                                const std::string& knobs, const std::string& last = "") {
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse(knobs);
  s.target = target;
  run_pipeline(s, last);
  return s;
}

// The same for sm_90a with its documented limits (what a CompileState has by default).
inline CompileState compile_sm90a(const std::string& expr, const std::string& knobs,
                                  const std::string& last = "") {
  return compile_for(Target::for_arch("sm_90a"), expr, knobs, last);
}

// The message of the loom::Error compiling `expr` with `knobs` (for `target`) throws; ""
// when it builds.
inline std::string error_of(const std::string& expr, const std::string& knobs,
                            const Target& target = Target::for_arch("sm_90a")) {
  try {
    compile_for(target, expr, knobs);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// How many statements of `kind` block `b` holds, at any depth.
inline int count(const Block& b, StmtKind kind) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += s.kind == kind; });
  return n;
}

// An sm_90a target with `n` SMs: a persistent grid small enough to interpret, or one whose
// tile count leaves a partial wave.
// `base` with the knobs of `over` replacing or joining its own. A knob list names each knob
// once (Knobs::parse refuses "BM=64,BM=128", which hides a typo), so a variation of a base
// set is spelled knobs_over(kBase, "STAGES=3"), not kBase + ",STAGES=3".
inline std::string knobs_over(const std::string& base, const std::string& over) {
  Knobs k = Knobs::parse(base);
  k.merge(Knobs::parse(over));
  return k.str();
}

inline Target sm90a_with_sms(int n) {
  Target t = Target::for_arch("sm_90a");
  t.sm_count = n;
  return t;
}

}  // namespace loom::passcheck
