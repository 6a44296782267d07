// A GEMM through Loom's C++ plan API (docs/api.md): compiled once, executed on buffers and
// a stream this program owns, checked against the CPU. Without a GPU it prints why and
// the plan compiled for sm_90a, and exits 0.
#include <cuda_runtime.h>
#include <loom/plan.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const int M = 256, N = 128, K = 64;
  const char* expr = "matmul(A[256,64]:f32, B[64,128]:f32)";
  try {
    if (std::string why = loom::no_gpu_reason(); !why.empty()) {
      loom::PlanOptions compile_only;
      compile_only.target = "sm_90a";
      std::printf("no GPU (%s); the plan:\n%s", why.c_str(), loom::Plan(expr, compile_only).describe().c_str());
      return 0;
    }
    loom::Plan plan(expr);
    // Small integers: every product and sum is exact in f32 (and in tf32).
    std::vector<float> a(M * K), b(K * N), c(M * N);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 7) - 3);
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 5) - 2);
    float *da, *db, *dc;
    cudaMalloc(&da, a.size() * 4), cudaMalloc(&db, b.size() * 4), cudaMalloc(&dc, c.size() * 4);
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaMemcpyAsync(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice, s);
    plan.execute({{"A", da}, {"B", db}, {"out", dc}}, s);
    cudaMemcpyAsync(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost, s);
    if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess)
      return std::fprintf(stderr, "CUDA: %s\n", cudaGetErrorString(e)), 1;
    for (int i : {0, 1, 77, M - 1})
      for (int j : {0, 5, N - 1}) {
        float ref = 0;
        for (int k = 0; k < K; ++k) ref += a[i * K + k] * b[k * N + j];
        if (std::fabs(c[i * N + j] - ref) > 1e-3f)
          return std::fprintf(stderr, "out[%d,%d] = %g, expected %g\n", i, j, c[i * N + j], ref), 1;
      }
    cudaFree(da), cudaFree(db), cudaFree(dc), cudaStreamDestroy(s);
    std::printf("OK: %s with knobs %s\n", expr, plan.knobs_string().c_str());
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom: %s\n", e.what());
    return 1;
  }
  return 0;
}
