// The fp64 batched matmul behind reference_eval: a threaded host loop, or cuBLAS DGEMM
// for large problems.
#pragma once
#include <cstdint>
#include <vector>

namespace loom {

// A stack of logical [rows, cols] matrices. Stored row-major per matrix, or, when
// `transposed`, as [cols, rows] (the operand the user wrote as `X[..].T`).
struct MatOperand {
  const double* data = nullptr;
  std::vector<int64_t> batch;  // leading dims; numpy-broadcast against the other operand
  int64_t rows = 0, cols = 0;
  bool transposed = false;
  double at(int64_t matrix, int64_t r, int64_t c) const {
    return data[matrix * rows * cols + (transposed ? c * rows + r : r * cols + c)];
  }
};

// C[out_batch.., M, N] = A[.., M, K] · B[.., K, N] in double, row-major. Runs as DGEMM
// when `use_gpu`, a GPU is present, the batch strides are uniform and the problem is
// larger than kGpuReferenceMacs multiply-adds; on the host otherwise.
std::vector<double> matmul_f64(const MatOperand& a, const MatOperand& b,
                               const std::vector<int64_t>& out_batch, bool use_gpu);

// The two paths, exposed so tests can compare them. dgemm_f64 returns false (and does
// nothing) when it cannot run: no GPU, or a batch broadcast DGEMM's strides cannot express.
std::vector<double> matmul_f64_host(const MatOperand& a, const MatOperand& b,
                                    const std::vector<int64_t>& out_batch);
bool dgemm_f64(const MatOperand& a, const MatOperand& b, const std::vector<int64_t>& out_batch,
               std::vector<double>& c);

}  // namespace loom
