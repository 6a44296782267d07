// loom_device.cuh — Loom's device header: one small wrapper per instruction that
// generated kernels use. Each wrapper's name spells the instruction, its shape and its
// types; the PTX ISA section it implements is in the comment above it. The header is
// embedded in the Loom library and handed to NVRTC, so kernels need no include path.
//
// Plain loads/stores are written as C++ dereferences on purpose: an `asm volatile` load
// would stop nvcc from scheduling and combining them. Instructions C++ cannot express
// (tf32 rounding, cp.async, TMA and mbarriers) are inline PTX.
#pragma once

typedef unsigned short loom_f16;   // IEEE binary16 bits
typedef unsigned short loom_bf16;  // bfloat16 bits

// A CUtensorMap as the kernel receives it: 128 opaque bytes, 64-byte aligned (NVRTC has
// no cuda.h). Passed by value as `const __grid_constant__`, so its address is the
// parameter's own and the copy engine reads it from there.
struct __align__(64) loom_tensor_map {
  unsigned long long opaque[16];
};

namespace loom {

// ---- conversions -------------------------------------------------------------------

// PTX ISA 9.7.9.21 Data Movement and Conversion: cvt (f16 -> f32, exact)
__device__ __forceinline__ float cvt_f32_f16(loom_f16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

// PTX ISA 9.7.9.21 cvt.rn.f16.f32 (round to nearest even)
__device__ __forceinline__ loom_f16 cvt_rn_f16_f32(float f) {
  loom_f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// bf16 -> f32 is exact: bf16 is the high half of an f32 (PTX ISA 9.7.9.21 for the
// reverse direction; this direction needs no instruction).
__device__ __forceinline__ float cvt_f32_bf16(loom_bf16 h) {
  return __uint_as_float(static_cast<unsigned>(h) << 16);
}

// PTX ISA 9.7.9.21 cvt.rn.bf16.f32 (sm_80+)
__device__ __forceinline__ loom_bf16 cvt_rn_bf16_f32(float f) {
  loom_bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// PTX ISA 9.7.9.21 cvt.rna.tf32.f32 (sm_80+): the rounding tensor cores apply to tf32
// inputs; SIMT kernels apply it at load so tf32 means the same thing on every path.
__device__ __forceinline__ float cvt_rna_tf32_f32(float f) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return __uint_as_float(r);
}

// ---- global loads and stores, by element type (compute type is f32) ----------------

__device__ __forceinline__ float ld_f32(const float* p) { return *p; }
__device__ __forceinline__ float ld_tf32(const float* p) { return cvt_rna_tf32_f32(*p); }
__device__ __forceinline__ float ld_f16(const loom_f16* p) { return cvt_f32_f16(*p); }
__device__ __forceinline__ float ld_bf16(const loom_bf16* p) { return cvt_f32_bf16(*p); }

__device__ __forceinline__ void st_f32(float* p, float v) { *p = v; }
// tf32 is stored as f32; values reaching a tf32 store were rounded when loaded.
__device__ __forceinline__ void st_tf32(float* p, float v) { *p = v; }
__device__ __forceinline__ void st_f16(loom_f16* p, float v) { *p = cvt_rn_f16_f32(v); }
__device__ __forceinline__ void st_bf16(loom_bf16* p, float v) { *p = cvt_rn_bf16_f32(v); }

// ---- vector copies (atoms ld/st_{global,shared}_{b32,v2_b32,v4_b32}) ---------------
// PTX ISA 9.7.9.8 ld / 9.7.9.9 st with .v2/.v4: one instruction moves 8/16 bytes; the
// address must be aligned to the full width (the vectorizer proves it).

struct b32x2 { unsigned x, y; };
struct b32x4 { unsigned x, y, z, w; };

__device__ __forceinline__ unsigned ld_global_b32(const void* p) {
  return *static_cast<const unsigned*>(p);
}
__device__ __forceinline__ b32x2 ld_global_v2_b32(const void* p) {
  uint2 v = *static_cast<const uint2*>(p);
  return {v.x, v.y};
}
__device__ __forceinline__ b32x4 ld_global_v4_b32(const void* p) {
  uint4 v = *static_cast<const uint4*>(p);
  return {v.x, v.y, v.z, v.w};
}
__device__ __forceinline__ void st_global_b32(void* p, unsigned v) { *static_cast<unsigned*>(p) = v; }
__device__ __forceinline__ void st_global_v2_b32(void* p, b32x2 v) {
  *static_cast<uint2*>(p) = make_uint2(v.x, v.y);
}
__device__ __forceinline__ void st_global_v4_b32(void* p, b32x4 v) {
  *static_cast<uint4*>(p) = make_uint4(v.x, v.y, v.z, v.w);
}
__device__ __forceinline__ unsigned ld_shared_b32(const void* p) { return ld_global_b32(p); }
__device__ __forceinline__ b32x2 ld_shared_v2_b32(const void* p) { return ld_global_v2_b32(p); }
__device__ __forceinline__ b32x4 ld_shared_v4_b32(const void* p) { return ld_global_v4_b32(p); }
__device__ __forceinline__ void st_shared_b32(void* p, unsigned v) { st_global_b32(p, v); }
__device__ __forceinline__ void st_shared_v2_b32(void* p, b32x2 v) { st_global_v2_b32(p, v); }
__device__ __forceinline__ void st_shared_v4_b32(void* p, b32x4 v) { st_global_v4_b32(p, v); }

// ---- vector loads and stores of f32 register arrays ------------------------------
// One LDG/LDS.64/.128 (STG/STS) filling consecutive elements of a register array; after
// unrolling the destination indices are constants, so the array stays in registers.

__device__ __forceinline__ void ld_v2_f32(float* dst, const float* p) {
  float2 v = *reinterpret_cast<const float2*>(p);
  dst[0] = v.x; dst[1] = v.y;
}
__device__ __forceinline__ void ld_v4_f32(float* dst, const float* p) {
  float4 v = *reinterpret_cast<const float4*>(p);
  dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
}
__device__ __forceinline__ void st_v2_f32(float* p, const float* src) {
  *reinterpret_cast<float2*>(p) = make_float2(src[0], src[1]);
}
__device__ __forceinline__ void st_v4_f32(float* p, const float* src) {
  *reinterpret_cast<float4*>(p) = make_float4(src[0], src[1], src[2], src[3]);
}

// PTX ISA "red": vector reductions into global memory (.v2/.v4 .f32, sm_90 and newer;
// relaxed, gpu scope) — one L2 reduction per 8/16 bytes instead of one per element.
#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void red_add_v2_f32(float* p, const float* v) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(v[0]), "f"(v[1]) : "memory");
}
__device__ __forceinline__ void red_add_v4_f32(float* p, const float* v) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]), "f"(v[1]),
               "f"(v[2]), "f"(v[3]) : "memory");
}
#endif

