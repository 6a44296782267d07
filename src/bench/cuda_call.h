// Checked CUDA runtime and cuBLAS calls in the benchmark harness: a failure becomes a
// loom::Error naming the call (its source text) and the status.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "runtime/driver.h"

namespace loom {

void check_cublas(cublasStatus_t s, const char* call);

#define LOOM_CUDA_RT(call) ::loom::check_cuda((call), #call)
#define LOOM_CUBLAS(call) ::loom::check_cublas((call), #call)

}  // namespace loom
