// TMA-ring streaming roofline (the Hopper GEMM's decode and split-K): how fast can a kernel built
// like Loom's memory-bound GEMMs — one CTA per SM, one producer thread issuing bulk copies
// into a STAGES-deep shared-memory ring guarded by full/empty mbarriers, consumer warps
// releasing slots — read N bytes of HBM, timed like `loom run --bench`'s graph replay
// (back-to-back launches rotating over input sets larger than L2)? Compared with plain
// 16-byte loads over the whole GPU, and swept over size so time = ramp + bytes / rate.
// Build: nvcc -O3 -arch=sm_90a -o tma_roofline tma_roofline.cu ; run: ./tma_roofline
#include "probe_timing.h"


__device__ __forceinline__ unsigned sa(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void wait_parity(unsigned long long* bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(sa(bar)), "r"(parity) : "memory");
}

// Warps 0..consumers-1 consume; the last warp's lane 0 produces. Each CTA reads one
// contiguous range (as a decode CTA reads its rows of W).
__global__ void tma_ring_kernel(const char* p, size_t bytes, unsigned chunk, int stages, unsigned* sink) {
  extern __shared__ __align__(1024) unsigned char sm[];
  auto* full = reinterpret_cast<unsigned long long*>(sm + size_t(stages) * chunk);
  auto* empty = full + stages;
  const int consumers = blockDim.x / 32 - 1, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t chunks = bytes / chunk, c0 = chunks * blockIdx.x / gridDim.x;
  const size_t lo = c0 * chunk;
  const int n = int(chunks * (blockIdx.x + 1) / gridDim.x - c0);
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
        int s = i % stages;
        if (i >= stages) wait_parity(empty + s, ((i / stages) - 1) & 1);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sa(full + s)), "r"(chunk) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                     ::"r"(sa(sm + size_t(s) * chunk)), "l"(p + lo + size_t(i) * chunk), "r"(chunk), "r"(sa(full + s)) : "memory");
      }
  } else {
    for (int i = 0; i < n; ++i) {
      int s = i % stages;
      wait_parity(full + s, (i / stages) & 1);
      acc ^= reinterpret_cast<const unsigned*>(sm + size_t(s) * chunk)[threadIdx.x];
      __syncwarp();
      if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sa(empty + s)) : "memory");
    }
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void read_kernel(const uint4* __restrict__ p, size_t n, unsigned* sink) {
  extern __shared__ unsigned dyn[];  // only to occupy shared memory in the big-smem variant
  unsigned acc = 0;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ b.y ^ c.z ^ d.w;
  }
  for (; i < n; i += stride) acc ^= __ldcs(p + i).x;
  if (acc == 0x12345678u) *sink = acc;
}


int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  int sms = prop.multiProcessorCount; size_t l2 = prop.l2CacheSize;
  printf("%s, %d SMs, L2 %zu MB\n", prop.name, sms, l2 >> 20);
  unsigned* sink; CK(cudaMalloc(&sink, 4));
  CK(cudaFuncSetAttribute(tma_ring_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  CK(cudaFuncSetAttribute(read_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  // How many clusters of c CTAs (one CTA per SM at this shared memory) can be resident at
  // once? Clusters live inside one GPC, so a GPC whose SM count is not a multiple of c
  // strands SMs: a grid of 128 CTAs in clusters of 4 may not fit in one wave.
  for (int c : {1, 2, 4, 8})
    for (size_t smem : {size_t(80 * 1024), size_t(160 * 1024), size_t(200 * 1024)}) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(128); cfg.blockDim = dim3(160); cfg.dynamicSmemBytes = smem;
      cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeClusterDimension;
      at[0].val.clusterDim.x = c; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
      cfg.attrs = at; cfg.numAttrs = 1;
      int n = 0; CK(cudaOccupancyMaxActiveClusters(&n, tma_ring_kernel, &cfg));
      printf("cluster %d, %3zu KB smem: %3d clusters resident (%3d CTAs)\n", c, smem >> 10, n, n * c);
    }
  struct Ring { int grid; unsigned chunk; int stages; int warps; int cluster = 1; };
  std::vector<Ring> rings = {{128, 16384, 8, 4}, {128, 16384, 12, 4}, {128, 32768, 6, 4}, {132, 16384, 12, 4},
                             {132, 32768, 6, 4}, {128, 8192, 24, 4}, {64, 32768, 6, 4}, {256, 16384, 6, 4},
                             {128, 4096, 8, 4}, {128, 4096, 4, 4}, {132, 4096, 8, 4},
                             {128, 16384, 8, 4, 2}, {128, 16384, 8, 4, 4}, {64, 32768, 6, 4, 2}};
  printf("MB | plain 4x512/SM | plain 1x1024/SM with smem | TMA ring: grid x chunk KB x stages\n");
  for (size_t mb : {4, 8, 16, 32, 64, 128}) {
    size_t bytes = mb << 20;
    int sets = int((2 * l2 + bytes - 1) / bytes) + 1;
    std::vector<char*> bufs(sets);
    for (auto& b : bufs) { CK(cudaMalloc(&b, bytes)); CK(cudaMemset(b, 1, bytes)); }
    int per_graph = (40 + sets - 1) / sets * sets;
    double plain = graph_us([&](cudaStream_t s, int k) { read_kernel<<<sms * 4, 512, 0, s>>>((const uint4*)bufs[k], bytes / 16, sink); }, sets, per_graph);
    printf("%3zu | plain %6.2f us (%4.2f TB/s)", mb, plain, bytes / plain / 1e6);
    // One CTA of 1024 threads per SM, without and with 200 KB of (unused) dynamic shared
    // memory: does a big-shared-memory launch cost anything by itself?
    for (size_t smem : {size_t(0), size_t(200 * 1024)}) {
      double us = graph_us([&](cudaStream_t s, int k) { read_kernel<<<sms, 1024, smem, s>>>((const uint4*)bufs[k], bytes / 16, sink); }, sets, per_graph);
      printf(" | 1x1024 smem %3zuK %6.2f", smem >> 10, us);
    }
    for (auto r : rings) {
      size_t smem = size_t(r.chunk) * r.stages + 16 * r.stages;
      if (smem > 227 * 1024) continue;
      // Clustered launches (r.cluster > 1) do nothing with the cluster: they measure what
      // launching in clusters costs a plain stream (GPC placement, cluster scheduling).
      double us = graph_us([&](cudaStream_t s, int k) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(r.grid); cfg.blockDim = dim3(32 * (r.warps + 1)); cfg.dynamicSmemBytes = smem; cfg.stream = s;
        cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = r.cluster; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
        cfg.attrs = at; cfg.numAttrs = r.cluster > 1 ? 1 : 0;
        CK(cudaLaunchKernelEx(&cfg, tma_ring_kernel, (const char*)bufs[k], bytes, r.chunk, r.stages, sink)); }, sets, per_graph);
      printf(" | %dx%ux%d%s %6.2f (%4.2f)", r.grid, r.chunk / 1024, r.stages, r.cluster > 1 ? (r.cluster == 2 ? "c2" : "c4") : "", us, bytes / us / 1e6);
    }
    printf("\n");
    for (auto b : bufs) cudaFree(b);
  }
  CK(cudaGetLastError());
  return 0;
}
