// Structural equality of programs (see same.h). Each function binds every member of
// the first argument by a structured binding, in declaration order, and compares it
// with the second's member of the same name: a struct that gains a member no longer
// destructures into the listed names, which is a compile error here.
#include "ir/same.h"

#include <cstddef>

namespace loom {
namespace {

bool same(const Expr& a, const Expr& b) { return a.same_as(b); }
bool same(const Stmt& a, const Stmt& b);
bool same(const Operand& a, const Operand& b);
bool same(const StageCopy& a, const StageCopy& b);
bool same(const TensorDecl& a, const TensorDecl& b);
bool same(const LoopOp& a, const LoopOp& b);
bool same(const TileOp& a, const TileOp& b);
bool same(const TmaDescriptor& a, const TmaDescriptor& b);
bool same(const WarpAtom& a, const WarpAtom& b);
bool same(const WarpCopy& a, const WarpCopy& b);
bool same(const KernelOp& a, const KernelOp& b);

template <typename T>
bool same(const T& a, const T& b) {
  return a == b;  // enums, numbers, strings, vectors of those
}

template <typename T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same(a[i], b[i])) return false;
  return true;
}

bool same(const Stmt& a, const Stmt& b) {
  const auto& [kind, var, extent, loop_kind, tier, axis, unroll, no_unroll, unroll_by, cond,
               value, dst,
               tensor, index, op, args, imm, atom, dst_index, width, pred, atomic_add, scale_d,
               multicast, remote, mbar, src, src_index, copies, mode, body] = a;
  return same(kind, b.kind) && same(var, b.var) && same(extent, b.extent) &&
         same(loop_kind, b.loop_kind) && same(tier, b.tier) && same(axis, b.axis) &&
         same(unroll, b.unroll) && same(no_unroll, b.no_unroll) &&
         same(unroll_by, b.unroll_by) && same(cond, b.cond) &&
         same(value, b.value) &&
         same(dst, b.dst) && same(tensor, b.tensor) && same(index, b.index) &&
         same(op, b.op) && same(args, b.args) && same(imm, b.imm) && same(atom, b.atom) &&
         same(dst_index, b.dst_index) && same(width, b.width) && same(pred, b.pred) &&
         same(atomic_add, b.atomic_add) && same(scale_d, b.scale_d) &&
         same(multicast, b.multicast) && same(remote, b.remote) && same(mbar, b.mbar) &&
         same(src, b.src) && same(src_index, b.src_index) && same(copies, b.copies) &&
         same(mode, b.mode) && same(body, b.body);
}

bool same(const Operand& a, const Operand& b) {
  const auto& [name, imm, index] = a;
  return same(name, b.name) && same(imm, b.imm) && same(index, b.index);
}

bool same(const StageCopy& a, const StageCopy& b) {
  const auto& [shared, shared_prefix, vars, extents, src, src_index] = a;
  return same(shared, b.shared) && same(shared_prefix, b.shared_prefix) &&
         same(vars, b.vars) && same(extents, b.extents) && same(src, b.src) &&
         same(src_index, b.src_index);
}

bool same(const TensorDecl& a, const TensorDecl& b) {
  const auto& [name, dtype, shape, role, pad, swizzle, overlay, row_chunk, zero_init, pitch] = a;
  return same(name, b.name) && same(dtype, b.dtype) && same(shape, b.shape) &&
         same(role, b.role) && same(pad, b.pad) && same(swizzle, b.swizzle) &&
         same(overlay, b.overlay) && same(row_chunk, b.row_chunk) &&
         same(zero_init, b.zero_init) && same(pitch, b.pitch);
}

template <typename Op>
bool same_op(const Op& a, const Op& b) {  // LoopOp, TileOp
  const auto& [name, inputs, output, body] = a;
  return same(name, b.name) && same(inputs, b.inputs) && same(output, b.output) &&
         same(body, b.body);
}

