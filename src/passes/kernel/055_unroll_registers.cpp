// k:055_unroll_registers — REGISTER loops, and short constant reductions, are unrolled.
//
// A register tier only stays in registers when every index into it is a compile-time
// constant; a rolled loop over a register array forces it into local memory (LDL/STL).
// The staged inner reduction (k_i over BK) is unrolled too: its shared-memory offsets
// then fold into immediates and ptxas sees the whole slab's FMA stream to schedule.
#include "ir/error.h"
#include "passes/passes.h"

namespace loom {
namespace {

// A loop that waits (barriers, cp.async groups, a TMA ring's mbarriers, wgmma groups) is a
// slab loop, not a register step: unrolled whole it multiplies the code and the live
// registers for nothing the waits let ptxas schedule (a 32-step wgmma ring spilled 380 B
// at 2048^3 when it was).
bool has_barrier(const Block& b) {
  bool found = false;
  walk(b, [&](const Stmt& s) {
    found |= s.kind == StmtKind::Barrier || s.kind == StmtKind::AsyncWait ||
             s.kind == StmtKind::MbarWait || s.kind == StmtKind::WgmmaWait;
  });
  return found;
}

}  // namespace

Pass pass_unroll_registers() {
  return Pass{"k:055_unroll_registers", Level::Kernel, Level::Kernel,
              "every REGISTER loop has a constant extent and is unrolled; so is every "
              "constant reduction of at most UNROLL_K steps without barriers inside",
              {"UNROLL_K"},
              [](CompileState& s) {
                int64_t max_k = s.knob("UNROLL_K", 32);
                for (auto& k : s.kernel.kernels)
                  walk(k.body, [&](Stmt& st) {
                    if (st.kind != StmtKind::For) return;
                    if (st.tier == Tier::Register) {
                      if (!st.extent.is_const())
                        throw Error("k:055_unroll_registers: register loop " + st.var +
                                    " has a symbolic extent");
                      st.unroll = true;
                    } else if (st.loop_kind == LoopKind::Reduce && st.extent.is_const() &&
                               st.extent.const_value() <= max_k && !has_barrier(st.body)) {
                      st.unroll = true;
                    }
                  });
              }};
}

}  // namespace loom
