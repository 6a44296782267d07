// k:057_cluster_reduce — CLUSTER_K's combine inside the cluster, through distributed
// shared memory (DSMEM).
//
// l:022 left two kernels: the split kernel, whose c CTAs along x (rank q = blockIdx.x % c)
// each reduce one slice of K and write the f32 tile to cluster_partial (stored tile by
// tile by t:010), and clusterk_reduce, tiled BM/c rows tall, which sums the c slices and
// runs the epilogue. Here the second becomes the end of the first, and the partial never
// leaves the cluster:
//  1. Each CTA stores every row slice of its partial tile straight into the shared f32
//     tile [BM, BN] (8 columns of row padding, as t:010 laid the partial out) of the CTA
//     that owns the slice — CTA t sums rows [t S, t S + S), S = BM/c — at rows q S ..:
//     an asynchronous store (st.async, Kernel IR `store .. @cta(t) async mbar[x]`) that
//     counts its bytes on the owner's exchange mbarrier x. t:010's bounds guards around
//     the stores go: the owner expects all BM x BN elements from each source (the ragged
//     edge's are the zeros TMA filled in).
//  2. The exchange mbarrier: thread 0 inits it (one arrival) and arrives expecting BM x BN
//     x 4 bytes at the start, then a relaxed cluster barrier (fence.mbarrier_init orders
//     the init) keeps every peer from storing into a barrier not yet initialized.
//  3. The CTA waits for the phase (every thread: none may exit before its peers' stores
//     have landed), then runs clusterk_reduce's body, without its grid Lets: its block
//     row is row q of the cluster's tile (m_b -> m_b * c + q), its load of slice `peer`
//     a load of its own tile at rows peer S ... It runs on the threads that computed the
//     tile (a specialized kernel's producer warpgroup, the last, kept few registers).
//  4. The kernel launches as clusters of c along x (KernelOp::cluster), takes
//     clusterk_reduce's parameters, and the partial tensor and clusterk_reduce are dropped.
// Why stores into the owner rather than loads from the peers after a cluster barrier (the
// first form, 2026-11-22 to 2026-11-23): barrier.cluster.arrive releases at cluster scope, which
// ptxas implements as MEMBAR.ALL.GPU — it waits for every memory access the SM has in
// flight, and the pair of barriers cost ~1.4 us of a 15 us decode kernel on H100
// (per-CTA %globaltimer stamps, 2026-11-23). The mbarrier's transaction count orders the
// stores for the owner without a fence: 14.8 -> 13.9 us (bench/NOTES.md, 2026-11-23, per-CTA traces).
// Why no atomics: c CTAs' partial tiles are added inside the cluster, each CTA sending
// (c-1)/c of its tile SM to SM; the L2 atomic
// fixup serialized 64 partial tiles on one tile's addresses (bench/NOTES.md, 2026-11-22, the cluster slowdown).
// Placed after k:055, so both bodies are final, and before k:058: with SPLITK_MODE=fixup
// the reduction's write is the atomic add into the workspace that the fixup finishes.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

// `e` with floor divisions and remainders by a constant folded where `r` bounds their
// dividend to [0, divisor): the tile row (m_b * c + q) / c of a peer's element becomes
// the cluster's own once m_b is 0.
Expr fold_bounded(const Expr& e, const Ranges& r) {
  if (e.is_const() || e.is_var()) return e;
  const Expr a = fold_bounded(e.lhs(), r), b = fold_bounded(e.rhs(), r);
  const bool div = e.kind() == Expr::Kind::FloorDiv, mod = e.kind() == Expr::Kind::Mod;
  if ((div || mod) && b.is_const() && b.const_value() > 0) {
    const auto range = a.bounds(r);
    if (range && range->lo >= 0 && range->hi < b.const_value()) return div ? Expr(0) : a;
  }
  return Expr::make(e.kind(), a, b);
}

// The Lets at the top of a kernel that read blockIdx, and those built from them (they
// come first): the tile a CTA works on.
std::set<std::string> grid_lets(const Block& body) {
  std::set<std::string> vars;
  for (const Stmt& s : body) {
    if (s.kind != StmtKind::Let) break;
    bool grid = false;
    for (const char* b : {"blockIdx.x", "blockIdx.y", "blockIdx.z"}) grid |= s.value.uses(b);
    for (const auto& g : vars) grid |= s.value.uses(g);
    if (grid) vars.insert(s.var);
  }
  return vars;
}

