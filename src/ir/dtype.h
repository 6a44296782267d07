// Element types. Storage type (what a tensor holds in memory) and compute type (what a
// register holds) differ: f16/bf16/tf32 values are widened to f32 in registers and
// accumulate in f32. tf32 is stored as f32; loads round it to tf32 (cvt.rna.tf32.f32).
// i32 holds integers that address other tensors (attention's block table and key
// lengths, docs/attention.md "Paged KV"): read as indices, never as operands of math.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace loom {

enum class DType { F32, TF32, F16, BF16, F64, I32 };

const char* dtype_name(DType t);                       // "f32", "tf32", "f16", "bf16", "f64", "i32"
std::optional<DType> parse_dtype(std::string_view s);  // inverse of dtype_name
int dtype_bytes(DType t);                              // storage bytes: 4, 4, 2, 2, 8, 4
const char* dtype_storage_ctype(DType t);  // C type in generated code: float, float, loom_f16, loom_bf16, double, int

// Host emulation of storing a value in `t` (round to nearest even for f16/bf16, to
// nearest-away for tf32, as cvt.rna.tf32.f32 does). Used by the interpreter and reference.
double round_to_dtype(DType t, double v);
uint16_t f32_to_f16_bits(float f);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);
float bf16_bits_to_f32(uint16_t h);
float round_to_tf32(float f);
// The tf32 the tensor core reads from raw f32 bits: the top 19, the low 13 dropped
// (truncation toward zero), as for an operand no cvt.rna rounded.
float truncate_to_tf32(float f);

// Relative Frobenius error threshold for verifying a GEMM of reduction length k whose
// output is stored in `out` with inputs in `in` (see docs/verification.md).
double verify_threshold(DType in, DType out);

}  // namespace loom
