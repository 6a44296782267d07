// k:010_bind_hardware — Tile IR -> Kernel IR: GRID and THREAD loops become launch
// geometry, and multi-dimensional accesses become flat offsets.
//
// Steps:
//  1. The outer GRID loops map to blockIdx: the n tile to x (2^31-1 blocks allowed), the
//     m tile to y, a batch loop to z; each loop becomes `let var = blockIdx.?`. A
//     rasterized `tile` loop (t:025) takes x alone. Further leading loops (several
//     batch dims, split-K's `s`) fold into z, or into y when the tiles left it free,
//     by div/mod Lets; a constant count over CUDA's limit (y, z: 65535) is an error.
//     Tile IR Lets among the grid loops (the rasterized tile coordinates) follow the
//     blockIdx Lets they depend on; those among the thread loops follow threadIdx's.
//     A CLUSTER loop (CLUSTER_M) below them is the CTA's rank in a 1-D cluster along x:
//     blockIdx.x = tile * CM + rank, `let m_cta = blockIdx.x % CM`, KernelOp::cluster = CM
//     (CLUSTER_K's loop the same way, but KernelOp::cluster is k:057's to set). Two of
//     them (CLUSTER_M x CLUSTER_N) are the digits of one 1-D rank: `let m_cta = blockIdx.x
//     % (CM*CN) / CN`, `let n_cta = blockIdx.x % CN`, KernelOp::cluster = CM*CN.
//  2. The WARP and THREAD loops below them (constant extents) map to one threadIdx.x,
//     the last loop fastest: `let m_t = threadIdx.x / TN`, `let n_t = threadIdx.x % TN`.
//     WARP loops with no THREAD loop under them (ATOM=mma_*: a warp computes its atoms
//     together) get the warp's 32 lanes as the fastest digit, `let lane = threadIdx.x
//     % 32`; their ATOM loops stay loops, which every lane runs whole until k:025 splits
//     them among the lanes by the fragment layouts. WARPGROUP loops (ATOM=wgmma_*) get
//     the warpgroup's 128 threads the same way, `let wg_thread = threadIdx.x % 128`, and
//     k:026 splits their ATOM loops by the wgmma C layout.
//  3. Every Load/Write index becomes the row-major offset of the tensor's storage.
//  4. Params: the tensors the kernel touches (inputs, then the output), then symbols.
#include <map>
#include <set>

#include "ir/error.h"
#include "passes/passes.h"

