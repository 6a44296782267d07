#include "bench/cublas_ref.h"

#include <limits>
#include <string>

#include "bench/cuda_call.h"
#include "ir/error.h"

namespace loom {
namespace {

// cuBLAS recommends 32 MiB of workspace on Hopper; a user-set workspace also keeps
// cuBLAS from allocating during stream capture.
constexpr size_t kWorkspaceBytes = 32u << 20;

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32:
    case DType::TF32: return CUDA_R_32F;  // tf32 is stored as f32
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F64: return CUDA_R_64F;
    case DType::I32: return CUDA_R_32I;
  }
  return CUDA_R_32F;
}

int as_int(int64_t v, const char* what) {
  if (v < 1 || v > std::numeric_limits<int>::max())
    throw Error(std::string("cuBLAS reference: ") + what + " = " + std::to_string(v) +
                " is outside 1..2^31-1; split the problem into smaller GEMMs");
  return int(v);
}

}  // namespace

CublasGemm::CublasGemm(const GemmProblem& p) : p_(p) {
  // A tf32 output is f32 storage; cuBLAS writes it unrounded, which only makes the
  // reference more accurate.
  if (p.in == DType::F64 || p.out == DType::F64)
    throw Error(std::string("cuBLAS reference: no benchmark reference for input ") +
                dtype_name(p.in) + " / output " + dtype_name(p.out) +
                "; use inputs f32, tf32, f16 or bf16 and output f32, tf32, f16 or bf16");
  as_int(p.batch, "batch");
  as_int(p.M, "M");
  as_int(p.N, "N");
  as_int(p.K, "K");
  LOOM_CUBLAS(cublasCreate(&handle_));
  // Default math: with CUBLAS_COMPUTE_32F that is a true fp32 SGEMM; TF32 only when the
  // compute type asks for it.
  LOOM_CUBLAS(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  LOOM_CUDA_RT(cudaMalloc(&workspace_, kWorkspaceBytes));
  workspace_bytes_ = kWorkspaceBytes;
  LOOM_CUBLAS(cublasSetWorkspace(handle_, workspace_, workspace_bytes_));
}

CublasGemm::~CublasGemm() {
  if (handle_) cublasDestroy(handle_);
  if (workspace_) cudaFree(workspace_);
}

void CublasGemm::run(const void* A, const void* B, void* C, cudaStream_t stream) {
  LOOM_CUBLAS(cublasSetStream(handle_, stream));
  const int M = int(p_.M), N = int(p_.N), K = int(p_.K);
  // cuBLAS is column-major: a row-major X[r,c] is the column-major Xᵀ. So the row-major
  // C[M,N] = A·B is computed as the column-major Cᵀ[N,M] = Bᵀ·Aᵀ, with B first.
  // B stored [K,N] is column-major N×K (ld N, no op); stored [N,K] it is K×N (ld K, op T).
  // A stored [M,K] is column-major K×M (ld K, no op); stored [K,M] it is M×K (ld M, op T).
  const cublasOperation_t opB = p_.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = p_.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = p_.ldb ? int(p_.ldb) : p_.b_transposed ? K : N;
  const int lda = p_.lda ? int(p_.lda) : p_.a_transposed ? M : K;
  const int64_t sb = p_.b_shared ? 0 : p_.batch_stride_b ? p_.batch_stride_b : p_.K * p_.N;
  const int64_t sa = p_.a_shared ? 0 : p_.batch_stride_a ? p_.batch_stride_a : p_.M * p_.K;
  const cublasComputeType_t compute =
      p_.in == DType::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float alpha = 1.0f, beta = 0.0f;
  LOOM_CUBLAS(cublasGemmStridedBatchedEx(
      handle_, opB, opA, N, M, K, &alpha, B, cuda_type(p_.in), ldb, sb,
      A, cuda_type(p_.in), lda, sa, &beta, C, cuda_type(p_.out), N, p_.M * p_.N,
      int(p_.batch), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace loom
