// Harness for one Loom-generated decode kernel (linear(X[16,K], W[N,K]) swapped, one
// kernel, tensor maps X_s_tmap box {64,16} and W_s_tmap box {64,64}, 128B swizzle), built
// with trace_hooks.h: times it in a graph of back-to-back launches rotating over input sets
// (like `loom run --bench`) and prints the per-CTA timeline of the last launch.
// scripts/probes/trace-decode.sh inserts the LOOM_TRACE points and builds the kernel into
// a cubin (device code only, as NVRTC would), which this harness loads.
#include "probe_timing.h"


static CUtensorMap map2d(void* p, int rows, int cols, int box_cols, int box_rows) {
  CUtensorMap m;
  cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)}, strides[1] = {cuuint64_t(cols) * 2};
  cuuint32_t box[2] = {cuuint32_t(box_cols), cuuint32_t(box_rows)}, es[2] = {1, 1};
  CU(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return m;
}

int main() {
  const int M = DEC_M, N = DEC_N, K = DEC_K;
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  const size_t wbytes = size_t(N) * K * 2;
  const int sets = int((2 * size_t(prop.l2CacheSize) + wbytes - 1) / wbytes) + 1;
  struct Set { void *x, *w, *o; CUtensorMap xm, wm; };
  std::vector<Set> S(sets);
  for (auto& s : S) {
    CK(cudaMalloc(&s.x, size_t(M) * K * 2)); CK(cudaMalloc(&s.w, wbytes)); CK(cudaMalloc(&s.o, size_t(M) * N * 2));
    CK(cudaMemset(s.x, 0x3c, size_t(M) * K * 2)); CK(cudaMemset(s.w, 0x3c, wbytes));
    s.xm = map2d(s.x, M, K, 64, XBOX_ROWS); s.wm = map2d(s.w, N, K, 64, 64);
  }
  CK(cudaFree(0));
  CUmodule mod; CUfunction fn; CU(cuModuleLoad(&mod, CUBIN)); CU(cuModuleGetFunction(&fn, mod, KERNEL_NAME));
  CUdeviceptr trace_ptr; size_t trace_bytes; CU(cuModuleGetGlobal(&trace_ptr, &trace_bytes, mod, "loom_trace"));
  CU(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, SMEM_BYTES));
  auto launch = [&](cudaStream_t st, int i) {
    void* args[] = {&S[i].x, &S[i].w, &S[i].o, &S[i].xm, &S[i].wm};
    CU(cuLaunchKernel(fn, GRID_X, GRID_Y, 1, 256, 1, 1, SMEM_BYTES, st, args, nullptr));
  };
  const int per_graph = (40 + sets - 1) / sets * sets;
  const double us = graph_us(launch, sets, per_graph);
  printf("%s: graph replay %.2f us per launch (%d sets, %d launches per graph)\n", TAG, us, sets, per_graph);
  // The timeline of one launch: the stamps the last launch of the last replay left.
  std::vector<unsigned long long> tr(4096 * 8);
  CU(cuMemcpyDtoH(tr.data(), trace_ptr, tr.size() * 8));
  const int ctas = GRID_X * GRID_Y;
  unsigned long long t0 = ~0ull, tend = 0;
  for (int c = 0; c < ctas; ++c) { t0 = std::min(t0, tr[c * 8]); tend = std::max(tend, tr[c * 8 + 2]); }
  std::vector<double> st0, mid, en, dur;
  for (int c = 0; c < ctas; ++c) {
    st0.push_back((tr[c * 8] - t0) / 1e3); mid.push_back((tr[c * 8 + 1] - t0) / 1e3); en.push_back((tr[c * 8 + 2] - t0) / 1e3);
    dur.push_back((tr[c * 8 + 2] - tr[c * 8]) / 1e3);
  }
  auto q = [](std::vector<double> x, double f) { std::sort(x.begin(), x.end()); return x[size_t(f * (x.size() - 1))]; };
  printf("  CTA start   (us after the first): min %.2f  median %.2f  max %.2f\n", q(st0, 0), q(st0, .5), q(st0, 1));
  printf("  mainloop end                    : min %.2f  median %.2f  max %.2f\n", q(mid, 0), q(mid, .5), q(mid, 1));
  printf("  CTA end                         : min %.2f  median %.2f  max %.2f\n", q(en, 0), q(en, .5), q(en, 1));
  printf("  CTA duration                    : min %.2f  median %.2f  max %.2f\n", q(dur, 0), q(dur, .5), q(dur, 1));
  if (tr[4] != 0) {
    std::vector<double> w1, w2;
    for (int c = 0; c < ctas; ++c) { w1.push_back((tr[c * 8 + 4] - t0) / 1e3); w2.push_back((tr[c * 8 + 5] - t0) / 1e3); }
    printf("  after 1st cluster barrier       : min %.2f  median %.2f  max %.2f\n", q(w1, 0), q(w1, .5), q(w1, 1));
    printf("  after 2nd cluster barrier       : min %.2f  median %.2f  max %.2f\n", q(w2, 0), q(w2, .5), q(w2, 1));
    // Pairs (2-CTA clusters along x): barrier 1 after the later mainloop of the pair, the
    // exchange (barrier 1 -> barrier 2), and the exit after barrier 2.
    std::vector<double> b1, ex, ex2;
    for (int c = 0; c + 1 < ctas; c += 2) {
      double later = std::max(mid[c], mid[c + 1]);
      for (int d : {c, c + 1}) { b1.push_back(w1[d] - later); ex.push_back(w2[d] - w1[d]); ex2.push_back(en[d] - w2[d]); }
    }
    printf("  barrier 1 after the pair's later mainloop end: median %.2f max %.2f; exchange median %.2f max %.2f; exit median %.2f\n",
           q(b1, .5), q(b1, 1), q(ex, .5), q(ex, 1), q(ex2, .5));
  }
  printf("  first start -> last end %.2f us; epilogue (end - mainloop end) median %.2f us\n", (tend - t0) / 1e3,
         q([&] { std::vector<double> e; for (int c = 0; c < ctas; ++c) e.push_back(en[c] - mid[c]); return e; }(), .5));
  // Distinct timer values seen: the timer's resolution.
  std::vector<unsigned long long> all;
  for (int c = 0; c < ctas; ++c) for (int k = 0; k < 3; ++k) all.push_back(tr[c * 8 + k]);
  std::sort(all.begin(), all.end()); all.erase(std::unique(all.begin(), all.end()), all.end());
  unsigned long long step = ~0ull; for (size_t i = 1; i < all.size(); ++i) step = std::min(step, all[i] - all[i - 1]);
  printf("  %zu distinct stamps, smallest step %llu ns\n", all.size(), step);
  return 0;
}
