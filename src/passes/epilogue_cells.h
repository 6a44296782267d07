// Where a GEMM kernel's epilogue puts each value: for every global store after the
// mainloop, the block's base offset and the value's (row, col) in the block's output
// tile, recovered from the store's flat offset (k:010 flattened [.., row, col] with the
// output's strides). k:054_stage_epilogue stages the tile through shared memory with it;
// any epilogue that moves the tile as a whole (a TMA store) needs the same.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/program.h"

namespace loom {

// Why an epilogue cannot be mapped onto its tile, and what the user can do instead.
struct EpilogueRefusal {
  std::string why;
  std::string fix = "use EPILOGUE=direct";
};

// One global store of the epilogue, where it sits, and where its value goes:
// offset = base + row * N + col (N the output's row stride), row and col in terms of
// threadIdx and the epilogue's loops, base in terms of blockIdx and the sizes. row0 /
// col0: the block's part of a guarded row / column index (the store sits under
// `row0 + row < M` / `col0 + col < N`), absent where that index is unguarded.
struct EpilogueStore {
  Stmt* store = nullptr;
  std::vector<std::pair<std::string, int64_t>> loops;  // enclosing epilogue loops
  std::vector<Expr> conds;                             // conjuncts of enclosing Ifs
  Block lets;                                          // enclosing epilogue Lets
  Expr base, row, col;
  std::optional<Expr> row0, col0;
};

struct EpilogueCells {
  size_t mainloop_end = 0;  // one past the last top-level statement holding a reduction
  size_t start = 0;         // the epilogue's first statement (after the drain's waits)
  const TensorDecl* out = nullptr;
  Block top_lets;           // the top-level Lets before the epilogue
  std::vector<EpilogueStore> stores;
  // The block tile: the stores cover [0, rows) x [0, cols) exactly once, over every
  // thread and loop iteration, before their guards.
  int64_t rows = 0, cols = 0;
};

// Throws EpilogueRefusal when the epilogue is not a set of plain (non-atomic) stores of
// one global tensor that tile a block of it exactly once. The stores point into `k`.
EpilogueCells epilogue_cells(const KernelProgram& p, KernelOp& k);

}  // namespace loom
