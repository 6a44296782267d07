// k:020_select_atoms — replace multiply-then-accumulate by the table's FMA atom.
//
// `v = multiply(a, b)` followed in the same block by `acc <- add(acc, v)`, with `v` used
// nowhere else, is one `fma.rn.f32` (one rounding instead of two — what every GEMM
// library computes). Steps: find the pair, emit Atom(fma_f32, acc; a, b), drop both.
#include "atoms/atoms.h"
#include "passes/passes.h"

namespace loom {
namespace {

int uses(const Block& b, const std::string& value) {
  int n = 0;
  walk(b, [&](const Stmt& s) {
    for (const auto& a : s.args)
      if (a.name == value) ++n;
  });
  return n;
}

void select(Block& b, const AtomDef& fma) {
  for (auto& s : b)
    if (s.kind == StmtKind::For || s.kind == StmtKind::If) select(s.body, fma);
  for (size_t i = 0; i < b.size(); ++i) {
    const Stmt& mul = b[i];
    if (mul.kind != StmtKind::Compute || mul.op != ScalarOp::Mul) continue;
    if (mul.args[0].is_imm() || mul.args[1].is_imm() || uses(b, mul.dst) != 1) continue;
    for (size_t j = i + 1; j < b.size(); ++j) {
      Stmt& acc = b[j];
      if (acc.kind != StmtKind::Accum || acc.op != ScalarOp::Add || acc.args[0].name != mul.dst)
        continue;
      std::vector<Expr> idx = acc.dst_index;
      acc = Stmt::Atom(fma.id, acc.dst, {mul.args[0], mul.args[1]});
      acc.dst_index = idx;
      b.erase(b.begin() + long(i));
      --i;
      break;
    }
  }
}

}  // namespace

Pass pass_select_atoms() {
  return Pass{"k:020_select_atoms", Level::Kernel, Level::Kernel,
              "multiply+accumulate pairs are FMA atoms from the atom table",
              {},
              [](CompileState& s) {
                const AtomDef& fma = atom("fma_f32");
                for (auto& k : s.kernel.kernels) select(k.body, fma);
              }};
}

}  // namespace loom
