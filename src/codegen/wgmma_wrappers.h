// Device wrappers of the wgmma atoms, generated rather than stored in loom_device.cuh.
//
// wgmma.mma_async lists its accumulator as N/2 separate registers, so every N (8..256 in
// steps of 8) of every type is a different asm statement: 96 table entries, two variants
// each (A from shared memory or registers), up to 135 asm operands apiece. Written out in
// the device header that would be thousands of lines NVRTC parses for every kernel, most
// of them never used; generated, a kernel carries only the wrappers of the atoms it uses,
// pasted after `#include "loom_device.cuh"`. Each still reads like a header wrapper: its
// name spells the instruction (wgmma_m64n128k16_f32_bf16_ss), one asm volatile, the PTX
// ISA section above it.
#pragma once
#include <string>

#include "atoms/atoms.h"

namespace loom {

// The wrapper of wgmma entry `a` (atom table): a __device__ __forceinline__ function in
// namespace loom named wgmma_variant_id(a, a_in_registers), e.g.
//   template <int TransA, int TransB>
//   void wgmma_m64n128k16_f32_bf16_ss(float (&d)[64], unsigned long long desc_a,
//                                     unsigned long long desc_b, int scale_d);
//   template <int TransB>
//   void wgmma_m64n128k16_f32_bf16_rs(float (&d)[64], const unsigned (&a)[4],
//                                     unsigned long long desc_b, int scale_d);
// scale_d 0: D = A*B, 1: D = A*B + D. TransA / TransB are the imm-trans immediates (1 for
// an M-/N-major operand: WgmmaDescFields::transposed); tf32 has none (K-major only) and
// takes A as 4 tf32 words. Guarded by __CUDA_ARCH_FEAT_SM90_ALL (sm_90a), so a kernel
// compiled for another target fails in the front end naming the wrapper. Throws
// loom::Error for an atom that is not a wgmma entry.
std::string wgmma_wrapper_source(const AtomDef& a, bool a_in_registers);

}  // namespace loom
