// Kernel IR -> CUDA C++ source (one translation unit for all kernels of a program).
//
// A generated kernel reads as three parts, marked in the source: the scheduler (which
// tile this CTA computes: blockIdx bindings), the mainloop (the reduction) and the
// epilogue (how the accumulator leaves: fused elementwise ops and the store).
#pragma once
#include <map>
#include <string>

#include "ir/program.h"

namespace loom {

struct RenderOptions {
  std::string header_comment;  // e.g. the expression and knobs, printed at the top
};

std::string render_cuda(const KernelProgram& p, const RenderOptions& opt = {});

// Name under which the device header is handed to NVRTC, and its text.
inline constexpr const char* kDeviceHeaderName = "loom_device.cuh";
const char* device_header();

// CUDA spellings of the IR's user-facing names. Tensor and symbol names come from the
// user (or are derived from the user's: `A_s`, `A_s_tmap`) and may be anything the
// expression language allows: a C++ keyword (`int`), a CUDA builtin (`threadIdx`), a
// device-header name (`loom`, `half`, `min`), a reserved `__x`, or a name Loom generates
// for registers and loop variables (`acc3`, `k_i`, `m_b`). So each is spelled under a
// prefix that only these three use: user names may not start with `loom_` (the frontend
// refuses them), Loom's own CUDA names never start with `loom_t_`, `loom_d_` or `loom_m_`
// (render_cuda checks the IR's), and names starting with `loom_` are no C++ keyword, CUDA
// builtin or predefined macro.
std::string cuda_tensor_name(const std::string& tensor);    // loom_t_A: a tensor's array
std::string cuda_symbol_name(const std::string& symbol);    // loom_d_M: a size parameter
std::string cuda_tensor_map_name(const std::string& map);  // loom_m_A_s_tmap: a TMA map

// The C type used for index arithmetic: int when every tensor of the program provably
// has fewer than 2^31 elements, else long long.
const char* index_ctype(const ProgramBase& p);

}  // namespace loom
