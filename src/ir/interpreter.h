// CPU execution of Loop IR, Tile IR and Kernel IR on small shapes. It is how every pass
// is checked without a GPU: run the program before and after the pass on the same
// random inputs and compare (tests/cpu/test_passes.cpp).
//
// Semantics: tensors hold values already rounded to their dtype; a load of a tf32
// tensor rounds to tf32 (as the kernels do); arithmetic is in double; a write rounds to
// the destination dtype. Kernel IR runs every block and every thread of the launch
// sequentially, with blockIdx.* / threadIdx.x bound as variables.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/program.h"

namespace loom {

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major, values representable in dtype
  int64_t numel() const;
};

struct Bindings {
  std::map<std::string, int64_t> symbols;      // M, N, K values
  std::map<std::string, HostTensor> tensors;   // every Input; Outputs/Temps allocated
};

// Fill `b` with seeded random inputs (uniform in [-1, 1], rounded to dtype) for every
// Input tensor of `p`, and NaN-poisoned Outputs/Temps.
void make_random_inputs(const ProgramBase& p, Bindings& b, uint64_t seed);

void interpret(const LoopProgram& p, Bindings& b);
void interpret(const TileProgram& p, Bindings& b);
void interpret(const KernelProgram& p, Bindings& b);

}  // namespace loom
