#include "bench/cuda_call.h"

#include <string>

#include "ir/error.h"

namespace loom {

void check_cublas(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::string hint = s == CUBLAS_STATUS_NOT_SUPPORTED
                         ? "cuBLAS does not support this dtype combination or layout; "
                           "choose another input/output dtype pair"
                         : "check the problem sizes and that the GPU is usable";
  throw Error(std::string(call) + " failed: " + cublasGetStatusName(s) + " (" +
              cublasGetStatusString(s) + "); " + hint);
}

}  // namespace loom
