// t:045_pad_smem — append PAD_SMEM elements to every row of each shared tile (PAD_SMEM).
//
// A shared tile whose row is a multiple of 128 bytes puts a whole column in one bank, so
// a warp walking down a column (the transposed A-slab stores of STAGE=sync, a thread per
// row) serializes on it. Padding each row by p elements moves row r's start p*r words
// further along the banks. Steps:
//  1. Read PAD_SMEM (0 = off: nothing changes).
//  2. Set `pad` on every shared tensor of rank >= 2; rank-1 buffers have no rows.
// It runs on Tile IR, before k:010 flattens accesses with TensorDecl::strides(), which
// includes the pad, so every offset and k:015's copies see the padded layout. Vector
// accesses are not this pass's concern: k:015 and k:040 choose widths afterwards and
// prove alignment from the padded strides, so an odd pad turns a 16-byte access into
// scalar ones (the article's trade: a conflict-free scalar beats a serialized vector).
#include "ir/error.h"
#include "passes/passes.h"

namespace loom {

Pass pass_pad_smem() {
  return Pass{"t:045_pad_smem", Level::Tile, Level::Tile,
              "shared tiles of rank >= 2 carry PAD_SMEM elements of padding per row",
              {"PAD_SMEM"},
              [](CompileState& s) {
                int64_t pad = s.knob("PAD_SMEM", 0);
                if (pad == 0) return;
                // TMA writes the box densely; it has no row padding, only its swizzles.
                if (s.knobs.get_str("STAGE", "sync") == "tma")
                  throw Error("PAD_SMEM=" + std::to_string(pad) +
                              " with STAGE=tma: TMA writes dense boxes and cannot pad rows; "
                              "use SWIZZLE=128B (or another STAGE) instead");
                for (TensorDecl& t : s.tile.tensors)
                  if (t.role == TensorRole::Shared && t.shape.size() >= 2) t.pad = pad;
              }};
}

}  // namespace loom
