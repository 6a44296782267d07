// t:045_pad_smem — append PAD_SMEM elements to every row of each shared tile (PAD_SMEM,
// PAD_KOUTER).
//
// A shared tile whose row is a multiple of 128 bytes puts a whole column in one bank, so
// a warp walking down a column (the transposed A-slab stores of STAGE=sync, a thread per
// row) serializes on it. Padding each row by p elements moves row r's start p*r words
// further along the banks.
// PAD_KOUTER gives the slabs whose reduction dimension is outer ([BK][BM], [BK][BN]: M or
// N contiguous) a pad of their own: which pad spreads a warp's reads depends on the
// layout. tf32 mma fragments are read as 32-bit (row g, col t) = (lane/4, lane%4)
// elements; in a K-contiguous slab of row stride S words they sit in banks (S*g + t) %
// 32, in an N-contiguous one in (S*t + g) % 32 — 32 distinct banks need S = 4 mod 8 for
// the first, S = 8 mod 16 for the second, so no single PAD_SMEM serves both.
// Steps:
//  1. Read PAD_SMEM (0 = none) and, where given, PAD_KOUTER.
//  2. Set `pad` on every shared tensor of rank >= 2 (rank-1 buffers have no rows):
//     PAD_KOUTER on those whose loads index the innermost dimension without the
//     reduction (shared_k_innermost), PAD_SMEM on the rest. t:046 leaves the former
//     unswizzled.
// It runs on Tile IR, before k:010 flattens accesses with TensorDecl::strides(), which
// includes the pad, so every offset and k:015's copies see the padded layout. Vector
// accesses are not this pass's concern: k:015 and k:040 choose widths afterwards and
// prove alignment from the padded strides, so an odd pad turns a 16-byte access into
// scalar ones (the article's trade: a conflict-free scalar beats a serialized vector).
#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {

Pass pass_pad_smem() {
  return Pass{"t:045_pad_smem", Level::Tile, Level::Tile,
              "shared tiles of rank >= 2 carry PAD_SMEM elements of padding per row, or "
              "PAD_KOUTER where their reduction dimension is outer",
              {"PAD_SMEM", "PAD_KOUTER"},
              [](CompileState& s) {
                int64_t pad = s.knob("PAD_SMEM", 0);
                const bool by_layout = s.knobs.has("PAD_KOUTER");
                const int64_t pad_kouter = by_layout ? s.knob("PAD_KOUTER", 0) : pad;
                if (pad == 0 && pad_kouter == 0) return;
                // TMA writes the box densely; it has no row padding, only its swizzles.
                if (s.knobs.get_str("STAGE", "sync") == "tma")
                  throw Error(std::string(pad ? "PAD_SMEM=" + std::to_string(pad)
                                              : "PAD_KOUTER=" + std::to_string(pad_kouter)) +
                              " with STAGE=tma: TMA writes dense boxes and cannot pad rows; "
                              "use SWIZZLE=128B (or another STAGE) instead");
                const std::map<std::string, bool> k_inner = shared_k_innermost(s.tile);
                for (TensorDecl& t : s.tile.tensors)
                  if (t.role == TensorRole::Shared && t.shape.size() >= 2)
                    t.pad = k_inner.count(t.name) && !k_inner.at(t.name) ? pad_kouter : pad;
              }};
}

}  // namespace loom
