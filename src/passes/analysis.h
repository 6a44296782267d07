// Small analyses over index expressions shared by several passes.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/program.h"

namespace loom {

// The terms of a sum (a + b + c -> [a, b, c]) and the conjuncts of a condition
// (a && b -> [a, b]), flattened through nested nodes of that kind.
std::vector<Expr> sum_terms(const Expr& e);
std::vector<Expr> conjuncts(const Expr& e);

// `e` with every product of a sum and a constant distributed ((a + b) * c -> a*c + b*c),
// so that sum_terms sees each loop variable in a term of its own: t:040 splits indices
// into block and local parts after substituting a sum for a loop variable.
Expr distribute_constants(const Expr& e);

// b - a when it is a constant that the two sums show term by term (after
// distribute_constants, equal terms cancel and constants add up); nullopt otherwise —
// including differences that are constant for reasons the terms do not show.
std::optional<int64_t> constant_difference(const Expr& a, const Expr& b);

// True when `e` is a multiple of `w` for every value of its variables: constants
// divisible by w, products with such a constant factor, sums of such terms.
bool provably_divisible(const Expr& e, int64_t w);

// Whether `a` and `b` take equal values at 16 random points (every variable from 1 to
// 1000, seeded by `seed`; a point where either fails to evaluate, e.g. a divisor drawn
// zero, is drawn again, up to 64 draws). How a pass checks that an offset it split into
// parts still equals the original before it relies on the split.
bool agree_at_random_points(const Expr& a, const Expr& b, uint64_t seed);

// A swizzled offset split so that swizzle(offset) == swizzle(inner) + outer for every
// value of the variables: `outer` collects the terms that are multiples of the swizzle's
// period 2^(base + shift + bits) — adding one changes no bit the XOR reads or writes.
// Codegen emits swz(inner) + outer, so the XOR sees only the lane's own part (hoisted out
// of the mainloop by the compiler) while stage, warp and atom offsets stay additive
// (immediates of the shared-memory instruction): swizzling the whole offset cost ~9 ALU
// instructions per ldmatrix (bench/NOTES.md).
struct SwizzleSplit { Expr inner, outer; };
SwizzleSplit split_for_swizzle(const Expr& offset, const Swizzle& s);

// Ranges of the variables in scope at a point of a Kernel IR body: blockIdx/threadIdx
// from the launch geometry, loop variables from extents, lets from their values.
using Ranges = std::map<std::string, Expr::Range>;
Ranges kernel_builtin_ranges(const KernelOp& k);
void enter_range(Ranges& r, const Stmt& s);  // For (var) or Let: adds the variable's range

// `e < bound` holds for every value in `r`.
bool provably_less(const Expr& e, const Expr& bound, const Ranges& r);

// The shared tensors of rank >= 2 that the ops of `p` load, each with whether its
// innermost (contiguous) dimension runs along the reduction: true when some load's last
// index uses a variable of a loop whose axis is "k" ([BM][BK] and [BN][BK] slabs), false
// for the M- or N-contiguous [BK][BM] and [BK][BN] ones. t:045 and t:046 pick padding
// and swizzle by it.
std::map<std::string, bool> shared_k_innermost(const TileProgram& p);

// A kernel whose mainloop issues wgmma (warpgroup atoms) inside a producer/consumer split
// (k:030's Specialize): its consumers cannot meet at a block barrier, so EPILOGUE=smem
// stages its tile in k:053's per-owner strips, not k:054's block-wide tile.
bool warp_specialized_wgmma(const KernelOp& k);

// Every name a Kernel IR body binds (loop and Let variables, register values and arrays).
std::set<std::string> bound_names(const Block& b);
// Renames the names `body` binds that `taken` holds to name + `suffix` (+ a number where
// that is taken too): a body moved into another kernel (k:057, k:058) keeps its own values.
void rename_clashes(Block& body, const std::set<std::string>& taken, const std::string& suffix);

}  // namespace loom
