// The fp64 reference: a whole Graph evaluated in double precision with no intermediate
// rounding, the yardstick every Loom result (and the cuBLAS reference) is verified
// against.
#pragma once
#include <map>
#include <string>

#include "ir/graph.h"
#include "ir/interpreter.h"

namespace loom {

// `inputs` holds every Input node's tensor by name, in its *storage* layout (a
// transposed input `B[N,K].T` is given as the [N,K] array); its values are used exactly
// as stored (tf32 inputs are not re-rounded: the reference is the exact product of the
// given inputs). Dimension symbols are bound from the input shapes. Matmuls of more than
// kGpuReferenceMacs multiply-adds run as cuBLAS DGEMM when `use_gpu` and a GPU is
// present; everything else runs on the host. Returns an F64 tensor with the result's
// logical shape (attention: its output O; reference_attention gives the LSE too).
// Throws loom::Error on a missing input or a shape that does not match.
HostTensor reference_eval(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                          bool use_gpu);

constexpr double kGpuReferenceMacs = 1e7;

}  // namespace loom
