// k:058_splitk_fixup — split-K's fixup combine in one kernel (SPLITK_MODE=fixup).
//
// l:020 left two kernels: the split kernel adds each CTA's partial sums atomically into
// the zeroed f32 workspace, and the splitk_fixup kernel, tiled by t:010 exactly like the
// split kernel (one BM x BN tile per block, on at most its threads), reads every sum,
// clears it, and runs the epilogue and the store. Launched one after the other they are
// already correct; here the second moves into the first, so the fixup costs no launch
// and no pass over the tiles nobody is waiting for:
//  1. The fixup kernel's grid Lets go (its tile is the split kernel's: the same m_b, n_b
//     and batch names, which t:010 derived from the same Loop IR loops; with CLUSTER_M
//     its block row is m_b * CM + m_cta, with CLUSTER_N its block column n_b * CN +
//     n_cta), and the names it defines that the split kernel
//     also defines get a suffix.
//  2. After the split kernel's body, the threads that wrote partial sums (all of them,
//     or the consumer warpgroups of a specialized kernel: k:030's producer is the last
//     warpgroup and stopped at a lower register budget) arrive on the tile's counter
//     (tile.arrive, stmt.h); the one CTA that arrives S-th runs the fixup body, on the
//     first threads of the block.
//  3. The fused kernel takes the fixup kernel's parameters and the counters; the fixup
//     kernel is dropped.
// Why atomics into one workspace (fixup) and not S partial tiles summed by the last CTA
// (partials): that CTA would read S * BM * BN * 4 bytes alone (2 MB for a 128 x 128 tile
// at S = 32: tens of microseconds on one SM), while the atomic adds spread the combine
// over every CTA and the L2, and leave the last CTA one tile to read. For small tiles the
// balance turns (88 KB for 11 splits of 64 x 32), and partials' plain stores are what
// clusters compose with: SPLITK_MODE=partials (l:020) hands this pass a splitk_fixup op
// that sums the partial tiles, fused the same way.
// Placed after k:055 so the split kernel's mainloop and epilogue and the fixup body are
// final (vectorized, unrolled) and no pass has to understand the fused form, and before
// k:060, which sets the fused kernel's launch bounds.
#include <algorithm>
#include <map>
#include <set>

#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

// The split kernel's top-level Let of `var`, or nullptr (a persistent kernel binds its
// tile coordinates inside the tile loop).
const Stmt* top_let(const KernelOp& k, const std::string& var) {
  for (const Stmt& s : k.body)
    if (s.kind == StmtKind::Let && s.var == var) return &s;
  return nullptr;
}

