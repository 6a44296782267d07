// t:046_swizzle_smem — XOR-swizzle every shared tile with a TMA pattern (SWIZZLE).
//
// Padding breaks the power-of-two row stride by wasting space; a swizzle permutes the
// 16-byte chunks of each row instead, so the same chunk column of 8 consecutive rows
// lands on 8 different groups of 4 banks at no capacity cost — what 16-byte accesses
// down a column (ldmatrix, float4 loads of a transposed operand) need.
//
// The pattern is the one TMA writes (CU_TENSOR_MAP_SWIZZLE_{32,64,128}B), so a slab
// filled by TMA and one filled by threads read back the same way. On byte addresses it
// XORs the 16-byte chunk index (bits 4..) with the index of the 128-byte line (bits 7..),
// CuTe's Swizzle<B, 4, 3>:
//     128B: B = 3  chunk (0..7 of a 128 B span) ^= line % 8   repeats every 1024 B
//      64B: B = 2  chunk (0..3 of a  64 B span) ^= line % 4   repeats every  512 B
//      32B: B = 1  chunk (0..1 of a  32 B span) ^= line % 2   repeats every  256 B
// Loom's Swizzle acts on element offsets, so the byte bit positions drop by
// log2(element bytes): base = 4 - log2(bytes) (f32: 2, f16/bf16: 3), bits = B, and
// shift = 3 (the distance from chunk bits to line bits does not depend on the unit).
// For f32 and 128B: Swizzle<3, 2, 3> — elements 4c..4c+3 of 128-byte line l move to
// chunk c ^ (l % 8). With rows of exactly the span this is "row index mod 8" (mod 4, 2
// of line pairs / quads for 64B, 32B); rows longer than the span see the line index
// instead, so a column of 256-byte rows gets 4 distinct XOR values, not 8.
//
// SWIZZLE=xor derives Swizzle<B, M, S> from each tile's own row instead (CuTe's rule for
// ldmatrix-friendly layouts): M = the 16-byte chunk (4 - log2(element bytes) element
// bits), B = log2 of the chunks per 128 bytes a row covers (3 for rows of 128 B or more,
// 2 for 64 B, 1 for 32 B), and the XOR's source is the row index when rows are 128 B or
// longer (S = log2(row bytes / 16)), the 128-byte line index otherwise (S = 3). A column
// of 8 consecutive rows then lands on 8 different bank groups for any power-of-two row:
// for 128-byte rows it is the TMA 128B pattern; for the 256-byte rows of a 128-wide f16
// B slab the TMA pattern repeats every 4 rows (2-way conflicts on every ldmatrix, 0.46x
// vs 0.48x cuBLAS at 4096^3 on H100, bench/NOTES.md) and the row XOR does not.
//
// Steps:
//  1. Read SWIZZLE (none: nothing changes); PAD_SMEM > 0 as well is an error (the pad
//     would shift rows off the span the XOR pattern assumes: choose one).
//  2. For every shared tensor of rank >= 2, require rows (last dimension) that are a
//     whole number of spans — the XOR stays inside one span, so the footprint then holds
//     every permuted offset — and, for STAGE=tma, rows of exactly one span (a TMA box's
//     inner dimension may not exceed its swizzle span). When PAD_KOUTER is given, the
//     slabs with the reduction dimension outer take that pad instead (t:045) and are
//     skipped: a swizzle of 16-byte chunks cannot spread 4-byte reads down their columns.
//     With ATOM=wgmma_* a wider row is stored as span-wide chunks instead
//     (TensorDecl::row_chunk), one TMA box per chunk: wgmma reads such MN-major slabs
//     through descriptors whose leading byte offset steps from chunk to chunk; a
//     narrower row of 32 or 64 bytes (a 16- or 32-wide 16-bit B tile) takes the pattern
//     of its own width (operand_span). The same holds for wgmma slabs the threads fill
//     (STAGE=cp_async or sync): the descriptors read one layout, whoever writes it.
//  3. Set its swizzle. Chunks of 16 bytes move whole, so vector accesses of up to 16
//     bytes stay contiguous (k:015 and k:040 check TensorDecl::swizzle.base anyway).
#include <algorithm>

#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

int log2_exact(int64_t v) {
  int l = 0;
  while ((int64_t(1) << l) < v) ++l;
  LOOM_CHECK((int64_t(1) << l) == v, "not a power of two: " + std::to_string(v));
  return l;
}

// `chunk_rows`: rows wider than the span may be stored as span-wide chunks (row_chunk),
// one TMA box each — what wgmma's MN-major operands read; thread loads never see them.
void swizzle_tensor(TensorDecl& t, const std::string& mode, int64_t span, bool tma,
                    bool chunk_rows) {
  const int64_t eb = dtype_bytes(t.dtype);
  const Expr& last = t.shape.back();
  if (!last.is_const())
    throw Error("SWIZZLE=" + mode + ": shared tensor " + t.name + " has a symbolic row (" +
                last.str() + "); swizzled tiles need constant shapes");
  int64_t row = last.const_value() * eb;
  if (row % span != 0)
    throw Error("SWIZZLE=" + mode + " needs shared rows that are a multiple of " +
                std::to_string(span) + " bytes; " + t.name + " has rows of " +
                std::to_string(row) + " B (" + std::to_string(last.const_value()) + " " +
                dtype_name(t.dtype) +
                "): use a smaller SWIZZLE, SWIZZLE=none, or a tile whose row spans it (BK/BN)");
  if (tma && row != span && chunk_rows) {
    t.row_chunk = span / eb;
  } else if (tma && row != span)
    throw Error("SWIZZLE=" + mode + " with STAGE=tma: " + t.name + " has rows of " +
                std::to_string(row) + " B, and a TMA box's inner dimension may not exceed its " +
                std::to_string(span) + "-byte swizzle span: use SWIZZLE=" +
                (row >= 128 ? std::string("128B") : std::to_string(row) + "B") +
                " or a narrower tile");
  t.swizzle.bits = log2_exact(span / 16);
  t.swizzle.base = 4 - log2_exact(eb);
  t.swizzle.shift = 3;
}

