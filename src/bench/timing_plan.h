// How a timed launch meets a cold L2 (docs/benchmarking.md item 3), chosen per problem.
//
// Three ways, each leaving the timed launch's operands out of L2:
//  - rotate: R input sets whose bytes together exceed twice the L2; launch c reads set
//    c mod R, so the set it reads was last touched R launches ago and has been evicted
//    by the others. Nothing runs between timed launches, and it works inside a CUDA graph
//    (R launches captured over the R sets), so short launches are timed without a flush.
//  - read: a kernel reads a buffer of twice the L2 before each repetition. The lines it
//    leaves are clean: the timed launch evicts them for free.
//  - flush: cudaMemsetAsync writes that buffer (what Loom's runs before 2026-11-22's cold-L2
//    timing and Triton's do_bench do). The ~L2's worth of dirty lines it leaves are written
//    back to HBM while the timed launch runs, on its time: a 32 MB decode weight read cost
//    ~64 MB of traffic (bench/NOTES.md, 2026-11-22, the epilogue).
// `auto` rotates when one set is under the L2 and R sets fit the memory budget, and reads
// otherwise (a large problem: R would be 1-2 sets of it, and a read flush costs its
// operands nothing).
#pragma once
#include <cstdint>
#include <string>

namespace loom {

enum class L2Method { off, flush, read, rotate };
enum class L2Request { automatic, off, flush, read, rotate };

// "auto", "off", "flush", "read", "rotate" (the --l2 option); throws loom::Error naming
// the choices for anything else.
L2Request parse_l2_request(const std::string& text);
const char* l2_method_name(L2Method m);
// The inverse of l2_method_name; throws loom::Error for another name.
L2Method l2_method_from_name(const std::string& name);

// The most input sets rotation allocates: each is a full copy of the problem's inputs
// (and a launcher with its own tensor maps), so tiny problems stop here rather than at
// 2x L2; a plan whose R would exceed it is not a rotation.
constexpr int kMaxInputSets = 64;

// Sets of `set_bytes` each whose total reaches 2 x `l2_bytes` (at least 2), or 0 when
// that needs more than kMaxInputSets or more than `budget_bytes` of device memory.
int rotation_sets(int64_t set_bytes, int64_t l2_bytes, int64_t budget_bytes);

struct L2Plan {
  L2Method method = L2Method::flush;
  int sets = 1;           // rotate: input sets cycled launch by launch
  int64_t set_bytes = 0;  // one set's input bytes
  int64_t l2_bytes = 0;
  std::string why;        // how the method was chosen (for the report header)
};

// An explicit request is honoured (rotate throws loom::Error when no R fits: too small a
// problem for kMaxInputSets, or too little memory, with the numbers and the fix).
L2Plan plan_l2(L2Request req, int64_t set_bytes, int64_t l2_bytes, int64_t budget_bytes);

// One line for the bench header: "rotate over 4 input sets of 32.1 MiB (128.5 MiB = 2.1x
// L2): inputs under L2 (auto)".
std::string describe_l2(const L2Plan& p);

}  // namespace loom
