// CPU execution of Loop IR, Tile IR and Kernel IR on small shapes. It is how every pass
// is checked without a GPU: run the program before and after the pass on the same
// random inputs and compare (tests/cpu/passes/test_passes.cpp).
//
// Semantics: tensors hold values already rounded to their dtype; a load of a tf32
// tensor rounds to tf32 (as the kernels do); arithmetic is in double; a write rounds to
// the destination dtype (an atomic add rounds the sum).
//
// Loop IR and Tile IR run sequentially. Kernel IR runs block by block; within a block
// all `block_threads` threads execute each statement together (lockstep, as a GPU warp
// does), so that barriers have a meaning and the interpreter can check them: a shared
// element touched by two threads between two barriers, one of them writing, is a race;
// a cp.async destination touched before its cp.async.wait is too (both throw
// RaceError). Kernel IR loops must have the same extent in every thread; an If narrows
// the threads that run its body.
//
// A kernel with thread-block clusters (KernelOp::cluster) runs cluster by cluster: the
// CTAs of one cluster run concurrently as cooperative tasks (each block in lockstep), so
// multicast TMA loads, arrivals on a peer's mbarriers and cluster.sync work as on the
// GPU, and races and deadlocks across CTAs are reported like those within a block.
//
// Register arrays (Alloc) start as NaN, shared tensors start unwritten per block (a
// read of an unwritten element throws), and every access is bounds-checked.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/program.h"

namespace loom {

// A synchronization bug found by the Kernel IR interpreter: a shared-memory race
// between threads of a block, or a cp.async destination used before its wait.
class RaceError : public Error {
 public:
  using Error::Error;
};

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

// Fill `b` with seeded random inputs (uniform in [-1, 1], rounded to dtype; i32 inputs,
// which are indices, 0) for every Input tensor of `p`, and NaN-poisoned Outputs/Temps. Shared tensors live inside the
// interpreter (per block), never in Bindings.
void make_random_inputs(const ProgramBase& p, Bindings& b, uint64_t seed);

void interpret(const LoopProgram& p, Bindings& b);
void interpret(const TileProgram& p, Bindings& b);
void interpret(const KernelProgram& p, Bindings& b);
// `schedule_seed` != 0: the arms of every warp specialization run one task per warpgroup
// (as on the GPU, where a consumer warpgroup may run a whole work unit ahead of another)
// and their interleaving is the seed's (interpret_scheduler.h): each seed one reproducible
// schedule, so a test can try many to find a race the run-until-blocked order hides.
void interpret(const KernelProgram& p, Bindings& b, uint64_t schedule_seed);

}  // namespace loom
