// Bad candidates planted into a generated kernel through MeasureJob::cuda_override (the
// worker's test hook): the same kernels, names and signatures, with a statement put at
// the top of every kernel body. Compiled with NVRTC in tests/cpu/tune/test_worker.cpp,
// run by tests/gpu/test_tune_worker.cpp.
#pragma once
#include <string>

#include "ir/error.h"

namespace loom {

inline std::string plant_in_kernels(const std::string& cuda, const std::string& statement) {
  std::string out = cuda;
  size_t at = 0, planted = 0;
  while ((at = out.find("extern \"C\" __global__", at)) != std::string::npos) {
    size_t body = out.find(") {\n", at);
    if (body == std::string::npos) break;
    out.insert(body + 4, "  " + statement + "\n");
    at = body;
    ++planted;
  }
  if (planted == 0) throw Error("no kernel found to plant a statement in");
  return out;
}

// A store to an unmapped address (the null page): CUDA reports an illegal address and
// the context is poisoned.
inline std::string plant_fault(const std::string& cuda) {
  return plant_in_kernels(cuda, "*(volatile int*)(unsigned long long)(8 + 4 * threadIdx.x) = 1;");
}

// A loop that never ends. Its body must be a side effect the compiler keeps: a spin on a
// volatile local (`while (spin) {}`) compiles to nothing (checked in the SASS: NVVM drops
// the loop and the kernel runs normally), an asm volatile nanosleep stays.
inline std::string plant_hang(const std::string& cuda) {
  return plant_in_kernels(cuda, "for (;;) asm volatile(\"nanosleep.u32 1000;\");");
}

// Returns before writing anything: the poisoned (NaN) output fails verification.
inline std::string plant_wrong_answer(const std::string& cuda) {
  return plant_in_kernels(cuda, "if (threadIdx.x < 100000) return;");
}

}  // namespace loom