// Split-K's tile arrival (Kernel IR TileArrive): returns 1 in every participating thread
// of the CTA whose arrival is the `arrivals`-th on `counter`, else 0, and resets the
// counter in that CTA. The barrier in front orders every participating thread's partial
// sums before thread 0's fence. Fence-based synchronization (PTX ISA 8.x memory
// consistency model, "release and acquire patterns"): `fence.acq_rel.gpu` then a relaxed
// atom is a release of everything the barrier ordered before it; in the last CTA only, the
// atom's read followed by a second `fence.acq_rel.gpu` is the acquire of the earlier
// arrivals' releases. An `atom.acq_rel` would fence again in every CTA (ptxas emits a
// MEMBAR.GPU before the atom for each), on the way of every split's exit (2026-11-23). The
// barrier reduction behind it (9.7.13.1 bar.red.or) hands the answer to the others,
// ordered after the acquire. The counter is f32 so that it lives with the f32 workspace:
// counts stay exact far beyond any split count.
__device__ __forceinline__ int tile_arrive_thread0(float* counter, float arrivals,
                                                   bool arriving = threadIdx.x == 0) {
  int last = 0;
  if (arriving) {
    float old;
    // The release fence first, as CUTLASS's split-K semaphore does: it covers the other
    // threads' stores (ordered before it by the barrier), which the atom's own release
    // would cover only through cumulativity.
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    asm volatile("atom.add.relaxed.gpu.global.f32 %0, [%1], 1.0;" : "=f"(old) : "l"(counter)
                 : "memory");
    last = old == arrivals - 1.0f;
    if (last) {
      asm volatile("fence.acq_rel.gpu;" ::: "memory");  // the acquire
      // No other CTA touches the counter again in this launch: the next one finds it 0.
      *counter = 0.0f;
    }
  }
  return last;
}
// Every thread of the block arrives (bar.sync 0 and bar.red 0).
__device__ __forceinline__ int tile_arrive_block(float* counter, float arrivals) {
  __syncthreads();
  return __syncthreads_or(tile_arrive_thread0(counter, arrivals));
}
// The threads arrive in aligned groups of `threads` (a multiple of 32), group g =
// threadIdx.x / threads on named barrier 1 + g, its first thread arriving for it: the
// first `threads` threads are the consumer warpgroups of a specialized kernel (split-K's
// fixup; its producer has stopped at a lower register budget and must not run this), a
// group of 128 one consumer warpgroup (stream-K's partial tiles, per warpgroup; the same
// barrier ids as the TMA-store epilogue's owners, k:053, with the same 128 threads).
__device__ __forceinline__ int tile_arrive_group(float* counter, float arrivals, unsigned threads) {
  const unsigned id = 1 + threadIdx.x / threads;
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
  const int mine = tile_arrive_thread0(counter, arrivals, threadIdx.x % threads == 0);
  int last;
  asm volatile(
      "{\n"
      "  .reg .pred p, q;\n"
      "  setp.ne.s32 p, %1, 0;\n"
      "  bar.red.or.pred q, %2, %3, p;\n"
      "  selp.s32 %0, 1, 0, q;\n"
      "}\n"
      : "=r"(last) : "r"(mine), "r"(id), "r"(threads) : "memory");
  return last;
}

// Narrow element types: one 4/8/16-byte access, each element widened to f32 (loads) or
// narrowed from f32 (stores; exact when the value came from the same type).
template <int W> struct loom_bytes_of;
template <> struct loom_bytes_of<2> { typedef unsigned type; };
template <> struct loom_bytes_of<4> { typedef uint2 type; };
template <> struct loom_bytes_of<8> { typedef uint4 type; };

