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

// The C type used for index arithmetic: int when every tensor of the program provably
// has fewer than 2^31 elements, else long long.
const char* index_ctype(const ProgramBase& p);

}  // namespace loom
