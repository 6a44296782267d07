#include "passes/pipeline.h"

#include "ir/error.h"
#include "passes/passes.h"

namespace loom {

// The whole compiler, in order. Each line says why the pass sits where it does.
const std::vector<Pass>& pipeline() {
  static const std::vector<Pass> passes = {
      // Graph -> Loop IR: every op as loops over its output, nothing decided yet.
      pass_lower_graph(),
      // Fuse before tiling, so bias/activation/scaling ride in the GEMM's epilogue
      // and the intermediate never reaches memory.
      pass_fuse_epilogue(),
      // Loop -> Tile IR: choose the grid/thread/register factorization (BM BN FM FN);
      // guards make every shape correct from here on.
      pass_partition_loops(),
      // Right after partitioning, while loop ranges are still explicit: drop the
      // guards the ranges prove.
      pass_simplify_guards(),
      // Tile -> Kernel IR: tiers become blockIdx/threadIdx; accesses become offsets.
      pass_bind_hardware(),
      // Atoms are chosen on kernel IR, where each statement is one thread's work.
      pass_select_atoms(),
      // Last: unrolling is a codegen hint and must see the final register loops.
      pass_unroll_registers(),
  };
  return passes;
}

const Pass* find_pass(const std::string& id) {
  for (const auto& p : pipeline())
    if (p.id == id) return &p;
  return nullptr;
}

namespace {
void verify_level(const CompileState& s, Level l) {
  switch (l) {
    case Level::Graph: s.graph.verify(); break;
    case Level::Loop: verify(s.loop); break;
    case Level::Tile: verify(s.tile); break;
    case Level::Kernel: verify(s.kernel); break;
  }
}
}  // namespace

void run_pipeline(CompileState& s, const std::string& last_id, const PassObserver& observer) {
  if (!last_id.empty() && !find_pass(last_id))
    throw Error("unknown pass '" + last_id + "' (loom passes lists them)");
  for (const auto& p : pipeline()) {
    std::string before = observer ? print_level(s, p.from) : "";
    p.run(s);
    try {
      verify_level(s, p.to);
    } catch (const Error& e) {
      throw Error("after pass " + p.id + ": " + e.what());
    }
    if (observer) observer(p, before, print_level(s, p.to));
    if (p.id == last_id) break;
  }
}

}  // namespace loom