template <int W>
__device__ __forceinline__ void ld_vn_f16(float* dst, const loom_f16* p) {
  typename loom_bytes_of<W>::type v = *reinterpret_cast<const typename loom_bytes_of<W>::type*>(p);
  const loom_f16* h = reinterpret_cast<const loom_f16*>(&v);
#pragma unroll
  for (int i = 0; i < W; ++i) dst[i] = cvt_f32_f16(h[i]);
}
template <int W>
__device__ __forceinline__ void ld_vn_bf16(float* dst, const loom_bf16* p) {
  typename loom_bytes_of<W>::type v = *reinterpret_cast<const typename loom_bytes_of<W>::type*>(p);
  const loom_bf16* h = reinterpret_cast<const loom_bf16*>(&v);
#pragma unroll
  for (int i = 0; i < W; ++i) dst[i] = cvt_f32_bf16(h[i]);
}
template <int W>
__device__ __forceinline__ void st_vn_f16(loom_f16* p, const float* src) {
  typename loom_bytes_of<W>::type v;
  loom_f16* h = reinterpret_cast<loom_f16*>(&v);
#pragma unroll
  for (int i = 0; i < W; ++i) h[i] = cvt_rn_f16_f32(src[i]);
  *reinterpret_cast<typename loom_bytes_of<W>::type*>(p) = v;
}
template <int W>
__device__ __forceinline__ void st_vn_bf16(loom_bf16* p, const float* src) {
  typename loom_bytes_of<W>::type v;
  loom_bf16* h = reinterpret_cast<loom_bf16*>(&v);
#pragma unroll
  for (int i = 0; i < W; ++i) h[i] = cvt_rn_bf16_f32(src[i]);
  *reinterpret_cast<typename loom_bytes_of<W>::type*>(p) = v;
}
__device__ __forceinline__ void ld_v2_f16(float* d, const loom_f16* p) { ld_vn_f16<2>(d, p); }
__device__ __forceinline__ void ld_v4_f16(float* d, const loom_f16* p) { ld_vn_f16<4>(d, p); }
__device__ __forceinline__ void ld_v8_f16(float* d, const loom_f16* p) { ld_vn_f16<8>(d, p); }
__device__ __forceinline__ void ld_v2_bf16(float* d, const loom_bf16* p) { ld_vn_bf16<2>(d, p); }
__device__ __forceinline__ void ld_v4_bf16(float* d, const loom_bf16* p) { ld_vn_bf16<4>(d, p); }
__device__ __forceinline__ void ld_v8_bf16(float* d, const loom_bf16* p) { ld_vn_bf16<8>(d, p); }
__device__ __forceinline__ void st_v2_f16(loom_f16* p, const float* s) { st_vn_f16<2>(p, s); }
__device__ __forceinline__ void st_v4_f16(loom_f16* p, const float* s) { st_vn_f16<4>(p, s); }
__device__ __forceinline__ void st_v8_f16(loom_f16* p, const float* s) { st_vn_f16<8>(p, s); }
__device__ __forceinline__ void st_v2_bf16(loom_bf16* p, const float* s) { st_vn_bf16<2>(p, s); }
__device__ __forceinline__ void st_v4_bf16(loom_bf16* p, const float* s) { st_vn_bf16<4>(p, s); }
__device__ __forceinline__ void st_v8_bf16(loom_bf16* p, const float* s) { st_vn_bf16<8>(p, s); }
// W 16-bit elements moved as their bits (one 2/4/8/16-byte load and store): a staged
// epilogue's tile already holds the output type, so widening each element to f32 and
// narrowing it back would be two conversions for nothing.
template <int W> struct loom_bits_of { typedef typename loom_bytes_of<W>::type type; };
template <> struct loom_bits_of<1> { typedef unsigned short type; };
template <int W>
__device__ __forceinline__ void mov_vn_b16(void* p, const void* s) {
  typedef typename loom_bits_of<W>::type T;
  *static_cast<T*>(p) = *static_cast<const T*>(s);
}
__device__ __forceinline__ void mov_b16(void* p, const void* s) { mov_vn_b16<1>(p, s); }
__device__ __forceinline__ void mov_v2_b16(void* p, const void* s) { mov_vn_b16<2>(p, s); }
__device__ __forceinline__ void mov_v4_b16(void* p, const void* s) { mov_vn_b16<4>(p, s); }
__device__ __forceinline__ void mov_v8_b16(void* p, const void* s) { mov_vn_b16<8>(p, s); }
// tf32: f32 storage, rounded to tf32 on load.
__device__ __forceinline__ void ld_v2_tf32(float* d, const float* p) {
  ld_v2_f32(d, p); d[0] = cvt_rna_tf32_f32(d[0]); d[1] = cvt_rna_tf32_f32(d[1]);
}
__device__ __forceinline__ void ld_v4_tf32(float* d, const float* p) {
  ld_v4_f32(d, p);
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] = cvt_rna_tf32_f32(d[i]);
}
__device__ __forceinline__ void st_v2_tf32(float* p, const float* s) { st_v2_f32(p, s); }
__device__ __forceinline__ void st_v4_tf32(float* p, const float* s) { st_v4_f32(p, s); }

// ---- asynchronous global -> shared copies (sm_80+) -----------------------------------

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// PTX ISA 9.7.9.25.3 cp.async: copy 4/8/16 bytes global -> shared without registers.
// src-size 0 (pred false) zero-fills the destination and reads nothing: the edge tiles
// of any M, N, K load zeros instead of branching. .cg (L2 only) needs 16 bytes.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool pred) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(pred ? 4 : 0));
}
__device__ __forceinline__ void cp_async_8(void* dst, const void* src, bool pred) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(pred ? 8 : 0));
}
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(pred ? 16 : 0));
}
// PTX ISA 9.7.9.25.4 cp.async.commit_group
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// PTX ISA 9.7.9.25.5 cp.async.wait_group N: at most N committed groups still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// ---- realigned 16-byte copies of 16-bit rows (ir/realign.h) -------------------------
// A row of 16-bit elements that starts 2-byte aligned (B[K, N] with N odd) moves as the
// aligned 16-byte chunks covering a thread's 8 elements, shifted into place when stored.

// w[0..8) <- the chunks at elements a = g & ~7 and a + 8 of `base` (16-byte aligned), as
// raw bits: a chunk only when it holds one of the `valid` wanted elements g.., and one that
// straddles the tensor's end (`extent` elements of storage: the element count, or a
// pitched view's footprint) element by element, up to the end: no byte outside the tensor
// is read. Registers of unread elements are 0.
__device__ __forceinline__ void ld_chunks16(unsigned* w, const void* base, long long g, int valid,
                                            long long extent) {
#pragma unroll
  for (int i = 0; i < 8; ++i) w[i] = 0u;
  if (valid <= 0) return;
  const unsigned short* e = static_cast<const unsigned short*>(base);
  const long long a = g & ~7LL;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const long long c0 = a + 8 * j;
    if (j == 1 && c0 >= g + valid) break;  // chunk 0 always holds element g
    if (c0 + 8 <= extent) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(e + c0));
      w[4 * j + 0] = v.x; w[4 * j + 1] = v.y; w[4 * j + 2] = v.z; w[4 * j + 3] = v.w;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (c0 + i < extent) w[4 * j + i / 2] |= unsigned(e[c0 + i]) << (16 * (i % 2));
    }
  }
}

