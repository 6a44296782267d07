// k:030_unroll_registers — REGISTER loops are fully unrolled.
//
// A register tier only stays in registers when every index into it is a compile-time
// constant; a rolled loop over a register array forces it into local memory (LDL/STL).
// Unrolling also gives ptxas the whole cell grid to schedule.
#include "ir/error.h"
#include "passes/passes.h"

namespace loom {

Pass pass_unroll_registers() {
  return Pass{"k:030_unroll_registers", Level::Kernel, Level::Kernel,
              "every REGISTER loop has a constant extent and is unrolled",
              {},
              [](CompileState& s) {
                for (auto& k : s.kernel.kernels)
                  walk(k.body, [&](Stmt& st) {
                    if (st.kind != StmtKind::For || st.tier != Tier::Register) return;
                    if (!st.extent.is_const())
                      throw Error("k:030_unroll_registers: register loop " + st.var +
                                  " has a symbolic extent");
                    st.unroll = true;
                  });
              }};
}

}  // namespace loom
