// Streaming roofline for the Hopper GEMM's memory-bound shapes (decode, split-K): how fast can any
// kernel read N bytes of HBM on this GPU, timed the way `loom run --bench` times graph
// replay (a graph of back-to-back launches rotating over input sets larger than L2)?
// Build: nvcc -O3 -arch=sm_90a -o stream_roofline stream_roofline.cu ; run: ./stream_roofline
#include "probe_timing.h"


__global__ void read_kernel(const uint4* __restrict__ p, size_t n, unsigned* sink) {
  unsigned acc = 0;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ b.y ^ c.z ^ d.w;
  }
  for (; i < n; i += stride) acc ^= __ldcs(p + i).x;
  if (acc == 0x12345678u) *sink = acc;
}
// Each CTA reads one contiguous chunk (as a GEMV CTA reads its rows).
__global__ void read_chunk_kernel(const uint4* __restrict__ p, size_t n, unsigned* sink) {
  size_t per = (n + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = min(n, lo + per);
  unsigned acc = 0;
  size_t i = lo + threadIdx.x;
  for (; i + 3 * blockDim.x < hi; i += 4 * blockDim.x) {
    uint4 a = __ldcs(p + i), b = __ldcs(p + i + blockDim.x), c = __ldcs(p + i + 2 * blockDim.x), d = __ldcs(p + i + 3 * blockDim.x);
    acc ^= a.x ^ b.y ^ c.z ^ d.w;
  }
  for (; i < hi; i += blockDim.x) acc ^= __ldcs(p + i).x;
  if (acc == 0x12345678u) *sink = acc;
}
__global__ void empty_kernel(unsigned* sink) { if (threadIdx.x == 12345) *sink = 1; }


int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  int sms = prop.multiProcessorCount; size_t l2 = prop.l2CacheSize;
  printf("%s, %d SMs, L2 %zu MB\n", prop.name, sms, l2 >> 20);
  unsigned* sink; CK(cudaMalloc(&sink, 4));
  printf("empty kernel, graph of 40: %.2f us/launch\n",
         graph_us([&](cudaStream_t s, int) { empty_kernel<<<sms, 128, 0, s>>>(sink); }, 1, 40));
  for (size_t mb : {8, 32}) {
    size_t bytes = mb << 20, n = bytes / 16;
    int sets = int((2 * l2 + bytes - 1) / bytes) + 1;
    std::vector<uint4*> bufs(sets);
    for (auto& b : bufs) { CK(cudaMalloc(&b, bytes)); CK(cudaMemset(b, 1, bytes)); }
    int per_graph = (40 + sets - 1) / sets * sets;
    for (int blocks_per_sm : {1, 2, 4, 8}) for (int threads : {256, 512}) {
      int grid = sms * blocks_per_sm;
      double us = graph_us([&](cudaStream_t s, int k) { read_kernel<<<grid, threads, 0, s>>>(bufs[k], n, sink); }, sets, per_graph);
      double us2 = graph_us([&](cudaStream_t s, int k) { read_chunk_kernel<<<grid, threads, 0, s>>>(bufs[k], n, sink); }, sets, per_graph);
      printf("read %2zu MB grid %4d x %3d: strided %6.2f us (%4.2f TB/s)  chunked %6.2f us (%4.2f TB/s)\n", mb, grid, threads,
             us, bytes / us / 1e6, us2, bytes / us2 / 1e6);
    }
    for (auto b : bufs) cudaFree(b);
  }
  return 0;
}
