// l:015_swap_operands — compute C^T = B^T A^T for small M (SWAP_AB).
//
// wgmma's M is 64 rows per warpgroup; a decode GEMM (M = 16..64 rows of activations
// against a weight of thousands of columns) would leave most of every atom idle and give
// the grid only N / BN tiles. Swapped, the weight's N becomes the atom's M (64 or 128
// rows per CTA, N / BM CTAs) and the small M becomes the atom's N (any multiple of 8):
// the same instructions now read the weight once and waste nothing but the ragged edge.
//
// Steps, for every contraction (`acc = 0; for k reduce {...}; epilogue; write` inside
// its output loops .., m, n):
//  1. Exchange the two innermost output loops' extents: the outer loop `m` now runs over
//     N and the inner `n` over M, so every later pass sees an ordinary GEMM whose rows
//     (axis m: BM, WM, FM, wgmma's M, CLUSTER_M) are the output's columns.
//  2. Rename m <-> n in the cell: A[m, k] is read as A[n, k] (A^T, the swapped GEMM's
//     K-major B operand), B[k, n] as B[k, m] (B^T, its M-major A operand), the epilogue
//     reads its bias at the output column m, and the write becomes out[.., n, m] — C
//     stored through its transpose, so no tensor is copied or transposed in memory.
// Batch loops (b..) stay outermost. Ops without a reduction (an unfused elementwise op,
// split-K's reduce) are left alone: l:020 runs after this pass and splits the swapped
// contraction like any other.
#include "ir/error.h"
#include "passes/passes.h"

namespace loom {
namespace {

// The innermost two loops of the op's perfect parallel nest, when its cell reduces.
struct OutputPair { Stmt* m = nullptr; Stmt* n = nullptr; };

OutputPair output_pair(LoopOp& op) {
  std::vector<Stmt*> loops;
  Block* b = &op.body;
  while (b->size() == 1 && (*b)[0].kind == StmtKind::For &&
         (*b)[0].loop_kind == LoopKind::Parallel) {
    loops.push_back(&(*b)[0]);
    b = &(*b)[0].body;
  }
  bool reduces = false;
  for (const Stmt& s : *b) reduces |= s.kind == StmtKind::For && s.loop_kind == LoopKind::Reduce;
  if (!reduces || loops.size() < 2) return {};
  return {loops[loops.size() - 2], loops.back()};
}

}  // namespace

Pass pass_swap_operands() {
  return Pass{"l:015_swap_operands", Level::Loop, Level::Loop,
              "with SWAP_AB=1 every contraction computes out^T = B^T A^T: its row loop `m` "
              "runs over N, its column loop `n` over M, and it writes out[.., n, m]",
              {"SWAP_AB"},
              [](CompileState& s) {
                // Attention has no contraction to swap: the knob does not apply and is not
                // recorded (the knob list shows what applied); given, it is refused below.
                if (s.graph.attention() && !s.knobs.has("SWAP_AB")) return;
                if (s.knob("SWAP_AB", 0) == 0) return;
                bool any = false;
                for (LoopOp& op : s.loop.ops) {
                  auto [m, n] = output_pair(op);
                  if (!m) continue;
                  any = true;
                  std::swap(m->extent, n->extent);
                  substitute_block(n->body, {{m->var, Expr::var(n->var)},
                                             {n->var, Expr::var(m->var)}});
                }
                if (!any)
                  throw Error("SWAP_AB=1 exchanges a contraction's operands (out^T = B^T A^T), "
                              "and this program has none (matmul, bmm, linear have one); use "
                              "SWAP_AB=0");
              }};
}

}  // namespace loom