// dst[0..8) <- elements g % 8 .. g % 8 + 8 of the chunks w, zero from `valid` on: two
// word selects (by 4 and by 2 elements) and a funnel shift (by one), then one 16-byte
// shared store (dst starts a 16-byte unit of the slab).
__device__ __forceinline__ void st_realign16(void* dst, const unsigned* w, long long g, int valid) {
  const int sh = int(g & 7);
  unsigned y[6], z[5], o[4];
#pragma unroll
  for (int i = 0; i < 6; ++i) y[i] = (sh & 4) ? w[i + 2] : w[i];
#pragma unroll
  for (int i = 0; i < 5; ++i) z[i] = (sh & 2) ? y[i + 1] : y[i];
#pragma unroll
  for (int i = 0; i < 4; ++i) o[i] = __funnelshift_r(z[i], z[i + 1], (sh & 1) * 16);
  if (valid < 8) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      o[i] &= 2 * i + 1 < valid ? 0xffffffffu : 2 * i < valid ? 0x0000ffffu : 0u;
  }
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(dst)), "r"(o[0]),
               "r"(o[1]), "r"(o[2]), "r"(o[3])
               : "memory");
}

// ---- TMA: bulk tensor copies completing on mbarriers (sm_90+) -----------------------

// PTX ISA 9.7.13.15 mbarrier, mbarrier.init: `count` arrivals complete each phase; the
// barrier starts in phase 0 with no transactions pending.
__device__ __forceinline__ void mbarrier_init_shared_b64(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}

