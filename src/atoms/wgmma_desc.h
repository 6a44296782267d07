// wgmma shared-memory matrix descriptors: which descriptor fields describe a shared
// operand tile as Loom stores it, and — independently — which byte the hardware reads for
// each element under those fields. Pure functions; the CPU tests check, for every shared
// layout Loom makes, that the two agree with TensorDecl::physical() element by element,
// which is what lets the interpreter (physical()) stand in for the tensor cores
// (descriptors).
//
// Sources: PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix Layout" (swizzle atoms: 8 rows of
// one span for K-major, span x 8 for MN-major; "strides": LBO / SBO per majorness),
// 9.7.15.5.1.2.x "Matrix Descriptor" (bit layout), and CUTLASS's cute make_gmma_desc
// (mma_sm90_desc.hpp), whose canonical layouts in 16-byte units are
//   K-major,  swizzled W = span/16:  ((8,m),(2)):((W,SBO),(1))        LBO unused
//   K-major,  no swizzle:            ((8,m),(1,2)):((1,SBO),(_,LBO))
//   MN-major, swizzled:              ((W,n),(8,k)):((1,LBO),(W,SBO))
//   MN-major, no swizzle:            ((1,n),(8,k)):((_,SBO),(1,LBO))
// with the XOR swizzle then applied to the address bits: bits [4, 4+B) ^= bits [7, 7+B),
// B = log2(span / 16) — the TMA pattern of the same span, which is why a TMA-filled slab
// whose base sits on the pattern's repeat (1024 B for 128B) needs descriptor base offset 0.
#pragma once
#include <cstdint>

#include "ir/program.h"

namespace loom {

enum class WgmmaOperand { A, B };  // A: M x K, B: K x N
// K: the K index is contiguous in memory (imm-trans 0); MN: the M (A) or N (B) index is
// (imm-trans 1, 16-bit types only).
enum class WgmmaMajor { K, MN };

// The 2-D slab (the last two dimensions of the shared tensor) the operand tile lies in.
// K-major: rows run over M (A) or N (B), a row over K; MN-major: rows run over K.
struct WgmmaSlab {
  int64_t rows = 0;       // rows per slab
  int64_t row_elems = 0;  // elements per row (logical, before chunking)
  int64_t row_chunk = 0;  // TensorDecl::row_chunk (0: whole rows)
};

struct WgmmaDescFields {
  WgmmaMajor major = WgmmaMajor::K;
  int swizzle_bytes = 0;  // span of the XOR pattern: 0 (none), 32, 64, 128
  int elem_bytes = 2;     // 2 (f16, bf16) or 4 (tf32)
  int swizzle_mode = 0;   // descriptor bits 62-63: 0 none, 1 128B, 2 64B, 3 32B
  int64_t lbo_bytes = 0;  // leading dimension byte offset (bits 16-29, >> 4)
  int64_t sbo_bytes = 0;  // stride dimension byte offset (bits 32-45, >> 4)
  bool transposed = false;  // the imm-trans-a / imm-trans-b immediate (MN-major)
  bool operator==(const WgmmaDescFields&) const = default;
};

// The descriptor fields of an operand stored in `slab` with the given majorness, swizzle
// span and element width. Loom's layouts:
//   K-major, span S > 0: rows of exactly S bytes, the TMA pattern of S, or longer rows
//     stored as S-byte column chunks (row_chunk = S: one TMA box per chunk, a K-step
//     reads inside one); SBO = 8 rows = 8*S (the next 8-row swizzle atom), LBO unused
//     (16, the ISA's "assumed 1").
//   K-major, no swizzle: rows stored as 16-byte column chunks (row_chunk = 16 B), i.e.
//     8x16 B core matrices: SBO = 128 (next 8 rows), LBO = rows*16 (next 16 B of K).
//   MN-major, span S > 0: rows (along K) stored as S-byte column chunks (row_chunk = S,
//     or whole rows of exactly S): LBO = rows*S (the next chunk along M/N), SBO = 8*S
//     (the next 8 rows of K).
//   MN-major, no swizzle: row_chunk = 16 B: SBO = rows*16 (next 16 B of M/N), LBO = 128.
// Throws loom::Error naming the rule a geometry breaks (MN-major tf32, a row of two spans,
// a chunk that is not the span, offsets the 14-bit fields cannot hold, ...).
WgmmaDescFields wgmma_desc_fields(WgmmaOperand op, WgmmaMajor major, int swizzle_bytes,
                                  int elem_bytes, const WgmmaSlab& slab);

// The fields for an Atom statement's shared operand (stmt.h): element (r, c) of the tile
// at flat offset origin + r*row_stride + c*col_stride of tensor `t`. The majorness comes
// from the strides (K-major A: (row length, 1); MN-major A: (1, row length); B the other
// way round), the span from t.swizzle (CuTe Swizzle<B, 4 - log2(bytes), 3> is the TMA
// pattern of 16 << B bytes). Throws loom::Error for strides or swizzles wgmma cannot read.
WgmmaDescFields wgmma_desc_for(const TensorDecl& t, WgmmaOperand op, int64_t row_stride,
                               int64_t col_stride);

// The descriptor's start address for the tile at flat offset `origin` of `t`, in bytes from
// the tensor's (swizzle-repeat-aligned) base: the chunked but unswizzled offset — the
// hardware applies the swizzle to start + canonical offset. Equal to physical(origin) *
// bytes whenever origin's XOR source bits are zero, which holds for every origin Loom
// makes (tiles start on 8-row boundaries; a K-step moves along one span row).
int64_t wgmma_start_byte(const TensorDecl& t, int64_t origin);

// The byte address the hardware reads element (r, c) of the operand tile from, given a
// descriptor with fields `f` and start address `start` (bytes from a base aligned to the
// swizzle repeat): the canonical layout above, then the XOR on the address bits.
int64_t wgmma_canonical_offset(const WgmmaDescFields& f, WgmmaOperand op, int64_t start,
                               int r, int c);

// The 64-bit descriptor (PTX ISA "Matrix Descriptor"): start >> 4 in bits 0-13, LBO >> 4
// in 16-29, SBO >> 4 in 32-45, base offset 0 in 49-51, swizzle mode in 62-63. `start` is
// the shared-window address (18 bits). loom::wgmma_desc in the device header encodes the
// same bits on the GPU; this one lets CPU tests check them.
uint64_t wgmma_desc_encode(uint32_t start, const WgmmaDescFields& f);

}  // namespace loom
