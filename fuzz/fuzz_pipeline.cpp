// Coverage-guided fuzz target (libFuzzer): expression text, knob string, target and symbol
// sizes in; CUDA text out, through the whole pipeline a `loom compile` runs (parse, bind
// sizes, defaults and knob resolution, every pass with its verifier, every IR printer,
// the CUDA renderer). No GPU and no NVRTC: the harness checks what the front half
// promises, and scripts/fuzz_nvrtc_sample.py replays a sample of the accepted inputs
// through NVRTC.
//
// One input is up to four fields separated by NUL bytes:
//   expression \0 knobs \0 target \0 dims
// e.g. "matmul(A[M,K]:f16, B[K,N]:f16)\0ATOM=wgmma_f16\0sm_90a\0M=64,N=64,K=64". Missing
// fields take `loom compile`'s defaults (no knobs, sm_90a, no sizes).
// The expression may be PyTorch code (parse_expression reads it with the PyTorch front
// end, src/frontend/torch_parser.h) and the knobs may use the matmul article's names
// (knob_aliases()): the corpus and fuzz/loom.dict hold both.
//
// What counts as a bug (the harness aborts, libFuzzer records the input):
//   - any exception that is not a loom::Error (std::out_of_range, bad_alloc, ...);
//   - a loom::Error that is internal: LOOM_CHECK's "internal error:" or an IR verifier's
//     rejection of a pass's output ("after pass <id>: ..."), which user input must never
//     reach;
//   - an accepted program that rendered no CUDA;
//   - crashes, ASan/UBSan reports and timeouts, which libFuzzer catches itself.
// Every other loom::Error is the clear refusal user input is owed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "driver/run.h"
#include "frontend/parser.h"
#include "ir/diff.h"
#include "ir/error.h"
#include "ir/program.h"

namespace {

// The four NUL-separated fields of one input.
std::vector<std::string> fields_of(const uint8_t* data, size_t size) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && out.size() < 4) out.emplace_back();
    else out.back().push_back(char(data[i]));
  }
  out.resize(4);
  return out;
}

// By prefix only: a message may quote the user's text, which may say anything.
// run_pipeline wraps a verifier's rejection of a pass's output as "after pass <id>: ...".
bool is_internal(const std::string& what) {
  return what.rfind("internal error", 0) == 0 || what.rfind("after pass ", 0) == 0;
}

[[noreturn]] void report_bug(const char* kind, const std::string& what, const std::vector<std::string>& f) {
  std::fprintf(stderr, "fuzz_pipeline: %s: %s\n  expression: %s\n  knobs: %s\n  target: %s\n  dims: %s\n", kind,
               what.c_str(), f[0].c_str(), f[1].c_str(), f[2].c_str(), f[3].c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Longer inputs add nothing the mutator cannot reach with short ones, and the pipeline's
  // cost grows with the expression.
  if (size > 4096) return -1;
  const std::vector<std::string> f = fields_of(data, size);
  try {
    loom::CompileOptions opt;
    opt.knobs = loom::Knobs::parse(f[1]);
    opt.target = loom::Target::for_arch(f[2].empty() ? "sm_90a" : f[2]);
    opt.sizes = loom::parse_dims(f[3]);
    // -vv's work: every pass's printed IR before and after, diffed.
    size_t diffed = 0;
    opt.observer = [&](const loom::Pass&, const std::string& before, const std::string& after) {
      if (before != after) diffed += loom::unified_diff(before, after).size();
    };
    loom::Graph g = loom::parse_expression(f[0]);
    if (!opt.sizes.empty()) g = loom::bind_sizes(g, opt.sizes);
    loom::CompiledProgram c = loom::compile_graph(g, opt, f[0]);
    if (c.cuda.empty()) report_bug("accepted program rendered no CUDA", c.summary, f);
    // The printers of every level (`--ir loop|tile|kernel`).
    if (loom::print(c.state.loop).empty() || loom::print(c.state.tile).empty() ||
        loom::print(c.state.kernel).empty())
      report_bug("accepted program printed an empty IR level", c.summary, f);
  } catch (const loom::Error& e) {
    if (is_internal(e.what())) report_bug("internal error reached from user input", e.what(), f);
  } catch (const std::exception& e) {
    report_bug("exception that is not a loom::Error", e.what(), f);
  }
  return 0;
}