// PTX ISA 9.7.13.4 membar/fence, fence.mbarrier_init: makes the preceding inits visible
// to the async proxy (the copy engine that will complete_tx on them). release.cluster
// is the only form the ISA defines.
__device__ __forceinline__ void fence_mbarrier_init_release_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// PTX ISA 9.7.13.15 mbarrier, mbarrier.arrive.expect_tx: arrive once and raise the
// phase's transaction count by `bytes`; the phase completes when every arrival is in and
// the TMA loads have delivered those bytes. The state result is not needed (sink `_`).
__device__ __forceinline__ void mbarrier_arrive_expect_tx_shared_b64(unsigned long long* bar,
                                                                     unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

// PTX ISA 9.7.13.15 mbarrier, mbarrier.try_wait.parity: true once the phase of parity
// `parity` has completed (the phase in progress has the other parity). try_wait may
// suspend the thread for a while before returning false, so the loop does not spin hot.
__device__ __forceinline__ bool mbarrier_try_wait_parity_shared_b64(unsigned long long* bar,
                                                                    unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "  selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbarrier_wait_parity_shared_b64(unsigned long long* bar,
                                                                unsigned parity) {
  while (!mbarrier_try_wait_parity_shared_b64(bar, parity)) {
  }
}

// PTX ISA 9.7.9.25 data movement, cp.async.bulk.tensor (.tile mode): the copy engine
// moves the box of `map` whose first element is at coordinates c0 (innermost) .. into
// shared memory at `dst` (128-byte aligned; swizzled as the map says) and signals its
// bytes to `bar` (complete_tx). Out-of-range elements are filled per the map (zeros).
// A CTA's own shared address is a valid .shared::cluster address.
__device__ __forceinline__ void cp_async_bulk_tensor_1d_global_to_shared(
    void* dst, const loom_tensor_map* map, unsigned long long* bar, int c0) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0)
      : "memory");
}
__device__ __forceinline__ void cp_async_bulk_tensor_2d_global_to_shared(
    void* dst, const loom_tensor_map* map, unsigned long long* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void cp_async_bulk_tensor_3d_global_to_shared(
    void* dst, const loom_tensor_map* map, unsigned long long* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void cp_async_bulk_tensor_4d_global_to_shared(
    void* dst, const loom_tensor_map* map, unsigned long long* bar, int c0, int c1, int c2,
    int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
__device__ __forceinline__ void cp_async_bulk_tensor_5d_global_to_shared(
    void* dst, const loom_tensor_map* map, unsigned long long* bar, int c0, int c1, int c2,
    int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

// The TMA swizzles XOR shared-address bits 4..9, so a swizzled box matches the offsets
// Loom computes only if the buffer starts on 1024 bytes. `extern __shared__
// __align__(1024)` asks for that; this check turns a broken promise into a launch error
// (__trap) instead of silently permuted data.
__device__ __forceinline__ void require_smem_aligned_1024(const void* p) {
  if (smem_addr(p) & 1023u) __trap();
}

// PTX ISA 9.7.13.1 bar.sync a, b: the warps that execute barrier `id` wait until `threads`
// threads (a multiple of 32) arrived at it; other warps are not held — a named barrier
// among the warps that share a buffer, where __syncthreads (barrier 0, every thread)
// would wait for a producer warpgroup that never comes. Any architecture (k:012's
// SPLIT_WARPS groups on sm_80 too).
__device__ __forceinline__ void bar_sync(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// PTX ISA 9.7.13.1 bar.arrive a, b: this warp counts toward barrier `id`'s `threads`
// and runs on; the warps that bar.sync the same id wait for it (a one-way hand-off).
__device__ __forceinline__ void bar_arrive(unsigned id, unsigned threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- TMA stores, multicast loads and mbarrier arrivals (sm_90+) ---------------------
#if __CUDA_ARCH__ >= 900

// PTX ISA 9.7.13.15 mbarrier, mbarrier.arrive: the calling thread arrives once on `bar`
// (release, CTA scope) — how a consumer hands a ring slot back to the producer.
__device__ __forceinline__ void mbarrier_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// PTX ISA 9.7.13.15 mbarrier, mbarrier.arrive on a .shared::cluster address; Data
// Movement, mapa: `bar` is this CTA's mbarrier, mapa names the same slot in the shared memory of
// CTA `cta` of the cluster (a consumer releasing a slot that a multicast filled in every
// CTA of the cluster arrives on each of them).
// The arrival keeps the default .release.cta semantics, as a local arrive does: the
// hand-off only orders this warpgroup's finished wgmma reads (wgmma.wait_group already
// retired them) before the peer's TMA overwrite, and the async proxy's write waits on
// the barrier itself. `.release.cluster` would compile to MEMBAR.ALL.GPU before every
// arrival — waiting for the previous tile's epilogue stores to reach L2 on every k-step,
// which made 2-CTA clusters 2x slower than no cluster (bench/NOTES.md, 2026-11-22, the cluster slowdown).
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned long long* bar, unsigned cta) {
  asm volatile(
      "{\n"
      "  .reg .b32 remote;\n"
      "  mapa.shared::cluster.u32 remote, %0, %1;\n"
      "  mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(cta)
      : "memory");
}

// PTX ISA 9.7.13.4 membar/fence, fence.proxy.async.shared::cta: the thread's ordinary
// writes to shared memory become visible to the async proxy (wgmma operands, TMA stores)
// — between an epilogue's st.shared and the TMA store reading the tile, or after threads
// fill a wgmma operand themselves.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// PTX ISA 9.7.9.25 cp.async.bulk.tensor, .global.shared::cta.tile.bulk_group: the copy
// engine stores the box of `map` at coordinates c0 (innermost) .. from shared memory
// `src` (128-byte aligned, swizzled as the map says); out-of-range elements are not
// written. Completion is tracked by bulk groups (bulk_commit_group / bulk_wait_group_read).
__device__ __forceinline__ void tma_store_2d(const loom_tensor_map* map, const void* src, int c0,
                                             int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
      "r"(smem_addr(src)), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tma_store_3d(const loom_tensor_map* map, const void* src, int c0,
                                             int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          map),
      "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// 4-D: attention's O [B, H, S, D] (k:013, ATTN_TMA_STORE=1).
__device__ __forceinline__ void tma_store_4d(const loom_tensor_map* map, const void* src, int c0,
                                             int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          map),
      "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// PTX ISA 9.7.9.25 cp.async.bulk.commit_group: close the bulk group of the TMA stores
// issued so far by this thread.
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// PTX ISA 9.7.9.25 cp.async.bulk.wait_group.read N: until at most N bulk groups of this
// thread still read their shared source — the staging tile may then be overwritten
// (the global writes may still be in flight).
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// PTX ISA 9.7.9.25 cp.async.bulk.tensor .multicast::cluster: one TMA load delivers the box
// to the same shared offset `dst` in every CTA of the cluster whose bit is set in
// `cta_mask`, completing on the mbarrier at offset `bar` in each of them.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const loom_tensor_map* map,
                                                      unsigned long long* bar,
                                                      unsigned short cta_mask, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1)
      : "memory");
}
// The same for a batched GEMM's rank-3 and rank-4 boxes (batch coordinates outermost).
__device__ __forceinline__ void tma_load_3d_multicast(void* dst, const loom_tensor_map* map,
                                                      unsigned long long* bar,
                                                      unsigned short cta_mask, int c0, int c1,
                                                      int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%4, %5, %6}], [%2], %3;\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d_multicast(void* dst, const loom_tensor_map* map,
                                                      unsigned long long* bar,
                                                      unsigned short cta_mask, int c0, int c1,
                                                      int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%4, %5, %6, %7}], [%2], %3;\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// ---- thread-block clusters (sm_90+) ------------------------------------------------------

// PTX ISA 9.7.13.2 barrier.cluster, .arrive.relaxed: arrive without ordering this thread's
// memory accesses (for a cluster barrier that only says "I have started", e.g. before the
// first multicast lands in a peer's shared memory).
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
// PTX ISA 9.7.13.2 barrier.cluster, .arrive (release semantics): arrive, ordering the
// thread's prior memory accesses before the wait of every thread of the cluster.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory");
}
// PTX ISA 9.7.13.2 barrier.cluster, .wait (acquire semantics): until every thread of the
// cluster has arrived.
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}
// PTX ISA Data Movement, mapa.shared::cluster: the address of shared byte `addr` (this
// CTA's) in the shared memory of CTA `cta` of the cluster. A pure function of its
// operands (no volatile, no clobber), so the compiler computes it once per tile and peer,
// and the loads below address from it with immediates.
__device__ __forceinline__ unsigned mapa_shared_cluster(unsigned addr, unsigned cta) {
  unsigned remote;
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(cta));
  return remote;
}
// PTX ISA 9.7.9.12 st.async: store f32 element(s) `i`.. of the array `base` into the copy
// CTA `cta` of the cluster holds (its own included), completing 4 bytes per element on that
// CTA's mbarrier `bar` (complete_tx): the receiver waits on its mbarrier and then reads
// them; no cluster barrier, hence no fence, between (a cluster-scope release compiles to
// MEMBAR.ALL.GPU on sm_90, which waits for every memory access in flight).
__device__ __forceinline__ void st_async_v1_f32(const float* base, unsigned i, unsigned cta,
                                                unsigned long long* bar, float v) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(
          mapa_shared_cluster(smem_addr(base) + 4u * i, cta)),
      "r"(__float_as_uint(v)), "r"(mapa_shared_cluster(smem_addr(bar), cta))
      : "memory");
}
__device__ __forceinline__ void st_async_v2_f32(const float* base, unsigned i, unsigned cta,
                                                unsigned long long* bar, const float* v) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];\n" ::"r"(
          mapa_shared_cluster(smem_addr(base) + 4u * i, cta)),
      "r"(__float_as_uint(v[0])), "r"(__float_as_uint(v[1])),
      "r"(mapa_shared_cluster(smem_addr(bar), cta))
      : "memory");
}
__device__ __forceinline__ void st_async_v4_f32(const float* base, unsigned i, unsigned cta,
                                                unsigned long long* bar, const float* v) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(mapa_shared_cluster(smem_addr(base) + 4u * i, cta)),
      "r"(__float_as_uint(v[0])), "r"(__float_as_uint(v[1])), "r"(__float_as_uint(v[2])),
      "r"(__float_as_uint(v[3])), "r"(mapa_shared_cluster(smem_addr(bar), cta))
      : "memory");
}
// PTX ISA Special Registers, %cluster_ctarank: this CTA's rank in its cluster.
__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// PTX ISA 9.7.14.5.16 stmatrix .m8n8 .x4 .b16: the inverse of ldmatrix_x4 — register i of
// lane l holds two b16 of matrix i (row l/4, columns 2(l%4), 2(l%4)+1), and lane l
// supplies the address of row l%8 of matrix l/8 (16 bytes, 16-byte aligned); .trans
// stores each matrix transposed. The epilogue's registers -> shared step before a TMA store.
__device__ __forceinline__ void stmatrix_x4(void* smem_ptr, const unsigned src[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   smem_addr(smem_ptr)),
               "r"(src[0]), "r"(src[1]), "r"(src[2]), "r"(src[3])
               : "memory");
}
__device__ __forceinline__ void stmatrix_x4_trans(void* smem_ptr, const unsigned src[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   smem_addr(smem_ptr)),
               "r"(src[0]), "r"(src[1]), "r"(src[2]), "r"(src[3])
               : "memory");
}
#endif

