#include "bench/reference_matmul.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <thread>

#include "bench/broadcast.h"
#include "bench/cuda_call.h"
#include "bench/reference.h"
#include "ir/error.h"

namespace loom {
namespace {

// Below this many multiply-adds a thread costs more to start than it saves.
constexpr int64_t kMacsPerThread = 1 << 20;

class DeviceDoubles {
 public:
  explicit DeviceDoubles(size_t n) { LOOM_CUDA_RT(cudaMalloc(&p_, std::max<size_t>(n, 1) * 8)); }
  ~DeviceDoubles() { cudaFree(p_); }
  DeviceDoubles(const DeviceDoubles&) = delete;
  DeviceDoubles& operator=(const DeviceDoubles&) = delete;
  double* get() const { return p_; }

 private:
  double* p_ = nullptr;
};

class CublasHandle {
 public:
  CublasHandle() { LOOM_CUBLAS(cublasCreate(&h_)); }
  ~CublasHandle() { cublasDestroy(h_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

bool gpu_present() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the non-sticky "no driver / no device" status
    return false;
  }
  return count > 0;
}

}  // namespace

std::vector<double> matmul_f64_host(const MatOperand& a, const MatOperand& b,
                                    const std::vector<int64_t>& out_batch) {
  LOOM_CHECK(a.cols == b.rows, "matmul reduction lengths differ");
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  const std::vector<int64_t> a_mat = broadcast_offsets(a.batch, out_batch);
  const std::vector<int64_t> b_mat = broadcast_offsets(b.batch, out_batch);
  const int64_t total_rows = int64_t(a_mat.size()) * M;
  std::vector<double> c(size_t(total_rows * N), 0.0);

  // Row i of C accumulates a[i,k] * (row k of B): the inner loop walks B and C along N.
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bi = t / M, i = t % M;
      double* crow = c.data() + t * N;
      for (int64_t k = 0; k < K; ++k) {
        const double aik = a.at(a_mat[bi], i, k);
        for (int64_t j = 0; j < N; ++j) crow[j] += aik * b.at(b_mat[bi], k, j);
      }
    }
  };
  const int64_t macs = total_rows * N * K;
  const int64_t threads = std::clamp<int64_t>(
      std::min<int64_t>(std::thread::hardware_concurrency(), macs / kMacsPerThread), 1,
      total_rows);
  if (threads <= 1) {
    rows(0, total_rows);
    return c;
  }
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back(rows, total_rows * t / threads, total_rows * (t + 1) / threads);
  for (auto& th : pool) th.join();
  return c;
}

bool dgemm_f64(const MatOperand& a, const MatOperand& b, const std::vector<int64_t>& out_batch,
               std::vector<double>& c) {
  LOOM_CHECK(a.cols == b.rows, "matmul reduction lengths differ");
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  const int64_t nb = shape_numel(out_batch), na = shape_numel(a.batch), nbb = shape_numel(b.batch);
  // Strided batching expresses a shared operand (stride 0) or one matrix per output
  // batch; other broadcasts (e.g. [2,1] against [1,3]) stay on the host.
  if ((na != 1 && na != nb) || (nbb != 1 && nbb != nb)) return false;
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  if (M > kMaxInt || N > kMaxInt || K > kMaxInt || nb > kMaxInt) return false;
  if (M == 0 || N == 0 || K == 0 || nb == 0) return false;
  if (!gpu_present()) return false;

  DeviceDoubles dA(size_t(na * M * K)), dB(size_t(nbb * K * N)), dC(size_t(nb * M * N));
  LOOM_CUDA_RT(cudaMemcpy(dA.get(), a.data, size_t(na * M * K) * 8, cudaMemcpyHostToDevice));
  LOOM_CUDA_RT(cudaMemcpy(dB.get(), b.data, size_t(nbb * K * N) * 8, cudaMemcpyHostToDevice));
  CublasHandle h;
  // Row-major C = A·B as column-major Cᵀ = Bᵀ·Aᵀ (see cublas_ref.cpp for the lds).
  const double one = 1.0, zero = 0.0;
  LOOM_CUBLAS(cublasDgemmStridedBatched(
      h.get(), b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
      int(N), int(M), int(K), &one, dB.get(), int(b.transposed ? K : N), nbb == 1 ? 0 : K * N,
      dA.get(), int(a.transposed ? M : K), na == 1 ? 0 : M * K, &zero, dC.get(), int(N), M * N,
      int(nb)));
  c.resize(size_t(nb * M * N));
  LOOM_CUDA_RT(cudaMemcpy(c.data(), dC.get(), c.size() * 8, cudaMemcpyDeviceToHost));
  return true;
}

std::vector<double> matmul_f64(const MatOperand& a, const MatOperand& b,
                               const std::vector<int64_t>& out_batch, bool use_gpu) {
  const double macs = double(shape_numel(out_batch)) * double(a.rows) * double(a.cols) *
                      double(b.cols);
  std::vector<double> c;
  if (use_gpu && macs > kGpuReferenceMacs && dgemm_f64(a, b, out_batch, c)) return c;
  return matmul_f64_host(a, b, out_batch);
}

}  // namespace loom
