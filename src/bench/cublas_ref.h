// The cuBLAS reference of docs/benchmarking.md: the same row-major GEMM Loom computes,
// in the same process, on the same inputs, with the same output dtype.
//   f32        SGEMM, CUBLAS_COMPUTE_32F (no TF32)
//   tf32       f32 data, CUBLAS_COMPUTE_32F_FAST_TF32
//   f16 / bf16 f32 accumulation (CUBLAS_COMPUTE_32F), output in `out`
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ir/dtype.h"

namespace loom {

struct GemmProblem {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  DType in = DType::F32;
  DType out = DType::F32;
  bool a_transposed = false;  // A stored [K,M] (row-major) instead of [M,K]
  bool b_transposed = false;  // B stored [N,K] instead of [K,N]
  // An operand without batch dims, shared by every batch entry (batch stride 0).
  bool a_shared = false, b_shared = false;
  // Views into larger buffers (a pitched operand, `A[M,K|1056]`): the row pitch and the
  // batch stride of each operand's storage, in elements; 0: dense.
  int64_t lda = 0, ldb = 0, batch_stride_a = 0, batch_stride_b = 0;
};

// Operands are contiguous per batch (batch stride M*K, K*N, M*N elements; 0 for a shared one)
// unless the problem gives their pitches.
class CublasGemm {
 public:
  explicit CublasGemm(const GemmProblem& p);  // creates the handle and its workspace
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  // C = A·B, alpha = 1, beta = 0. Only enqueues on `stream`: safe inside graph capture.
  void run(const void* A, const void* B, void* C, cudaStream_t stream);
  const GemmProblem& problem() const { return p_; }

 private:
  GemmProblem p_;
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace loom
