// What the loop passes that split a contraction into new ops share (l:020 split-K, l:022
// cluster split-K; t:025 names its loops the same way): fresh names, the parallel nest
// around a cell, and the inputs a rewritten op still reads.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "ir/program.h"

namespace loom {

// `base`, or base + the first number that makes it a name `taken` does not hold.
std::string fresh_name(const std::string& base, const std::set<std::string>& taken);

// Names a new loop variable, value or tensor of `p` must avoid.
std::set<std::string> loop_program_names(const LoopProgram& p);

// One parallel loop of an op's output nest.
struct ParallelLoop { std::string var; Expr extent; std::string axis; };
Block parallel_nest(const std::vector<ParallelLoop>& loops, Block body);

// The inputs of `orig` that `body` loads, in `orig`'s order.
std::vector<std::string> inputs_read(const LoopOp& orig, const Block& body);

}  // namespace loom
