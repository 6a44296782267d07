// Scalars the kernels compute with in f32: which doubles can be one.
//
// The expression's numbers (add(x, 0.5), attention's scale=) are doubles in the graph and
// f32 constants in the kernels. Rounding to f32 is expected; a value that overflows to
// infinity or a nonzero that rounds to 0 would change the answer instead, and its literal
// is one NVRTC refuses, so the frontend refuses it and codegen never renders one.
#pragma once
#include <string>

namespace loom {

// Why `v` cannot be an f32 constant, or "" when it can: it overflows f32 (|v| above
// FLT_MAX rounds to infinity), it is a nonzero that rounds to 0 (|v| up to 2^-150, half
// the smallest subnormal), or it is NaN.
std::string f32_constant_problem(double v);

// Why `scale` cannot be attention's scale, or "" when it can: it must be an f32 constant,
// and so must scale·log2(e), the one multiplier the kernels fold into the exponent
// (SOFTMAX=exp2).
std::string attention_scale_problem(double scale);

// The shortest text that reads back as the same double (std::to_chars), for messages
// that quote a number as the user wrote it.
std::string shortest_text(double v);

}  // namespace loom
