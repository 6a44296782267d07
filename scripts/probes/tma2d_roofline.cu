// Decode-shaped TMA streaming (the Hopper GEMM's decode 16x4096x4096): the same ring as
// tma_roofline.cu, but loading 2-D tensor-map boxes of a row-major [4096, 4096] bf16 weight
// the way Loom's swapped decode kernel does (128-byte swizzle, boxes of 64 columns x R rows,
// two per 128-column k-block), with the K range of a row block split over Q CTAs (Loom's
// CLUSTER_K / SPLITK). Does the split itself, or the 2-D access pattern, cost bandwidth?
// Build: nvcc -O3 -arch=sm_90a -o tma2d tma2d_roofline.cu -lcuda ; run: ./tma2d
#include "probe_timing.h"


__device__ __forceinline__ unsigned sa(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void wait_parity(unsigned long long* bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(sa(bar)), "r"(parity) : "memory");
}

// CTA b streams rows [r*R, r*R+R) (r = b / Q) and its share q = b % Q of the 128-column
// k-blocks: contiguous (q*n .. q*n+n-1) or interleaved (q, q+Q, ...).
// xmode 1: each stage also loads a decode activation box (16 rows x 128 columns of a
// [16, 4096] X that every CTA shares, as Loom's swapped decode does); xmode 2: the same
// from a private copy of X per CTA (no two SMs asking L2 for the same lines at once).
__global__ void tma2d_ring_kernel(const __grid_constant__ CUtensorMap map, const __grid_constant__ CUtensorMap xmap,
                                  int rows, int q_split, int k_blocks, int stages, int interleave, int xmode, unsigned* sink) {
  extern __shared__ __align__(1024) unsigned char sm[];
  const unsigned w_bytes = 2u * rows * 128u, stage_bytes = w_bytes + (xmode ? 2u * 16 * 128 : 0u);
  auto* full = reinterpret_cast<unsigned long long*>(sm + size_t(stages) * stage_bytes);
  auto* empty = full + stages;
  const int consumers = blockDim.x / 32 - 1, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = blockIdx.x / q_split, q = blockIdx.x % q_split, n = k_blocks / q_split;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sa(full + s)) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sa(empty + s)), "r"(consumers) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  unsigned acc = 0;
  if (warp == consumers) {
    if (lane == 0)
      for (int i = 0; i < n; ++i) {
        int s = i % stages, kb = interleave ? i * q_split + q : q * n + i;
        if (i >= stages) wait_parity(empty + s, ((i / stages) - 1) & 1);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sa(full + s)), "r"(stage_bytes) : "memory");
        for (int h = 0; h < 2 && xmode; ++h)
          asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
                       ::"r"(sa(sm + size_t(s) * stage_bytes + w_bytes + h * 16 * 128)), "l"(&xmap), "r"(sa(full + s)),
                       "r"(kb * 128 + h * 64), "r"(xmode == 2 ? int(blockIdx.x) * 16 : 0) : "memory");
        for (int h = 0; h < 2; ++h)
          asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
                       ::"r"(sa(sm + size_t(s) * stage_bytes + h * rows * 128)), "l"(&map), "r"(sa(full + s)),
                       "r"(kb * 128 + h * 64), "r"(r * rows) : "memory");
      }
  } else {
    for (int i = 0; i < n; ++i) {
      int s = i % stages;
      wait_parity(full + s, (i / stages) & 1);
      acc ^= reinterpret_cast<const unsigned*>(sm + size_t(s) * stage_bytes)[threadIdx.x];
      __syncwarp();
      if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sa(empty + s)) : "memory");
    }
  }
  if (acc == 0x12345678u) *sink = acc;
}


