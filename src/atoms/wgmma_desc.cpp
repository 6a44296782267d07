#include "atoms/wgmma_desc.h"

#include <string>

#include "ir/error.h"

namespace loom {
namespace {

// The shared-memory matrix of one wgmma is read in 16-byte units (PTX ISA: "elements of
// 128 bits"); a core matrix is 8 of them, one per row.
constexpr int64_t kUnit = 16;
// LBO and SBO are 14-bit fields of 16-byte units.
constexpr int64_t kMaxOffset = ((int64_t(1) << 14) - 1) * kUnit;

std::string operand_name(WgmmaOperand op) { return op == WgmmaOperand::A ? "A" : "B"; }

std::string major_name(WgmmaOperand op, WgmmaMajor m) {
  if (m == WgmmaMajor::K) return "K-major";
  return op == WgmmaOperand::A ? "M-major" : "N-major";
}

int swizzle_mode_of(int span) {
  switch (span) {
    case 0: return 0;
    case 128: return 1;
    case 64: return 2;
    case 32: return 3;
  }
  throw Error("wgmma descriptor: swizzle span " + std::to_string(span) +
              " B; the descriptor's swizzle modes are none, 32B, 64B and 128B");
}

int log2_exact(int64_t v) {
  int l = 0;
  while ((int64_t(1) << l) < v) ++l;
  return (int64_t(1) << l) == v ? l : -1;
}

// Bits [4, 4+B) ^= bits [7, 7+B) of a byte address (Swizzle<B, 4, 3>).
int64_t swizzle_address(int64_t addr, int span) {
  if (span == 0) return addr;
  const int bits = log2_exact(span / kUnit);
  const int64_t mask = ((int64_t(1) << bits) - 1) << 4;
  return addr ^ ((addr >> 3) & mask);
}

}  // namespace

WgmmaDescFields wgmma_desc_fields(WgmmaOperand op, WgmmaMajor major, int span, int bytes,
                                  const WgmmaSlab& slab) {
  const std::string what = "wgmma operand " + operand_name(op) + " (" + major_name(op, major) +
                           ", " + (span ? std::to_string(span) + "B swizzle" : "no swizzle") +
                           ", " + std::to_string(bytes) + "-byte elements, slab " +
                           std::to_string(slab.rows) + " x " + std::to_string(slab.row_elems) +
                           (slab.row_chunk ? ", row_chunk " + std::to_string(slab.row_chunk)
                                           : std::string()) +
                           "): ";
  if (bytes != 2 && bytes != 4)
    throw Error(what + "wgmma reads 16-bit (f16, bf16) or 32-bit (tf32) elements");
  if (major == WgmmaMajor::MN && bytes != 2)
    throw Error(what + "the PTX ISA allows imm-trans (an M- or N-major operand) for 16-bit "
                "types only; store a tf32 operand K-major (K contiguous), or let A come from "
                "registers (WGMMA_A=regs; an N-major B becomes an M-major A with SWAP_AB=1)");
  if (slab.rows <= 0 || slab.row_elems <= 0 || slab.row_chunk < 0)
    throw Error(what + "the slab needs a positive shape");

  WgmmaDescFields f;
  f.major = major;
  f.swizzle_bytes = span;
  f.elem_bytes = bytes;
  f.swizzle_mode = swizzle_mode_of(span);
  f.transposed = major == WgmmaMajor::MN;
  const int64_t row_bytes = slab.row_elems * bytes;
  const int64_t chunk_bytes = (slab.row_chunk ? slab.row_chunk : slab.row_elems) * bytes;
  if (slab.rows % 8 != 0)
    throw Error(what + "wgmma reads rows in groups of 8 (core matrices); the slab has " +
                std::to_string(slab.rows) + " rows");

  if (span > 0) {
    // Swizzled: every row (K-major) or chunk row (MN-major) is exactly one span, so the
    // XOR on the address bits stays inside it and 8 rows make one swizzle atom.
    if (chunk_bytes != span)
      throw Error(what + (major == WgmmaMajor::K
                              ? "a K-major row must be exactly one swizzle span (" +
                                    std::to_string(span) + " B), it is " +
                                    std::to_string(chunk_bytes) + " B (the TMA box of a " +
                                    std::to_string(span) + "B swizzle is that wide)"
                              : "MN-major rows must be stored as column chunks of one swizzle "
                                "span (row_chunk = " + std::to_string(span / bytes) +
                                    " elements), they are " + std::to_string(chunk_bytes) +
                                    " B"));
    if (major == WgmmaMajor::K) {
      // Rows wider than the span are stored as span-wide chunks (row_chunk = span, the
      // boxes of a BK deeper than one span): each chunk is a K-major slab of its own,
      // rows one span apart, and a K-step's 32 bytes never leave the chunk its start
      // address lies in — the same fields describe every chunk.
      f.lbo_bytes = kUnit;
      f.sbo_bytes = 8 * span;
    } else {
      if (row_bytes % span != 0)
        throw Error(what + "the row (" + std::to_string(row_bytes) +
                    " B) is not a whole number of chunks");
      f.lbo_bytes = slab.rows * span;
      f.sbo_bytes = 8 * span;
    }
  } else {
    // No swizzle: 8x16-byte core matrices stored whole, i.e. 16-byte column chunks.
    if (chunk_bytes != kUnit || row_bytes % kUnit != 0)
      throw Error(what + "without a swizzle wgmma reads 8x16-byte core matrices: store the "
                  "rows as 16-byte column chunks (row_chunk = " + std::to_string(kUnit / bytes) +
                  "), or use a 32B/64B/128B swizzle");
    if (major == WgmmaMajor::K) {
      if (row_bytes < 2 * kUnit)
        throw Error(what + "one wgmma reads 32 bytes of K per row; the row has " +
                    std::to_string(row_bytes));
      f.lbo_bytes = slab.rows * kUnit;
      f.sbo_bytes = 8 * kUnit;
    } else {
      f.lbo_bytes = 8 * kUnit;
      f.sbo_bytes = slab.rows * kUnit;
    }
  }
  for (int64_t v : {f.lbo_bytes, f.sbo_bytes})
    if (v % kUnit != 0 || v > kMaxOffset)
      throw Error(what + "a descriptor offset of " + std::to_string(v) +
                  " B does not fit the 14-bit field of 16-byte units (at most " +
                  std::to_string(kMaxOffset) + " B): use fewer rows per slab");
  return f;
}

WgmmaDescFields wgmma_desc_for(const TensorDecl& t, WgmmaOperand op, int64_t row_stride,
                               int64_t col_stride) {
  if (t.shape.size() < 2)
    throw Error("wgmma operand " + operand_name(op) + " in shared tensor '" + t.name +
                "': a tile needs a 2-D slab (the last two dimensions)");
  const int64_t L = t.shape.back().const_value(), R = t.shape[t.shape.size() - 2].const_value();
  const int bytes = dtype_bytes(t.dtype);
  if (t.pad != 0)
    throw Error("wgmma operand " + operand_name(op) + " in shared tensor '" + t.name +
                "' has padded rows (pad " + std::to_string(t.pad) +
                "); wgmma's canonical layouts have none: swizzle instead");
  // (r, c) = (m, k) for A and (k, n) for B: K-major means k has stride 1.
  const int64_t k_stride = op == WgmmaOperand::A ? col_stride : row_stride;
  const int64_t mn_stride = op == WgmmaOperand::A ? row_stride : col_stride;
  WgmmaMajor major;
  if (k_stride == 1 && mn_stride == L)
    major = WgmmaMajor::K;
  else if (mn_stride == 1 && k_stride == L)
    major = WgmmaMajor::MN;
  else
    throw Error("wgmma operand " + operand_name(op) + " in shared tensor '" + t.name +
                "': strides (row " + std::to_string(row_stride) + ", col " +
                std::to_string(col_stride) + ") are neither K-major nor MN-major over rows of " +
                std::to_string(L) + " elements");
  int span = 0;
  if (t.swizzle.bits != 0) {
    const int base = 4 - log2_exact(bytes);
    if (t.swizzle.base != base || t.swizzle.shift != 3)
      throw Error("wgmma operand " + operand_name(op) + " in shared tensor '" + t.name +
                  "': its swizzle is not a TMA pattern (Swizzle<B, " + std::to_string(base) +
                  ", 3> for " + std::to_string(bytes) + "-byte elements), which is all wgmma "
                  "descriptors can describe");
    span = int(kUnit) << t.swizzle.bits;
  }
  return wgmma_desc_fields(op, major, span, bytes, WgmmaSlab{R, L, t.row_chunk});
}

int64_t wgmma_start_byte(const TensorDecl& t, int64_t origin) {
  return t.chunked(origin) * dtype_bytes(t.dtype);
}

int64_t wgmma_canonical_offset(const WgmmaDescFields& f, WgmmaOperand op, int64_t start,
                               int r, int c) {
  const int64_t k = op == WgmmaOperand::A ? c : r;
  const int64_t mn = op == WgmmaOperand::A ? r : c;
  const int64_t per_unit = kUnit / f.elem_bytes;  // elements per 16-byte unit
  int64_t lin;
  if (f.major == WgmmaMajor::K) {
    // Rows (M or N) of the core matrices / swizzle atom, groups of 8 rows SBO apart.
    const int64_t row_pitch = f.swizzle_bytes ? f.swizzle_bytes : kUnit;
    const int64_t k_unit = k / per_unit, k_in = k % per_unit;
    lin = (mn % 8) * row_pitch + (mn / 8) * f.sbo_bytes + k_in * f.elem_bytes;
    // Swizzled: the K units of a row are contiguous; no swizzle: LBO apart.
    lin += f.swizzle_bytes ? k_unit * kUnit : k_unit * f.lbo_bytes;
  } else {
    // Rows (K) of the atom are one span (or one 16-byte unit) apart, 8 of them; the
    // M/N index runs contiguously inside a span.
    if (f.swizzle_bytes) {
      const int64_t span_elems = f.swizzle_bytes / f.elem_bytes;
      lin = (mn % span_elems) * f.elem_bytes + (mn / span_elems) * f.lbo_bytes +
            (k % 8) * f.swizzle_bytes + (k / 8) * f.sbo_bytes;
    } else {
      lin = (mn % per_unit) * f.elem_bytes + (mn / per_unit) * f.sbo_bytes + (k % 8) * kUnit +
            (k / 8) * f.lbo_bytes;
    }
  }
  return swizzle_address(start + lin, f.swizzle_bytes);
}

uint64_t wgmma_desc_encode(uint32_t start, const WgmmaDescFields& f) {
  auto field = [](int64_t bytes) { return uint64_t((bytes & 0x3FFFF) >> 4); };
  return field(start) | field(f.lbo_bytes) << 16 | field(f.sbo_bytes) << 32 |
         uint64_t(f.swizzle_mode) << 62;
}

}  // namespace loom