namespace loom {
namespace {

void flatten_accesses(Block& b, const ProgramBase& p) {
  walk(b, [&](Stmt& s) {
    if (s.kind != StmtKind::Load && s.kind != StmtKind::Write && s.kind != StmtKind::TileArrive)
      return;
    auto strides = p.tensor(s.tensor).strides();
    Expr off = 0;
    for (size_t i = 0; i < s.index.size(); ++i) off = off + s.index[i] * strides[i];
    s.index = {off};
  });
}

// The grid and thread nests at the top of an op, with the Tile IR Lets found among them.
struct Nest {
  std::vector<const Stmt*> grid, cluster, threads;
  Block grid_lets;    // Lets before the first thread loop (rasterized tile coordinates)
  Block thread_lets;  // Lets among the thread loops
  const Block* rest = nullptr;
};

Nest peel(const Block& body) {
  Nest n;
  const Block* b = &body;
  auto descend = [&](Tier tier, std::vector<const Stmt*>& loops, bool grid_phase) {
    for (;;) {
      size_t i = 0;
      while (i < b->size() && (*b)[i].kind == StmtKind::Let) ++i;
      if (i + 1 != b->size() || (*b)[i].kind != StmtKind::For || (*b)[i].tier != tier) return;
      Block& lets = grid_phase || loops.empty() ? n.grid_lets : n.thread_lets;
      lets.insert(lets.end(), b->begin(), b->begin() + long(i));
      loops.push_back(&(*b)[i]);
      b = &(*b)[i].body;
    }
  };
  descend(Tier::Grid, n.grid, true);
  // CLUSTER loops (CLUSTER_M, CLUSTER_N, CLUSTER_K): the CTA's rank in its cluster.
  descend(Tier::Cluster, n.cluster, true);
  // WARP loops (t:010 with WM/WN) sit above the lane loops; together they are one
  // mixed-radix decomposition of threadIdx.x, so warp w = threadIdx.x / 32.
  descend(Tier::Warpgroup, n.threads, false);
  descend(Tier::Warp, n.threads, false);
  descend(Tier::Thread, n.threads, false);
  n.rest = b;
  return n;
}

// A warpgroup: four consecutive warps, the unit wgmma runs on (PTX ISA 9.7.15).
constexpr int64_t kWarpgroupThreads = 128;

// CUDA's launch limits: blockIdx.x up to 2^31-1, y and z up to 65535.
constexpr int64_t kGridLimit[3] = {(int64_t(1) << 31) - 1, 65535, 65535};
const char* const kBuiltin[3] = {"blockIdx.x", "blockIdx.y", "blockIdx.z"};

// Folds `loops` (outermost first) into blockIdx.<dim>: the innermost varies fastest.
void fold(const std::vector<const Stmt*>& loops, int dim, KernelOp& k,
          std::map<const Stmt*, Expr>& value) {
  Expr id = Expr::var(kBuiltin[dim]), inner = 1;
  for (int i = int(loops.size()) - 1; i >= 0; --i) {
    Expr v = id / inner;
    if (i > 0) v = v % loops[size_t(i)]->extent;
    value[loops[size_t(i)]] = v;
    inner = inner * loops[size_t(i)]->extent;
  }
  k.grid[dim] = inner;
  if (inner.is_const() && inner.const_value() > kGridLimit[dim]) {
    std::string names;
    for (const Stmt* l : loops) names += (names.empty() ? "" : " x ") + l->var;
    throw Error("k:010_bind_hardware: kernel '" + k.name + "' needs " + inner.str() +
                " blocks along " + kBuiltin[dim] + " (" + names + "); CUDA allows " +
                std::to_string(kGridLimit[dim]) +
                (dim == 1 && loops.size() == 1 && loops[0]->axis == "m"
                     ? " (GROUP_M > 1 puts all output tiles on blockIdx.x)"
                     : " (lower SPLITK or the batch, or raise the tile size)"));
  }
}

KernelOp bind(const TileOp& op, const ProgramBase& p, size_t which, size_t count) {
  KernelOp k;
  k.name = "k_" + op.name + (count > 1 ? "_" + std::to_string(which) : "");

  // 1: grid loops, outermost first. The output tiles are the last one (rasterized
  // `tile`) or two (m_b, n_b); the loops before them (batch, split-K's s) are leading.
  Nest nest = peel(op.body);
  const auto& grid = nest.grid;
  const auto& threads = nest.threads;
  bool rasterized = !grid.empty() && grid.back()->axis == "tile";
  size_t tiles = rasterized ? 1 : 2;
  if (grid.size() < tiles)
    throw Error("k:010_bind_hardware: kernel '" + k.name + "' has " +
                std::to_string(grid.size()) +
                " grid loops; Loom maps (batch, split,) m, n tiles onto blockIdx.z/y/x");
  std::vector<const Stmt*> leading(grid.begin(), grid.end() - long(tiles));
  std::map<const Stmt*, Expr> value;
  fold({grid.back()}, 0, k, value);
  Block cluster_lets;
  if (!nest.cluster.empty()) {
    // blockIdx.x = tile * C + rank: the C CTAs of a cluster are consecutive along x. Two
    // CLUSTER loops (CLUSTER_M x CLUSTER_N) are the digits of the rank, the last fastest:
    // rank = m_cta * CN + n_cta. The hardware cluster stays 1-D (C, 1, 1): its rank is
    // all the multicast masks need, and the grid keeps its x/y/z roles.
    int64_t C = 1;
    for (const Stmt* c : nest.cluster) {
      if (!c->extent.is_const() || nest.cluster.size() > 2 ||
          (nest.cluster.size() > 1 && c->axis == "cluster_k"))
        throw Error("k:010_bind_hardware: kernel '" + k.name + "' has a cluster nest Loom does "
                    "not map (one or two constant CLUSTER loops over M and N, or CLUSTER_K's)");
      C *= c->extent.const_value();
    }
    value[grid.back()] = Expr::var("blockIdx.x") / C;
    k.grid[0] = k.grid[0] * C;
    // CLUSTER_K's CTAs (axis "cluster_k") work alone until k:057 adds the reduction that
    // joins them and launches them as clusters: the mainloop passes see no cluster (no
    // multicast, no cluster-wide slot release).
    if (nest.cluster[0]->axis != "cluster_k") k.cluster[0] = int(C);
    int64_t inner = 1;
    for (size_t i = nest.cluster.size(); i-- > 0;) {
      const Stmt& c = *nest.cluster[i];
      const int64_t e = c.extent.const_value();
      cluster_lets.insert(cluster_lets.begin(),
                          Stmt::Let(c.var, Expr::var("blockIdx.x") % (e * inner) / inner));
      inner *= e;
    }
  }
  if (!rasterized) fold({grid[grid.size() - 2]}, 1, k, value);
  if (rasterized && leading.size() >= 2) {
    // y is free: the innermost leading loop takes it, so z holds a smaller product.
    fold({leading.back()}, 1, k, value);
    leading.pop_back();
  }
  if (!leading.empty()) fold(leading, 2, k, value);
  Block body;
  for (const Stmt* g : grid) body.push_back(Stmt::Let(g->var, value.at(g)));
  body.insert(body.end(), cluster_lets.begin(), cluster_lets.end());
  body.insert(body.end(), nest.grid_lets.begin(), nest.grid_lets.end());

  // 2: thread loops.
  int64_t total = 1;
  std::vector<int64_t> ext;
  std::vector<std::string> names;
  for (const Stmt* t : threads) {
    if (!t->extent.is_const())
      throw Error("k:010_bind_hardware: thread loop " + t->var + " has a symbolic extent");
    ext.push_back(t->extent.const_value());
    names.push_back(t->var);
    total *= ext.back();
  }
  if (!threads.empty() && threads.back()->tier == Tier::Warp) {
    ext.push_back(WarpAtom::kLanes);
    names.push_back("lane");
    total *= WarpAtom::kLanes;
  }
  if (!threads.empty() && threads.back()->tier == Tier::Warpgroup) {
    ext.push_back(kWarpgroupThreads);
    names.push_back("wg_thread");
    total *= kWarpgroupThreads;
  }
  Expr tid = Expr::var("threadIdx.x");
  int64_t inner = 1;
  std::vector<Stmt> lets;
  for (int i = int(ext.size()) - 1; i >= 0; --i) {
    Expr v = tid / inner;
    if (i > 0) v = v % ext[size_t(i)];
    lets.insert(lets.begin(), Stmt::Let(names[size_t(i)], v));
    inner *= ext[size_t(i)];
  }
  body.insert(body.end(), lets.begin(), lets.end());
  body.insert(body.end(), nest.thread_lets.begin(), nest.thread_lets.end());
  k.block_threads = int(total);

  Block rest = *nest.rest;
  flatten_accesses(rest, p);
  body.insert(body.end(), rest.begin(), rest.end());
  k.body = std::move(body);

  // 4: params.
  std::set<std::string> used;
  walk(k.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::Load || s.kind == StmtKind::Write || s.kind == StmtKind::TileArrive)
      used.insert(s.tensor);
    if (!s.src.empty()) used.insert(s.src);
    for (const auto& c : s.copies) used.insert(c.src);  // a Stage reads its slabs' sources
  });
  for (const auto& in : op.inputs)
    if (used.count(in)) k.params.push_back(in);
  k.params.push_back(op.output);
  for (const auto& sym : p.symbols) k.params.push_back(sym);
  return k;
}

}  // namespace

Pass pass_bind_hardware() {
  return Pass{"k:010_bind_hardware", Level::Tile, Level::Kernel,
              "no GRID/THREAD loops: blockIdx/threadIdx lets and launch geometry; flat "
              "offsets",
              {},
              [](CompileState& s) {
                KernelProgram kp;
                static_cast<ProgramBase&>(kp) = s.tile;
                for (size_t i = 0; i < s.tile.ops.size(); ++i)
                  kp.kernels.push_back(bind(s.tile.ops[i], s.tile, i, s.tile.ops.size()));
                s.kernel = std::move(kp);
                s.level = Level::Kernel;
              }};
}

}  // namespace loom