bool same(const LoopOp& a, const LoopOp& b) { return same_op(a, b); }
bool same(const TileOp& a, const TileOp& b) { return same_op(a, b); }

bool same(const TmaDescriptor& a, const TmaDescriptor& b) {
  const auto& [name, tensor, shared, box, swizzle_bytes] = a;
  return same(name, b.name) && same(tensor, b.tensor) && same(shared, b.shared) &&
         same(box, b.box) && same(swizzle_bytes, b.swizzle_bytes);
}

bool same(const WarpAtom& a, const WarpAtom& b) {
  const auto& [id, threads, a_shared, b_shared, m, n, k, a_type, b_type, acc_type, a_map,
               b_map, c_map, a_values, b_values, c_values, a_truncated] = a;
  return same(id, b.id) && same(threads, b.threads) && same(a_shared, b.a_shared) &&
         same(b_shared, b.b_shared) && same(m, b.m) && same(n, b.n) && same(k, b.k) &&
         same(a_type, b.a_type) && same(b_type, b.b_type) && same(acc_type, b.acc_type) &&
         same(a_map, b.a) && same(b_map, b.b) && same(c_map, b.c) &&
         same(a_values, b.a_values) && same(b_values, b.b_values) &&
         same(c_values, b.c_values) && same(a_truncated, b.a_truncated);
}

bool same(const WarpCopy& a, const WarpCopy& b) {
  const auto& [id, rows, cols, element_bytes, row_lane, dst, values, to_shared] = a;
  return same(id, b.id) && same(rows, b.rows) && same(cols, b.cols) &&
         same(element_bytes, b.element_bytes) && same(row_lane, b.row_lane) &&
         same(dst, b.dst) && same(values, b.values) && same(to_shared, b.to_shared);
}

bool same(const KernelOp& a, const KernelOp& b) {
  const auto& [name, params, grid, block_threads, cluster, min_blocks_per_sm, wait_prior_grid,
               trigger_dependents, tma, mbarriers, warp_atoms, warp_copies, body] = a;
  for (int d = 0; d < 3; ++d)
    if (!same(grid[d], b.grid[d]) || cluster[d] != b.cluster[d]) return false;
  return same(name, b.name) && same(params, b.params) && same(block_threads, b.block_threads) &&
         same(min_blocks_per_sm, b.min_blocks_per_sm) &&
         same(wait_prior_grid, b.wait_prior_grid) &&
         same(trigger_dependents, b.trigger_dependents) && same(tma, b.tma) &&
         same(mbarriers, b.mbarriers) && same(warp_atoms, b.warp_atoms) &&
         same(warp_copies, b.warp_copies) && same(body, b.body);
}

bool same_base(const ProgramBase& a, const ProgramBase& b) {
  const auto& [tensors, symbols, symbol_names] = a;
  return same(tensors, b.tensors) && same(symbols, b.symbols) && symbol_names == b.symbol_names;
}

}  // namespace

bool same_block(const Block& a, const Block& b) { return same(a, b); }

// The derived programs add one member each (ops or kernels) to ProgramBase's.
bool same_program(const LoopProgram& a, const LoopProgram& b) {
  static_assert(sizeof(LoopProgram) == sizeof(ProgramBase) + sizeof(std::vector<LoopOp>),
                "LoopProgram has a member same_program does not compare");
  return same_base(a, b) && same(a.ops, b.ops);
}

bool same_program(const TileProgram& a, const TileProgram& b) {
  static_assert(sizeof(TileProgram) == sizeof(ProgramBase) + sizeof(std::vector<TileOp>),
                "TileProgram has a member same_program does not compare");
  return same_base(a, b) && same(a.ops, b.ops);
}

bool same_program(const KernelProgram& a, const KernelProgram& b) {
  static_assert(sizeof(KernelProgram) == sizeof(ProgramBase) + sizeof(std::vector<KernelOp>),
                "KernelProgram has a member same_program does not compare");
  return same_base(a, b) && same(a.kernels, b.kernels);
}

}  // namespace loom
