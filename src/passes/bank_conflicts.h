// Static shared-memory bank-conflict model: how many wavefronts (shared-memory cycles)
// one warp instruction of each shared access in a Kernel IR kernel needs, against the
// fewest its byte count allows. `loom compile -v` prints it; PAD_SMEM and SWIZZLE are
// judged by it.
//
// Hardware model (sm_70 .. sm_90; NVIDIA's "shared memory" sections of the CUDA
// programming guide and the Nsight Compute "wavefront" metric):
//  - 32 banks, each 4 bytes wide; byte address a lies in bank (a / 4) % 32. Shared
//    tensors start 128-byte aligned (shared_layout), so a tensor's base never moves its
//    accesses to other banks and the model works with offsets inside the tensor.
//  - One lane requests width x elem_bytes bytes. Requests of at most 4 bytes are served
//    for the whole warp at once; 8-byte requests in 2 phases of 16 lanes (half warps);
//    16-byte requests in 4 phases of 8 lanes (quarter warps). Lanes 0..n-1 form the
//    first phase, and so on.
//  - A phase takes as many wavefronts as the busiest bank has *distinct* 4-byte words to
//    deliver: lanes reading the same word share it (broadcast, free), two different
//    words of one bank serialize. 2-byte elements: two lanes on the two halves of one
//    word are one word, hence free. A phase without active lanes costs nothing.
//  - ldmatrix (a warp copy the kernel declares) is a 16-byte request from each lane
//    that supplies a stacked row (lanes 0..8x-1 of .x1/.x2/.x4; the hardware ignores
//    the others' addresses): a phase of 8 lanes is one 8x8 matrix, ideally one wavefront.
//  - The instruction's wavefronts are the sum over its phases; the ideal is
//    ceil(active lanes x bytes per lane / 128), at least 1 (128 bytes = one row of all 32
//    banks per wavefront).
//
// Evaluation: an access's flat offset (Load/Write index, AsyncCopy destination, a warp
// copy's row start; a
// multi-dimensional index is flattened with TensorDecl::strides()) goes through
// TensorDecl::physical() (the swizzle) per element of the vector. Enclosing Lets are
// substituted; threadIdx.x = 32*w + lane for every warp w of the block; the enclosing
// loop variables and blockIdx.* the access depends on take every combination of values
// when there are at most kExhaustiveLimit, else the first, middle and last value of
// each (the report says which). Lanes whose enclosing Ifs (and, for a Load, predicate)
// are false do not access; a condition that cannot be evaluated (an unbound symbol)
// counts the lane as active. The report is the worst warp instruction found.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/program.h"

namespace loom {

// At most this many bindings of an access's loop variables are evaluated exhaustively.
constexpr int64_t kExhaustiveLimit = 4096;

struct SharedAccessReport {
  std::string stmt;        // the statement as Kernel IR prints it
  std::string tensor;      // the shared tensor
  std::string op;          // "load", "store", "cp.async", "ldmatrix"
  int width = 1;           // elements per lane
  int bytes_per_lane = 4;  // width x element bytes
  int64_t wavefronts = 0;  // worst warp instruction (over warps and bindings)
  int64_t ideal = 1;       // fewest wavefronts the same instruction's bytes allow
  bool evaluated = true;   // false: the offset needs a symbol that was not bound
  bool exhaustive = true;  // every binding of the loop variables was evaluated
  int64_t bindings = 0;    // bindings evaluated
  int64_t bindings_total = 0;  // all bindings of the variables the access depends on
  std::string vars;        // those variables, e.g. "k_i, m_r"
  double factor() const { return ideal > 0 ? double(wavefronts) / double(ideal) : 0.0; }
};

// Every shared access of `k`, in program order. `symbols` binds problem-size symbols
// (M, N, K) of a symbolic kernel; unbound ones are handled as described above.
std::vector<SharedAccessReport> bank_conflicts(const KernelProgram& p, const KernelOp& k,
                                               const Expr::Env& symbols = {});

// The table `loom compile -v` prints: access, tensor, width, wavefronts, ideal, factor,
// and how the loop variables were bound.
std::string format_bank_conflicts(const std::vector<SharedAccessReport>& reports);

// The core of the model, for one warp instruction: lane i's request is the list of
// byte addresses of the elements it moves (empty = inactive lane), each element
// `elem_bytes` wide; `bytes_per_lane` selects the phases. Returns the wavefronts.
int64_t warp_wavefronts(const std::vector<std::vector<int64_t>>& lane_bytes, int elem_bytes,
                        int bytes_per_lane);

}  // namespace loom