std::map<std::string, Expr> zeros(const std::set<std::string>& vars) {
  std::map<std::string, Expr> z;
  for (const auto& v : vars) z[v] = Expr(0);
  return z;
}

struct Plan {
  int64_t c = 1;
  std::string rank;                   // the split kernel's `let q = blockIdx.x % c`
  std::string partial;                // cluster_partial
  std::vector<std::string> loops;     // clusterk_reduce's output loops (lead.., m, n)
  int64_t BM = 0, BN = 0, pad = 0;    // the tile as t:010 laid the partial out
  Expr M;                             // clusterk_reduce's m extent
};

Plan plan(const CompileState& st, size_t at) {
  const LoopOp& split_op = st.loop.ops[at - 1];
  const LoopOp& red_op = st.loop.ops[at];
  Plan p;
  const Stmt& q = split_op.body.at(0);
  LOOM_CHECK(q.kind == StmtKind::For && q.axis == "cluster_k" && q.extent.is_const(),
             "l:022 puts clusterk_reduce after the op it split, whose outer loop is q");
  p.c = q.extent.const_value();
  p.rank = q.var;
  p.partial = split_op.output;
  std::vector<Expr> extents;
  for (const Block* b = &red_op.body; b->size() == 1 && (*b)[0].kind == StmtKind::For &&
                                      (*b)[0].loop_kind == LoopKind::Parallel;
       b = &(*b)[0].body) {
    p.loops.push_back((*b)[0].var);
    extents.push_back((*b)[0].extent);
  }
  LOOM_CHECK(extents.size() >= 2, "clusterk_reduce has (lead..,) m, n loops");
  p.M = extents[extents.size() - 2];
  const std::vector<Expr>& sh = st.kernel.tensor(p.partial).shape;
  LOOM_CHECK(sh.size() >= 4 && sh.back().is_const() && sh[sh.size() - 2].is_const(),
             "t:010 stores cluster_partial tile by tile");
  p.BM = sh[sh.size() - 2].const_value();
  p.pad = 8;
  p.BN = sh.back().const_value() - p.pad;
  return p;
}