void fuse(CompileState& st, size_t fix_index) {
  KernelProgram& p = st.kernel;
  LOOM_CHECK(fix_index > 0, "splitk_fixup follows the split op");
  KernelOp& split = p.kernels[fix_index - 1];
  KernelOp fix = p.kernels[fix_index];
  const LoopOp& split_op = st.loop.ops[fix_index - 1];
  const LoopOp& fix_op = st.loop.ops[fix_index];

  // The output loops (batch.., m, n) and S from the Loop IR: the split op is `for s`
  // around the same loops.
  std::vector<std::string> loops;
  for (const Block* b = &fix_op.body; b->size() == 1 && (*b)[0].kind == StmtKind::For;
       b = &(*b)[0].body)
    loops.push_back((*b)[0].var);
  const Stmt& s_loop = split_op.body.at(0);
  if (!s_loop.extent.is_const())
    throw Error("k:058_splitk_fixup: the split count " + s_loop.extent.str() + " is not a constant");
  const int64_t S = s_loop.extent.const_value();
  // In a cluster each CTA arrives on its own block's counter (m_block, n_block below), yet
  // the atomic fixup summed wrong on the GPU with CLUSTER_M=2 (H100, 2026-11-22) where the
  // interpreter's one-cluster-at-a-time schedule did not, cause not found: refused. The
  // partials mode stores plain partial tiles and sums them after the counter's acquire,
  // the ordering the unclustered fixup already relies on: allowed (GPU cases in
  // tests/gpu/small_tile_cases.h).
  const bool partials = st.knobs.get_str("SPLITK_MODE", "reduce") == "partials";
  if (split.cluster[0] > 1 && !partials)
    throw Error("SPLITK_MODE=fixup with a cluster of " + std::to_string(split.cluster[0]) +
                " CTAs (CLUSTER_M, CLUSTER_N): its atomic combine summed wrong on the GPU with "
                "clusters though the interpreter passed it; use CLUSTER_M=1 and CLUSTER_N=1, "
                "SPLITK_MODE=partials (plain partial-tile stores), or SPLITK_MODE=reduce");
  const std::string m_b = loops[loops.size() - 2] + "_b", n_b = loops.back() + "_b";
  if (!top_let(split, m_b) || !top_let(split, n_b))
    throw Error("SPLITK_MODE=" + std::string(partials ? "partials" : "fixup") +
                " finishes each output tile in the CTA that arrives last, "
                "after its mainloop; kernel " + split.name + " binds no tile of its own at the "
                "top (PERSISTENT=1 walks many tiles per CTA): use PERSISTENT=0, or "
                "SPLITK_MODE=reduce");

  // 1: the fixup body without its grid Lets (those that read blockIdx, and the Lets built
  // from them, which come first), in the split kernel's tile coordinates.
  Block body;
  std::set<std::string> grid_vars;
  for (const Stmt& s : fix.body) {
    bool grid = false;
    if (s.kind == StmtKind::Let && body.empty()) {
      for (const char* b : {"blockIdx.x", "blockIdx.y", "blockIdx.z"}) grid |= s.value.uses(b);
      for (const auto& g : grid_vars) grid |= s.value.uses(g);
    }
    if (grid) grid_vars.insert(s.var);
    else body.push_back(s);
  }
  // In a cluster the split kernel's m_b (n_b) counts clusters of CM (CN) block rows
  // (columns); the CTA's own block is m_b * CM + m_cta (n_b * CN + n_cta).
  const int64_t CM = st.knobs.get_int("CLUSTER_M", 1), CN = st.knobs.get_int("CLUSTER_N", 1);
  const Expr m_block = CM > 1 ? Expr::var(m_b) * CM + Expr::var(loops[loops.size() - 2] + "_cta")
                              : Expr::var(m_b);
  const Expr n_block = CN > 1 ? Expr::var(n_b) * CN + Expr::var(loops.back() + "_cta")
                              : Expr::var(n_b);
  substitute_block(body, {{m_b, m_block}, {n_b, n_block}});
  rename_clashes(body, bound_names(split.body), "_fx");

  // 2: the arrival and the fixup of the last CTA.
  bool specialized = false;
  walk(split.body, [&](const Stmt& s) { specialized |= s.kind == StmtKind::Specialize; });
  const int writers = split.block_threads - (specialized ? 128 : 0);
  if (fix.block_threads > writers)
    throw Error("k:058_splitk_fixup: the fixup of a tile needs " +
                std::to_string(fix.block_threads) + " threads; kernel " + split.name +
                " has " + std::to_string(writers) + " that wrote its partial sums");
  const TensorDecl* counter = nullptr;
  for (const TensorDecl& t : p.tensors)
    if (t.name.rfind("splitk_count", 0) == 0) counter = &t;
  LOOM_CHECK(counter, "t:010 declares the tile counters with splitk_fixup");
  std::vector<Expr> at;
  for (size_t i = 0; i + 2 < loops.size(); ++i) at.push_back(Expr::var(loops[i]));
  at.push_back(m_block);
  at.push_back(n_block);
  const std::vector<Expr> strides = counter->strides();
  Expr offset = 0;
  for (size_t i = 0; i < at.size(); ++i) offset = offset + at[i] * strides[i];
  std::string last = "splitk_last";
  for (int i = 0; bound_names(split.body).count(last); ++i) last = "splitk_last" + std::to_string(i);

  if (fix.block_threads < writers)
    body = {Stmt::If(Expr::var("threadIdx.x") < Expr(fix.block_threads), std::move(body))};
  Block tail = {Stmt::TileArrive(last, counter->name, offset, S, writers),
                Stmt::If(Expr::make(Expr::Kind::Eq, Expr::var(last), Expr(1)), std::move(body))};
  if (writers < split.block_threads)
    tail = {Stmt::If(Expr::var("threadIdx.x") < Expr(writers), std::move(tail))};
  split.body.insert(split.body.end(), tail.begin(), tail.end());

  // 3: parameters: tensors (the split kernel's, the fixup's, the counters), then symbols.
  std::vector<std::string> tensors, symbols;
  std::set<std::string> seen;
  auto add = [&](const std::string& n) {
    if (!seen.insert(n).second) return;
    (p.has_tensor(n) ? tensors : symbols).push_back(n);
  };
  for (const auto& n : split.params) add(n);
  for (const auto& n : fix.params) add(n);
  add(counter->name);
  // Symbols keep the program's order (codegen and the launcher read params in order).
  std::vector<std::string> ordered;
  for (const auto& sym : p.symbols)
    if (std::find(symbols.begin(), symbols.end(), sym) != symbols.end()) ordered.push_back(sym);
  split.params = tensors;
  split.params.insert(split.params.end(), ordered.begin(), ordered.end());
  p.kernels.erase(p.kernels.begin() + long(fix_index));
}

}  // namespace

Pass pass_splitk_fixup() {
  return Pass{"k:058_splitk_fixup", Level::Kernel, Level::Kernel,
              "SPLITK_MODE=fixup: the split kernel ends with a tile arrival, and the CTA that "
              "arrives last runs splitk_fixup's body; no splitk_fixup kernel is left",
              {},
              [](CompileState& s) {
                for (size_t i = 0; i < s.loop.ops.size(); ++i)
                  if (s.loop.ops[i].name == "splitk_fixup") {
                    LOOM_CHECK(s.kernel.kernels.size() == s.loop.ops.size(),
                               "one kernel per Loop IR op before k:058");
                    fuse(s, i);
                    return;
                  }
              }};
}

}  // namespace loom
