/* A GEMM through Loom's C ABI (docs/api.md): a plan made once, executed on buffers and a
 * stream this program owns, checked against the CPU. Without a GPU it prints why and the
 * plan compiled for sm_90a, and exits 0. */
#include <cuda_runtime_api.h>
#include <loom/loom_c.h>
#include <math.h>
#include <stdio.h>

#define M 256
#define N 128
#define K 64
static float a[M * K], b[K * N], c[M * N];

static int check(loom_status s) {
  if (s != LOOM_SUCCESS) fprintf(stderr, "loom: %s: %s\n", loom_status_string(s), loom_last_error());
  return s != LOOM_SUCCESS;
}

int main(void) {
  const char* expr = "matmul(A[256,64]:f32, B[64,128]:f32)";
  loom_plan_options opt;
  loom_plan_t plan;
  const char* text;
  loom_plan_options_init(&opt);
  if (loom_no_gpu_reason(0)[0]) {
    printf("no GPU (%s); the plan (Loom %s):\n", loom_no_gpu_reason(0), loom_version());
    opt.target = "sm_90a";
    if (check(loom_plan_create(expr, &opt, &plan)) || check(loom_plan_describe(plan, &text))) return 1;
    printf("%s", text);
    return check(loom_plan_destroy(plan));
  }
  if (check(loom_plan_create(expr, &opt, &plan))) return 1;
  for (int i = 0; i < M * K; ++i) a[i] = (float)(i % 7 - 3); /* exact sums: small integers */
  for (int i = 0; i < K * N; ++i) b[i] = (float)(i % 5 - 2);
  void *ptrs[3];
  cudaStream_t s;
  cudaMalloc(&ptrs[0], sizeof a), cudaMalloc(&ptrs[1], sizeof b), cudaMalloc(&ptrs[2], sizeof c);
  cudaStreamCreate(&s);
  cudaMemcpyAsync(ptrs[0], a, sizeof a, cudaMemcpyHostToDevice, s);
  cudaMemcpyAsync(ptrs[1], b, sizeof b, cudaMemcpyHostToDevice, s);
  if (check(loom_plan_execute_positional(plan, ptrs, 3, s))) return 1; /* A, B, out */
  cudaMemcpyAsync(c, ptrs[2], sizeof c, cudaMemcpyDeviceToHost, s);
  if (cudaStreamSynchronize(s) != cudaSuccess) return fprintf(stderr, "CUDA error\n"), 1;
  for (int i = 0; i < M; i += 85)
    for (int j = 0; j < N; j += 42) {
      float ref = 0;
      for (int k = 0; k < K; ++k) ref += a[i * K + k] * b[k * N + j];
      if (fabsf(c[i * N + j] - ref) > 1e-3f)
        return fprintf(stderr, "out[%d,%d] = %g, expected %g\n", i, j, c[i * N + j], ref), 1;
    }
  for (int i = 0; i < 3; ++i) cudaFree(ptrs[i]);
  cudaStreamDestroy(s);
  printf("OK: %s\n", expr);
  return check(loom_plan_destroy(plan));
}