// ---- wgmma ordering and matrix descriptors (sm_90a) -----------------------------------
// The wgmma.mma_async wrappers themselves (one per shape, type and A source) are
// generated per kernel: src/codegen/wgmma_wrappers.h.

// PTX ISA 9.7.15.5.1.2 Shared Memory Matrix Layout, "Matrix Descriptor": the 64-bit
// description of a shared operand tile. Bits 0-13 start address >> 4 (18-bit
// shared-window address), 16-29 leading dimension byte offset >> 4, 32-45 stride
// dimension byte offset >> 4, 49-51 base offset (0: Loom's operands start their swizzle
// pattern on its repeat, 1024 B for 128B), 62-63 swizzle mode (0 none, 1 128B, 2 64B,
// 3 32B). Which LBO/SBO a layout needs:
// src/atoms/wgmma_desc.h. Plain arithmetic, so ptxas folds the constant fields.
__device__ __forceinline__ unsigned long long wgmma_desc(const void* smem, unsigned lbo,
                                                         unsigned sbo, int swizzle_mode) {
  return static_cast<unsigned long long>((smem_addr(smem) & 0x3FFFFu) >> 4) |
         static_cast<unsigned long long>((lbo & 0x3FFFFu) >> 4) << 16 |
         static_cast<unsigned long long>((sbo & 0x3FFFFu) >> 4) << 32 |
         static_cast<unsigned long long>(swizzle_mode & 3) << 62;
}
// `v` as lane 0 has it: for a value that is the same in every lane of the warp (a warp or
// warpgroup index, threadIdx.x / 32k), which ptxas cannot prove from threadIdx.x. Marked
// uniform, it and what is computed from it (branches, wgmma descriptors) may use the
// uniform datapath instead of vector registers copied over with R2UR before each wgmma.
// Every lane of the warp must execute it.
__device__ __forceinline__ int warp_uniform(unsigned v) {
  return __shfl_sync(0xffffffffu, static_cast<int>(v), 0);
}