int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  size_t l2 = prop.l2CacheSize;
  const int N = 4096, K = 4096;
  const size_t bytes = size_t(N) * K * 2;
  printf("%s, %d SMs: streaming a [%d, %d] bf16 weight (%zu MB) by 2-D TMA boxes\n", prop.name, prop.multiProcessorCount, N, K, bytes >> 20);
  unsigned* sink; CK(cudaMalloc(&sink, 4));
  CK(cudaFuncSetAttribute(tma2d_ring_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  int sets = int((2 * l2 + bytes - 1) / bytes) + 1, per_graph = (40 + sets - 1) / sets * sets;
  std::vector<void*> bufs(sets);
  std::vector<CUtensorMap> maps(sets), xmaps(sets);
  std::vector<void*> xbufs(sets);
  struct Cfg { int rows, q, stages, interleave, cluster, xmode = 0; };
  std::vector<Cfg> cfgs = {{64, 1, 8, 0, 1}, {64, 1, 13, 0, 1}, {64, 2, 8, 0, 1}, {64, 2, 8, 1, 1}, {64, 2, 8, 0, 2},
                           {64, 2, 12, 0, 1}, {32, 1, 16, 0, 1}, {64, 1, 8, 0, 1, 1}, {64, 1, 8, 0, 1, 2},
                           {64, 2, 8, 0, 2, 1}, {64, 2, 8, 0, 2, 2}, {32, 1, 16, 0, 1, 1}, {32, 1, 24, 0, 1}, {128, 4, 6, 0, 1}, {64, 4, 4, 0, 1}};
  // Loom's maps used L2_PROMOTION_L2_128B until 2026-11-23: the promotion is swept too.
  const CUtensorMapL2promotion promos[] = {CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B};
  const char* promo_names[] = {"none", "128B", "256B"};
  for (int pi = 0; pi < 3; ++pi)
  for (int rows : {32, 64, 128}) {
    for (int i = 0; i < sets; ++i) {
      if (!bufs[i]) { CK(cudaMalloc(&bufs[i], bytes)); CK(cudaMemset(bufs[i], 1, bytes)); }
      cuuint64_t dims[2] = {cuuint64_t(K), cuuint64_t(N)}, strides[1] = {cuuint64_t(K) * 2};
      cuuint32_t box[2] = {64, cuuint32_t(rows)}, estr[2] = {1, 1};
      CU(cuTensorMapEncodeTiled(&maps[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, bufs[i], dims, strides, box, estr,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promos[pi],
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
      // X: 256 private copies of [16, 4096] bf16 stacked (2 MB each set); xmode 1 uses copy 0.
      if (!xbufs[i]) { CK(cudaMalloc(&xbufs[i], 256 * 16 * size_t(K) * 2)); CK(cudaMemset(xbufs[i], 1, 256 * 16 * size_t(K) * 2)); }
      cuuint64_t xdims[2] = {cuuint64_t(K), 256 * 16};
      cuuint32_t xbox[2] = {64, 16};
      CU(cuTensorMapEncodeTiled(&xmaps[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, xbufs[i], xdims, strides, xbox, estr,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promos[pi],
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    }
    for (auto c : cfgs) {
      if (c.rows != rows || (pi < 2 && c.q > 2)) continue;
      size_t smem = size_t(c.stages) * (2 * c.rows * 128 + (c.xmode ? 4096 : 0)) + 16 * c.stages;
      int grid = N / c.rows * c.q;
      double us = graph_us([&](cudaStream_t s, int k) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(grid); cfg.blockDim = dim3(160); cfg.dynamicSmemBytes = smem; cfg.stream = s;
        cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = c.cluster; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
        cfg.attrs = at; cfg.numAttrs = c.cluster > 1 ? 1 : 0;
        CK(cudaLaunchKernelEx(&cfg, tma2d_ring_kernel, maps[k], xmaps[k], c.rows, c.q, K / 128, c.stages, c.interleave, c.xmode, sink)); }, sets, per_graph);
      printf("L2 promotion %s  ", promo_names[pi]);
      printf("%s rows %3d  K split %d%s  %2d stages of %2zu KB  %3d CTAs%s: %6.2f us (%4.2f TB/s)\n",
             c.xmode == 0 ? "W only   " : c.xmode == 1 ? "W+X      " : "W+X(priv)", c.rows, c.q,
             c.interleave ? " interleaved" : "            ", c.stages, size_t(2 * c.rows * 128) >> 10, grid,
             c.cluster > 1 ? " cluster 2" : "          ", us, bytes / us / 1e6);
    }
  }
  CK(cudaGetLastError());
  return 0;
}
