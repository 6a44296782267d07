// The contraction of a program as the GEMM families see it (src/passes/families/): its
// sizes when known, operand types and majorness, and what the copy engines can address.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "ir/graph.h"
#include "passes/pass.h"

namespace loom {

struct GemmShape {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  size_t out_rank = 2;  // the contraction's result: 2, 3 (bmm) or 4
  bool known = false, epilogue = false;
  DType in = DType::F32, out = DType::F32;  // set for known shapes only
  bool f32_operands = false;                 // A is f32 or tf32, whatever the shape
  // Every operand's storage rows are whole 16-byte units: what a TMA tensor map needs.
  bool tma_rows = false;
  // Some operand's rows are not whole 4-byte units (an odd 16-bit row): no cp.async can
  // address them, and its slabs go through registers (k:015).
  bool odd_rows = false;
  // Whether A ([M, K] stored row-major) and B ([K, N] given transposed, B.T) keep K
  // contiguous: wgmma reads 32-bit operands K-major only.
  bool a_k_major = true, b_k_major = false;
  // The epilogue reads one input of the output's shape (a residual R[M, N], a SwiGLU gate
  // E[M, N]), 16-bit, whose rows are whole 16-byte units: k:056 can load it by TMA
  // (EPI_LOAD=tma) into 16 KB strips of 128 x 64. False with two such inputs.
  bool mn_operand = false;
};

// The program's contraction (the last one, where there are several; known = false with a
// run-time size, and then only f32_operands is set).
GemmShape gemm_shape_of(const Graph& g);

// Binds the size symbols `values` names in a copy of `g` (the rest stay symbolic).
Graph bound_as_if(const Graph& g, const std::map<std::string, int64_t>& values);

// 16-bit operands on a target with tensor cores (sm_80 and newer): the mma.sync and
// wgmma families' operands.
bool tensor_core_operands(const GemmShape& s, const Target& t);

// ATOM=`kind`_f16 or `kind`_bf16 for the shape's 16-bit operands ("wgmma", "mma").
std::string atom_16bit(const GemmShape& s, const std::string& kind);

}  // namespace loom
