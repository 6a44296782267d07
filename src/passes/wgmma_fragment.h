// The A operand of a register-A wgmma (WGMMA_A=regs, k:026) filled from a shared slab:
// the warpgroup's "A" fragment of the atom table, per thread, out of the tile t:040
// staged. Warp w = t / 32 of the warpgroup holds rows 16w..16w+15 in the mma.sync A
// fragment of the same type (m16n8k16 for f16/bf16, m16n8k8 for tf32), so each warp's
// share is an ldmatrix of the kind k:025 issues:
//   - 16-bit A: ldmatrix .x4 on a K-major slab (K contiguous), .x4.trans on an M-major one;
//   - tf32 A, K-major: the b32 view (ldmatrix_x4_b32: 16-byte rows of 4 words);
//   - otherwise (tf32 M-major: no .trans for 32-bit words; a swizzle that permutes inside
//     16 bytes; rows not 16-byte aligned): one element load per fragment value (32-bit
//     ld.shared for tf32), the swizzle applied by the shared tensor's layout like any load.
// The lane's row start comes from the table alone (ldmatrix_row_starts on warp 0's
// 16 rows, lane_bits_expr), moved down 16 rows per warp: no per-kernel index math.
#pragma once
#include <set>
#include <string>

#include "atoms/atoms.h"
#include "ir/stmt.h"

namespace loom {

struct FragmentFill {
  Block stmts;           // the loads (one warp copy, or one Load per value)
  std::string copy_id;   // the ldmatrix entry used ("": element loads)
};

// `load` is the A nest's one load `frag[.., row, col] = load slab[index]` (row, col: the
// nest's m and k cell variables); `thread` the thread's index in its warpgroup. The fill
// writes frag[.., v] for each of the atom's A values v. Throws loom::Error for a load
// whose index does not step by a constant along the tile (no affine slab).
FragmentFill wgmma_a_fragment_fill(const AtomDef& wgmma, const ProgramBase& p, const Stmt& load,
                                   const std::string& row, const std::string& col,
                                   const Expr& thread);

}  // namespace loom