// The same descriptor moved `units16` 16-byte units (or `bytes`, a multiple of 16)
// further: the next K-step of a K-major row (32 B) or the next ring slot. The start field
// never carries into LBO for shared addresses below 256 KiB, so the add touches the low
// word only. Codegen builds every descriptor this way, the tensor's base descriptor
// (loop-invariant, computed once) plus the operand's offset: one add per operand per
// wgmma, where encoding the address afresh costs a mask, a shift and an or on top.
__device__ __forceinline__ unsigned long long wgmma_desc_add(unsigned long long desc,
                                                             unsigned units16) {
  const unsigned lo = static_cast<unsigned>(desc) + units16;
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}
__device__ __forceinline__ unsigned long long wgmma_desc_advance(unsigned long long desc,
                                                                 unsigned bytes) {
  return wgmma_desc_add(desc, bytes >> 4);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// PTX ISA 9.7.15.7 Asynchronous wgmma Proxy Operations, wgmma.fence: orders this
// warpgroup's prior register accesses of the accumulators (and the A fragment) before the
// next wgmma.mma_async reads them. Needed before the first wgmma of a chain and whenever
// the registers were touched in between.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
// PTX ISA 9.7.15.7 wgmma.commit_group: close the group of wgmma.mma_async issued so far.
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// PTX ISA 9.7.15.7 wgmma.wait_group N: until at most N committed groups are pending; the
// accumulators of the retired groups may then be read, their shared operands reused.
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// wgmma_wait_group<N>() that ptxas keeps below the math producing `v`: a branch on the
// values (an instruction ptxas does not move the wait above) guards a no-op nanosleep.
// Within one basic block ptxas (CUDA 13.0) hoists a wgmma.wait_group above arithmetic it
// does not depend on; FlashAttention-3's overlap (softmax of block j while O += P V of
// block j - 1 runs) then waits for P V before the softmax and overlaps nothing. The test
// is all-ones bits in every value, a negative NaN that f32 arithmetic never produces
// (its NaNs are 0x7fffffff); were it met, the branch only sleeps for 0 ns.
template <int N, typename... F>
__device__ __forceinline__ void wgmma_wait_group_after(F... v) {
  const unsigned all = (0xFFFFFFFFu & ... & __float_as_uint(v));
  if (all == 0xFFFFFFFFu) asm volatile("nanosleep.u32 0;\n" ::: "memory");
  wgmma_wait_group<N>();
}
// No instruction: tells the compiler each accumulator register may change here, so it
// neither reads one before a wgmma_wait_group nor moves a write past a wgmma_fence (the
// asm of a wgmma names the registers, but the hardware writes them later, asynchronously).
template <int N>
__device__ __forceinline__ void wgmma_fence_operand(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// PTX ISA Miscellaneous Instructions, setmaxnreg.inc / .dec: raise or lower this warp's
// register budget to Regs per thread (24..256, a multiple of 8) — producers give
// registers up, consumers take them, so the warpgroup that holds the accumulators gets
// most of the file.
template <int Regs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(Regs >= 24 && Regs <= 256 && Regs % 8 == 0, "setmaxnreg: 24..256, step 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
}
template <int Regs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(Regs >= 24 && Regs <= 256 && Regs % 8 == 0, "setmaxnreg: 24..256, step 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
}
#endif

// ---- shared-memory layouts -----------------------------------------------------------

// Swizzle<B, M, S> of an element offset: bits [M, M+B) ^= bits [M+S, M+S+B).
template <int B, int M, int S>
__device__ __forceinline__ int swz(int offset) {
  return offset ^ ((offset & (((1 << B) - 1) << (M + S))) >> S);
}

// ---- compute atoms -----------------------------------------------------------------

// PTX ISA 9.7.3.6 fma.rn.f32: acc += a * b with one rounding. __fmaf_rn is exactly this
// instruction and, unlike inline asm, lets ptxas schedule it freely.
__device__ __forceinline__ void fma_f32(float& acc, float a, float b) {
  acc = __fmaf_rn(a, b, acc);
}

// ---- epilogue scalar ops (f32) -------------------------------------------------------

// max, min and relu propagate NaN, as torch.maximum, torch.minimum and torch.relu do (and
// the fp64 reference, src/ir/stmt.cpp): fmaxf/fminf return the other operand, which
// would turn a NaN input into a plausible number. PTX ISA 9.7.3.9/10 `max.NaN.f32` /
// `min.NaN.f32` (sm_80+): the same instruction with the NaN flag, no extra cost.
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float min_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float relu(float x) { return max_nan(x, 0.0f); }
// Exact (erf) GELU, torch's default approximate='none'.
__device__ __forceinline__ float gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
// GELU's tanh approximation, torch's approximate='tanh' (GPT-2, Gemma).
__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
// SiLU, x * sigmoid(x) = x / (1 + e^-x), on the SFU's approximations (ex2.approx behind
// __expf, rcp.approx behind __fdividef: a few ulp of f32, far below a 16-bit output's
// rounding and the GEMM's own error) instead of expf's range reduction and the IEEE
// division's refinement, ~20 instructions per element. A fused SwiGLU epilogue runs one
// per output element while the tensor cores wait: with the operand loaded by TMA, the gate
// cost 66.0 us against the residual's 55.7 on 1024 x 8192 x 2048 (H100, bench/NOTES.md,
// "epilogue operands by TMA during the mainloop"). Same results at the extremes: NaN in,
// NaN out; -inf -> NaN (as -inf / inf); a large negative x -> -0 (x * rcp(inf)).
__device__ __forceinline__ float silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }

// ---- tensor-core atoms: mma.sync and ldmatrix (sm_75/sm_80+) ---------------------------
// The atoms mma_* and ldmatrix_* of src/atoms/atoms.cpp, which hold the fragment layouts:
// which element of the tile each register (half) of each lane holds. Fragments are
// arrays of .b32 registers; f16/bf16 fragments pack two elements per register, the
// lower-numbered one (a0, a2, ...) in the low half. Each mma accumulates in place,
// D = A * B + D, so a chain of calls over K needs no copies.

#if __CUDA_ARCH__ >= 800
// PTX ISA "Multiply-and-Accumulate Instruction: mma", .m16n8k16.row.col.f32.f16.f16.f32;
// fragments per 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type".
// d: c0..c3 (f32), a: a0..a7 (4 x f16x2), b: b0..b3 (2 x f16x2).
// kScaleD is the atom's scale-d (Stmt::scale_d), as wgmma's: 1 accumulates, C = D; 0
// makes C the constant 0, D = A * B — the first k-step of an accumulation, which then
// needs no zeroing of d before it (ptxas encodes the zero C as RZ, and d is not read).
template <int kScaleD = 1>
__device__ __forceinline__ void mma_m16n8k16_f32_f16(float d[4], const unsigned a[4],
                                                     const unsigned b[2]) {
  static_assert(kScaleD == 0 || kScaleD == 1, "mma.sync scale-d is 0 or 1");
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(kScaleD ? d[0] : 0.0f), "f"(kScaleD ? d[1] : 0.0f), "f"(kScaleD ? d[2] : 0.0f),
        "f"(kScaleD ? d[3] : 0.0f));
}

// PTX ISA "Multiply-and-Accumulate Instruction: mma", .m16n8k16.row.col.f32.bf16.bf16.f32;
// fragments as f16 (9.7.14.5.8), with bf16x2 registers; kScaleD as above.
template <int kScaleD = 1>
__device__ __forceinline__ void mma_m16n8k16_f32_bf16(float d[4], const unsigned a[4],
                                                      const unsigned b[2]) {
  static_assert(kScaleD == 0 || kScaleD == 1, "mma.sync scale-d is 0 or 1");
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(kScaleD ? d[0] : 0.0f), "f"(kScaleD ? d[1] : 0.0f), "f"(kScaleD ? d[2] : 0.0f),
        "f"(kScaleD ? d[3] : 0.0f));
}

