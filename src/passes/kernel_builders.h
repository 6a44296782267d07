// Small constructors the direct Kernel IR lowerings (k:012, k:013) build statements with:
// named values, register loops, destination indices, flat offsets. They live in their own
// namespace so that `operator||` on Expr is seen only where a file asks for it
// (`using namespace loom::kernel_builders;`).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/program.h"

namespace loom::kernel_builders {

// The value `name` (a scalar, or element `idx` of a register array).
inline Operand val(const std::string& name, std::vector<Expr> idx = {}) {
  return Operand::value(name, std::move(idx));
}

// `for var in 0..extent` over registers: unrolled by codegen, never a runtime loop.
inline Stmt reg_loop(const std::string& var, int64_t extent, Block body,
                     LoopKind kind = LoopKind::Parallel) {
  return Stmt::For(var, Expr(extent), kind, var, std::move(body), Tier::Register);
}

// `s` writing element `idx` of its destination register array.
inline Stmt with_dst(Stmt s, std::vector<Expr> idx) {
  s.dst_index = std::move(idx);
  return s;
}

inline Expr operator||(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Or, a, b); }

// Row-major flat offset of `idx` in `t`.
inline Expr flat(const TensorDecl& t, const std::vector<Expr>& idx) {
  const std::vector<Expr> st = t.strides();
  Expr off(0);
  for (size_t i = 0; i < idx.size(); ++i) off = off + idx[i] * st[i];
  return off;
}

}  // namespace loom::kernel_builders
