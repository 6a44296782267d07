// The ATOM-tier loop nests that t:030 leaves for an atom's cells, as k:025 (mma.sync) and
// k:026 (wgmma) both take them apart: which loop runs which of the atom's m, n, k cells,
// and the per-value copies of an accumulator nest.
#pragma once
#include <map>
#include <string>

#include "ir/stmt.h"

namespace loom {

struct AtomCells {
  std::string m, n, k;  // the nest's ATOM variables by axis ("" = absent)
  std::map<std::string, int64_t> extent;
  const Block* body = nullptr;  // the innermost ATOM loop's body
};

// The cells of the ATOM nest rooted at `top`, checked against the atom's m x n x k
// (`atom_id` for messages). Throws loom::Error, prefixed by `pass`, for a loop that is not
// one of the cells or runs another extent.
AtomCells atom_cells(const Stmt& top, const std::string& pass, const std::string& atom_id,
                     int m, int n, int k);

// Scalars a per-value copy of a nest defines (epilogue values) take `suffix`, with their
// uses, so that the copies stay single-assignment.
void suffix_defined_scalars(Block& b, const std::string& suffix);

}  // namespace loom