// PTX ISA "Multiply-and-Accumulate Instruction: mma", .m16n8k16.row.col.f16.f16.f16.f16
// (f16 accumulate: half the accumulator registers, sums rounded to f16); fragments per
// 9.7.14.5.8. c: c0,c1 and c2,c3 as two f16x2 registers.
__device__ __forceinline__ void mma_m16n8k16_f16_f16(unsigned c[2], const unsigned a[4],
                                                     const unsigned b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
      "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"
      : "+r"(c[0]), "+r"(c[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// PTX ISA "Multiply-and-Accumulate Instruction: mma", .m16n8k8.row.col.f32.tf32.tf32.f32;
// fragments per 9.7.14.5.7 "Matrix Fragments for mma.m16n8k8" (.tf32). a: a0..a3,
// b: b0,b1, one tf32 per .b32, rounded beforehand with cvt_rna_tf32: the instruction
// takes operands already in .tf32 format and does not round them itself (raw f32 bits
// lose their low 13 mantissa bits, a truncation biased toward zero).
__device__ __forceinline__ void mma_m16n8k8_f32_tf32(float d[4], const unsigned a[4],
                                                     const unsigned b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// PTX ISA 9.7.9.21 cvt.rn.f16x2.f32 d, a, b: a to the upper half, b to the lower — the
// .f16x2 register of an mma fragment holding values lo (lower-numbered) and hi. Loom's
// fragments hold values already representable in f16, so the rounding is exact.
__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// PTX ISA 9.7.9.21 cvt.rn.bf16x2.f32: as pack_f16x2, for .bf16x2 fragment registers.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// PTX ISA 9.7.9.21 cvt.rna.tf32.f32: the tf32 bits of f (round to nearest, ties away),
// as an mma .tf32 operand register wants them. cvt_rna_tf32_f32 above is the same
// rounding returned as a float, for SIMT code.
__device__ __forceinline__ unsigned cvt_rna_tf32(float f) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
}
#endif

// A 16-bit fragment value into half `Hi` of its packed .b32 register: the PTX ISA packs
// f16/bf16 fragment value v into register v/2, even values in the low half. Element-wise
// fragment loads (where ldmatrix does not apply) write registers the mma reads as is.
template <int Hi>
__device__ __forceinline__ void set_b16_half(unsigned& r, unsigned short bits) {
  r = Hi ? (r & 0xffffu) | (unsigned(bits) << 16) : (r & 0xffff0000u) | bits;
}

// The inverse: the 16-bit value in half `Hi` of a packed register. An f16 accumulator
// (mma .f16.f16.f16.f16, ACC=f16) holds c0,c1 in register 0 and c2,c3 in register 1;
// the epilogue reads each value with this and widens it (cvt_f32_f16) or stores it as is.
template <int Hi>
__device__ __forceinline__ unsigned short b16_half(unsigned r) {
  return static_cast<unsigned short>(Hi ? r >> 16 : r & 0xffffu);
}

// A 16-bit element stored as the bits it already has: an f16 accumulator value into an
// f16 output needs no conversion.
__device__ __forceinline__ void st_b16(unsigned short* p, unsigned short bits) { *p = bits; }

#if __CUDA_ARCH__ >= 750
// PTX ISA 9.7.14.5.15 ldmatrix .m8n8 .b16: the warp loads 4 (x4) or 2 (x2) 8x8 matrices;
// lane l supplies `smem_ptr`, the start of row l%8 of matrix l/8 (16 bytes, 16-byte
// aligned; lanes past the last matrix are ignored). dst[i] receives two elements of
// matrix i: row l/4, columns 2(l%4), 2(l%4)+1 — or, with .trans, column l/4 of rows
// 2(l%4), 2(l%4)+1. No "memory" clobber, like the plain loads above: shared data written
// by other lanes is only visible after a barrier, which orders the compiler too.
__device__ __forceinline__ void ldmatrix_x4(unsigned dst[4], const void* smem_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(dst[0]), "=r"(dst[1]), "=r"(dst[2]), "=r"(dst[3])
               : "r"(smem_addr(smem_ptr)));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned dst[2], const void* smem_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(dst[0]), "=r"(dst[1])
               : "r"(smem_addr(smem_ptr)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned dst[4], const void* smem_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(dst[0]), "=r"(dst[1]), "=r"(dst[2]), "=r"(dst[3])
               : "r"(smem_addr(smem_ptr)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned dst[2], const void* smem_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(dst[0]), "=r"(dst[1])
               : "r"(smem_addr(smem_ptr)));
}

// PTX ISA 9.7.14.5.15 ldmatrix .m8n8 .b16 on 32-bit data (atoms ldmatrix_x{4,2}_b32): a
// 16-byte row is 4 words, and the two b16 lane l receives of matrix i (row l/4, halves
// 2(l%4), 2(l%4)+1) are word l%4 of that row, whole — element (l/4, l%4), the tf32
// fragments' (groupID, threadID_in_group). The words land raw in f32 fragment arrays:
// mma .tf32 reads raw .b32 registers, so they are still rounded with cvt_rna_tf32
// before the mma (no .trans view: it would split a word between two lanes).
__device__ __forceinline__ void ldmatrix_x4_b32(float dst[4], const void* smem_ptr) {
  unsigned r[4];
  ldmatrix_x4(r, smem_ptr);
#pragma unroll
  for (int i = 0; i < 4; ++i) dst[i] = __uint_as_float(r[i]);
}
__device__ __forceinline__ void ldmatrix_x2_b32(float dst[2], const void* smem_ptr) {
  unsigned r[2];
  ldmatrix_x2(r, smem_ptr);
  dst[0] = __uint_as_float(r[0]);
  dst[1] = __uint_as_float(r[1]);
}
#endif

// ---- attention's softmax -------------------------------------------------------------

// PTX ISA 9.7.4.8 ex2: 2^x in one MUFU instruction (.approx, flush-to-zero: 2^-inf = 0
// and subnormal results become 0, which a probability that small does not miss). Not
// volatile: the compiler may schedule and merge it like arithmetic.
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// PTX ISA 9.7.9.14 shfl.sync: the value of lane (this lane ^ mask), all 32 lanes taking part.
__device__ __forceinline__ float shfl_bfly_f32(float v, int mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(mask));
  return r;
}

// The butterfly reduction over each group of kLanes consecutive lanes (lane_reduce in
// Kernel IR): log2(kLanes) shuffles, after which every lane of the group holds the result.
template <int kLanes>
__device__ __forceinline__ float lane_reduce_add(float v) {
#pragma unroll
  for (int m = kLanes / 2; m > 0; m /= 2) v += shfl_bfly_f32(v, m);
  return v;
}
template <int kLanes>
__device__ __forceinline__ float lane_reduce_max(float v) {
#pragma unroll
  for (int m = kLanes / 2; m > 0; m /= 2) v = fmaxf(v, shfl_bfly_f32(v, m));
  return v;
}
template <int kLanes>
__device__ __forceinline__ float lane_reduce_min(float v) {
#pragma unroll
  for (int m = kLanes / 2; m > 0; m /= 2) v = fminf(v, shfl_bfly_f32(v, m));
  return v;
}

}  // namespace loom
