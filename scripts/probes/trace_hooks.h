// Per-CTA timestamps for a Loom-generated kernel built outside Loom (scripts/probes/
// trace-decode.sh): %globaltimer at the CTA's start, after its mainloop (consumer thread 0)
// and at its end, and the SM it ran on. Included ahead of the generated source.
#pragma once
// Slots: 0 start, 1 mainloop end, 2 end, 3 SM id, 4 after the first cluster barrier, 5 after
// the second (CLUSTER_K's exchange).
__device__ unsigned long long loom_trace[4096][8];
__device__ __forceinline__ unsigned long long loom_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ int loom_cta() { return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); }
// Stamps go to registers of thread 0 and reach global memory only at the kernel's end
// (LOOM_TRACE_FLUSH): a global store before a cluster barrier's release-arrive would make
// the barrier wait for it and distort what is measured.
#define LOOM_TRACE_DECL unsigned long long loom_t[6] = {0, 0, 0, 0, 0, 0}
#define LOOM_TRACE(slot)                      \
  do {                                        \
    if (threadIdx.x == 0) loom_t[slot] = loom_now(); \
  } while (0)
#define LOOM_TRACE_FLUSH                                                          \
  do {                                                                            \
    if (threadIdx.x == 0) {                                                       \
      unsigned sm;                                                                \
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));                             \
      loom_t[3] = sm;                                                             \
      for (int i = 0; i < 6; ++i) loom_trace[loom_cta()][i] = loom_t[i];          \
    }                                                                             \
  } while (0)