void fuse(CompileState& st, size_t at) {
  KernelProgram& prog = st.kernel;
  const Plan pl = plan(st, at);
  KernelOp& split = prog.kernels[at - 1];
  KernelOp red = prog.kernels[at];
  const std::string where = "CLUSTER_K=" + std::to_string(pl.c);

  // The shared tile.
  TensorDecl tile;
  tile.name = "cluster_tile";
  for (int i = 0; prog.has_tensor(tile.name); ++i) tile.name = "cluster_tile" + std::to_string(i);
  tile.dtype = DType::F32;
  tile.role = TensorRole::Shared;
  tile.shape = {pl.BM, pl.BN};
  tile.pad = pl.pad;
  prog.tensors.push_back(tile);

  // 1: the split kernel's writes of the partial go to the tiles of the slices' owners:
  // element (row, col) of this CTA's partial (local offset o = row * W + col) belongs to
  // the CTA t = row / S that sums rows [t S, t S + S), which keeps the c sources' copies
  // of its rows one above the other: source q's row t S + r at row q S + r, offset
  // o + (q - t) S W. An asynchronous store (st.async) completes its bytes on t's
  // exchange mbarrier.
  const int64_t W = pl.BN + pl.pad, S = pl.BM / pl.c;
  const int slot = split.mbarriers++;
  // Every element of the tile is stored, the ragged edge's too (zeros: TMA filled the
  // operands out of range with them), because each owner expects all BM x BN: t:010's
  // bounds guards around single partial stores go — they would have kept the global
  // partial in range, and the shared tile has room for the whole tile.
  walk(split.body, [&](Stmt& s) {
    if (s.kind == StmtKind::If && s.body.size() == 1 && s.body[0].kind == StmtKind::Write &&
        s.body[0].tensor == pl.partial) {
      Stmt w = s.body[0];
      s = std::move(w);
    }
  });
  int guarded = 0;
  std::function<void(const Block&, bool)> find_guarded = [&](const Block& b, bool under_if) {
    for (const Stmt& s : b) {
      if (s.kind == StmtKind::Write && s.tensor == pl.partial && under_if) ++guarded;
      if (s.kind == StmtKind::Specialize)  // its arms are Ifs that select warps, not guards
        for (const Stmt& arm : s.body) find_guarded(arm.body, under_if);
      else
        find_guarded(s.body, under_if || s.kind == StmtKind::If);
    }
  };
  find_guarded(split.body, false);
  LOOM_CHECK(guarded == 0, "k:057: every partial store of " + split.name +
                               " reaches the cluster tile unconditionally (owners expect whole tiles)");
  std::set<std::string> tile_vars = grid_lets(split.body);
  const std::map<std::string, Expr> to_local = zeros(tile_vars);
  int writes = 0;
  walk(split.body, [&](Stmt& s) {
    if (s.kind == StmtKind::Load && s.tensor == pl.partial)
      throw Error("k:057_cluster_reduce: kernel " + split.name + " reads " + pl.partial);
    if (s.kind != StmtKind::Write || s.tensor != pl.partial) return;
    const Expr o = s.index.at(0).substitute(to_local);
    const Expr owner = o / Expr(W * S);
    s.tensor = tile.name;
    s.index = {o + (Expr::var(pl.rank) - owner) * Expr(S * W)};
    s.remote = true;
    s.value = owner;
    s.mbar = Expr(slot);
    ++writes;
  });
  if (writes == 0)
    throw Error("k:057_cluster_reduce: kernel " + split.name + " writes no " + pl.partial +
                " (a staged or TMA-store epilogue took its stores?); " + where +
                " needs EPILOGUE=direct");

  // 3: the reduction in the split kernel's tile coordinates.
  const std::string m_b = pl.loops[pl.loops.size() - 2] + "_b";
  const std::set<std::string> red_grid = grid_lets(red.body);
  Block body;
  for (const Stmt& s : red.body)
    if (!(s.kind == StmtKind::Let && red_grid.count(s.var))) body.push_back(s);
  substitute_block(body, {{m_b, Expr::var(m_b) * pl.c + Expr::var(pl.rank)}});
  rename_clashes(body, bound_names(split.body), "_ck");
  std::string peer;
  walk(body, [&](const Stmt& s) {
    if (s.kind == StmtKind::For && s.axis == "cluster_k") peer = s.var;
  });
  LOOM_CHECK(!peer.empty(), "clusterk_reduce sums over its cluster_k loop");
  std::set<std::string> red_tile = tile_vars;
  red_tile.erase(pl.rank);
  red_tile.insert(peer);
  const std::map<std::string, Expr> red_local = zeros(red_tile);
  const Ranges rank_range = {{pl.rank, Expr::Range{0, pl.c - 1}}};
  walk(body, [&](Stmt& s) {
    if (s.kind == StmtKind::Write && s.tensor == pl.partial)
      throw Error("k:057_cluster_reduce: clusterk_reduce writes " + pl.partial);
    if (s.kind != StmtKind::Load || s.tensor != pl.partial) return;
    if (s.width != 1)
      throw Error("k:057_cluster_reduce: a vector load of " + pl.partial + " (width " +
                  std::to_string(s.width) + "); the DSMEM reduction loads one f32 at a time");
    // Slice q of peer `peer`'s partial is at rows peer S .. of this CTA's own tile.
    const Expr in_peer = fold_bounded(s.index.at(0).substitute(red_local), rank_range);
    Stmt l = Stmt::Load(s.dst, tile.name,
                        {in_peer + (Expr::var(peer) - Expr::var(pl.rank)) * Expr(S * W)});
    l.dst_index = s.dst_index;
    l.pred = s.pred;
    s = std::move(l);
  });

  bool specialized = false;
  walk(split.body, [&](const Stmt& s) { specialized |= s.kind == StmtKind::Specialize; });
  const int writers = split.block_threads - (specialized ? 128 : 0);
  if (red.block_threads > writers)
    throw Error("k:057_cluster_reduce: the reduction of a tile slice needs " +
                std::to_string(red.block_threads) + " threads; kernel " + split.name + " has " +
                std::to_string(writers) + " that computed the tile");
  // clusterk_reduce's grid had ceil(M / (BM/c)) block rows and t:020 dropped the row
  // guards that proves; the cluster's c slices of its last tile may reach past them.
  Expr run = Expr::var(m_b) * pl.c + Expr::var(pl.rank) < ceil_div(pl.M, pl.BM / pl.c);
  if (red.block_threads < split.block_threads)
    run = run && Expr::var("threadIdx.x") < Expr(red.block_threads);
  body = {Stmt::If(run, std::move(body))};

  // 2: the exchange mbarrier — one arrival (thread 0's, at the start) and the BM x BN f32
  // the c sources store into this CTA's tile — initialized before any peer may store: a
  // relaxed cluster barrier after fence.mbarrier_init, which orders the init. 4: the
  // reduction waits for the phase (every thread: none of its CTA may exit before its
  // peers' stores have landed, whether or not it sums a slice).
  size_t top = 0;
  while (top < split.body.size() && split.body[top].kind == StmtKind::Let) ++top;
  const Block setup = {
      Stmt::If(Expr::var("threadIdx.x") < Expr(1),
               {Stmt::MbarInit(Expr(slot), 1), Stmt::MbarArriveExpectTx(Expr(slot), pl.BM * pl.BN * 4),
                Stmt::FenceMbarInit()}),
      Stmt::ClusterSync(/*relaxed=*/true)};
  split.body.insert(split.body.begin() + long(top), setup.begin(), setup.end());
  split.body.push_back(Stmt::MbarWait(Expr(slot), Expr(0)));
  split.body.insert(split.body.end(), body.begin(), body.end());
  split.cluster[0] = int(pl.c);

  const SharedLayout layout = shared_layout(prog, split);
  const int64_t bytes = kernel_smem_bytes(layout, split);
  if (bytes > st.target.smem_per_block)
    throw Error(where + " keeps the " + std::to_string(pl.BM) + "x" + std::to_string(pl.BN) +
                " f32 partial tile (" + std::to_string(pl.BM * (pl.BN + pl.pad) * 4) +
                " B with its row padding) in shared memory beside the mainloop's buffers: " +
                std::to_string(bytes) + " B per block; this GPU allows " +
                std::to_string(st.target.smem_per_block) + " B (lower STAGES or BN)");

  // 5: parameters (tensors, then symbols in the program's order); the partial goes.
  std::vector<std::string> tensors, symbols;
  std::set<std::string> seen = {pl.partial};
  auto add = [&](const std::string& n) {
    if (!seen.insert(n).second) return;
    (prog.has_tensor(n) ? tensors : symbols).push_back(n);
  };
  for (const auto& n : split.params) add(n);
  for (const auto& n : red.params) add(n);
  split.params = tensors;
  for (const auto& sym : prog.symbols)
    if (std::find(symbols.begin(), symbols.end(), sym) != symbols.end()) split.params.push_back(sym);
  prog.kernels.erase(prog.kernels.begin() + long(at));
  std::erase_if(prog.tensors, [&](const TensorDecl& t) { return t.name == pl.partial; });
}

}  // namespace

Pass pass_cluster_reduce() {
  return Pass{"k:057_cluster_reduce", Level::Kernel, Level::Kernel,
              "CLUSTER_K: the split kernel keeps its partial tile in shared memory, and after a "
              "cluster barrier each CTA sums its 1/c of the rows from every peer's tile "
              "(DSMEM) and runs the epilogue; no clusterk_reduce kernel is left",
              {},
              [](CompileState& s) {
                for (size_t i = 1; i < s.loop.ops.size(); ++i)
                  if (s.loop.ops[i].name == "clusterk_reduce") {
                    LOOM_CHECK(s.kernel.kernels.size() == s.loop.ops.size(),
                               "one kernel per Loop IR op before k:057");
                    fuse(s, i);
                    return;
                  }
              }};
}

}  // namespace loom