// A wgmma operand slab narrower than the SWIZZLE span takes the TMA pattern of its own
// row instead (SWIZZLE is the widest span, per operand): a 32-wide bf16 B slab has 64-byte
// rows, whose 64B pattern the TMA box and the wgmma descriptor both support, while the A
// slab beside it keeps 128B. Rows under 32 bytes have no swizzle pattern at all.
int64_t operand_span(const TensorDecl& t, const std::string& mode, int64_t span) {
  const Expr& last = t.shape.back();
  if (!last.is_const()) return span;
  const int64_t row = last.const_value() * dtype_bytes(t.dtype);
  if (row >= span) return span;
  if (row != 32 && row != 64)
    throw Error("SWIZZLE=" + mode + " with ATOM=wgmma_*: " + t.name + " has rows of " +
                std::to_string(row) + " B (" + std::to_string(last.const_value()) + " " +
                dtype_name(t.dtype) + "), and the swizzle patterns wgmma descriptors (and TMA) "
                "read span 32, 64 or 128 bytes: widen the tile along that row (BN or BK: 16 bf16 columns make 32 B) or "
                "use SWIZZLE=none");
  return row;
}

// SWIZZLE=xor: the pattern derived from the row length (see the header).
void swizzle_tensor_by_row(TensorDecl& t, bool tma) {
  const int64_t eb = dtype_bytes(t.dtype);
  const Expr& last = t.shape.back();
  if (!last.is_const())
    throw Error("SWIZZLE=xor: shared tensor " + t.name + " has a symbolic row (" + last.str() +
                "); swizzled tiles need constant shapes");
  const int64_t row = last.const_value() * eb;
  if (row < 32 || (row & (row - 1)) != 0)
    throw Error("SWIZZLE=xor needs shared rows of a power of two of at least 32 bytes; " +
                t.name + " has rows of " + std::to_string(row) + " B (" +
                std::to_string(last.const_value()) + " " + dtype_name(t.dtype) +
                "): use PAD_SMEM, or a tile whose rows are 32, 64, 128, 256... bytes (BK/BN)");
  if (tma && row > 128)
    throw Error("SWIZZLE=xor with STAGE=tma: " + t.name + " has rows of " + std::to_string(row) +
                " B, but TMA swizzles only within boxes of at most 128-byte rows: use a narrower "
                "tile (BK/BN) or STAGE=cp_async");
  t.swizzle.base = 4 - log2_exact(eb);
  t.swizzle.bits = log2_exact(std::min<int64_t>(row, 128) / 16);
  t.swizzle.shift = row >= 128 ? log2_exact(row / 16) : 3;
}

}  // namespace

Pass pass_swizzle_smem() {
  return Pass{"t:046_swizzle_smem", Level::Tile, Level::Tile,
              "shared tiles of rank >= 2 carry the XOR swizzle SWIZZLE selects (a TMA pattern, "
              "or xor: derived from the row), except slabs PAD_KOUTER pads",
              {"SWIZZLE", "PAD_KOUTER"},
              [](CompileState& s) {
                std::string mode = s.knobs.get_str("SWIZZLE", "none");
                s.used_knobs["SWIZZLE"] = mode;
                if (mode == "none") return;
                if (int64_t pad = s.knobs.get_int("PAD_SMEM", 0); pad > 0)
                  throw Error("PAD_SMEM=" + std::to_string(pad) + " and SWIZZLE=" + mode +
                              " both remove bank conflicts and do not compose (the pad moves "
                              "rows off the swizzle's span): choose one");
                bool tma = s.knobs.get_str("STAGE", "sync") == "tma";
                const bool wgmma = s.knobs.get_str("ATOM", "fma").rfind("wgmma_", 0) == 0;
                // With PAD_KOUTER, slabs whose reduction dimension is outer take its pad
                // (t:045) and stay unswizzled.
                std::map<std::string, bool> k_inner;
                if (s.knobs.has("PAD_KOUTER")) k_inner = shared_k_innermost(s.tile);
                for (TensorDecl& t : s.tile.tensors) {
                  if (t.role != TensorRole::Shared || t.shape.size() < 2) continue;
                  if (k_inner.count(t.name) && !k_inner.at(t.name)) continue;
                  if (mode == "xor") {
                    swizzle_tensor_by_row(t, tma);
                    continue;
                  }
                  int64_t span = std::stoll(mode.substr(0, mode.size() - 1));
                  // wgmma slabs take the descriptor layout whoever fills them: the
                  // copy engine (STAGE=tma) or the threads (cp_async, sync) write the
                  // same chunks and spans.
                  if (wgmma) span = operand_span(t, mode, span);
                  swizzle_tensor(t, mode, span, tma || wgmma, wgmma);
                }
              }};
}

}  // namespace loom
