// t:010_partition_loops — Loop IR -> Tile IR: factor the output loops into hardware tiers.
//
// For every op, the perfect nest of parallel loops at its top is the output space
// (b.., m, n). Steps:
//  1. Batch loops become GRID loops unchanged (one CTA per batch entry and tile).
//  2. m = m_b*BM + m_t*FM + m_r: GRID m_b, THREAD m_t (BM/FM threads), REGISTER m_r.
//     A thread's FM rows are contiguous: its A operands are neighbours.
//  3. n = n_b*BN + n_g*(TN*V) + n_t*V + n_v with TN = BN/FN threads: GRID n_b, THREAD
//     n_t, REGISTER n_g (FN/V groups) and n_v (V consecutive columns). V is the vector
//     width (VECTORIZE, dividing FN): a thread's V columns are contiguous, so its operand
//     reads can be one vector access, while consecutive threads stay V columns apart and
//     a warp still touches one contiguous run per group (coalescing). V = 1 gives the
//     plain strided mapping n_r*TN + n_t.
//  4. With WM x WN warps (knobs), the thread tier splits into a WARP tier and a lane
//     tier: m_t = m_w*(TM/WM) + m_l, n_t = n_w*(TN/WN) + n_l with (TM/WM)*(TN/WN) = 32
//     lanes, so each warp owns a compact sub-tile (fewer distinct shared-memory rows and
//     columns per warp instruction) instead of a 2-row strip of the block tile.
//  5. The original cell body sits under a guard `m < M && n < N`, so any M, N works; the
//     next pass removes the conjuncts it can prove.
// Knobs: BM BN FM FN (defaults from the shape; see default_tile()).
//
// With ATOM=mma_* (an AM x AN x AK mma.sync atom of the table) a contraction is tiled by
// warps instead of threads:
//   m = m_b*BM + m_w*(FM*AM) + m_a*AM + m_e,  n = n_b*BN + n_w*(FN*AN) + n_a*AN + n_e
// GRID m_b n_b, WARP m_w n_w (WM x WN warps), REGISTER m_a n_a (FM x FN atoms per warp),
// ATOM m_e n_e (one atom's tile, whose cells the warp's 32 lanes share through the
// fragment layouts: k:025 decides which lane holds which). BM = WM*FM*AM and
// BN = WN*FN*AN follow from the others (an explicit BM/BN must agree), and the checks
// that only an mma needs (input types, sm_80+) are made here, once.
// ATOM=wgmma_* (sm_90a) tiles the same way with WARPGROUP loops m_w n_w (4 warps each)
// and 64 x N atoms: m = m_b*BM + m_w*(FM*64) + m_a*64 + m_e. With CLUSTER_M = CM > 1 a
// CLUSTER loop m_cta sits between the grid and the warpgroups: m = m_b*(BM*CM) + m_cta*BM + ..
// (the CTAs of one cluster take CM consecutive block rows of the same columns); CLUSTER_N
// = CN > 1 the same along n (n_cta, CN consecutive block columns), and both together make
// a 2-D cluster of CM x CN tiles: loops m_cta > n_cta, A shared along a cluster row, B
// along a cluster column.
// CONSUMERS=pingpong (WM=2): the tile is one warpgroup's, BM = FM*64, one WARPGROUP loop
// of extent 1; k:030 alternates the persistent tiles between two consumer warpgroups.
// CLUSTER_K (l:022): the contraction's leading `q` loop (axis "cluster_k") becomes the
// CLUSTER loop instead of a grid loop (the c CTAs of a cluster take the c slices of K of
// one tile), and its cluster_partial is stored tile by tile, [q, lead.., m_b, n_b, BM rows,
// BN + 8 columns] — the layout of the shared tile k:057 puts it in (8 columns of padding
// keep the wgmma layout's stores of 8 rows at once off one bank), so k:057 maps a global
// offset to the shared one by dropping the tile terms. clusterk_reduce is tiled like the
// contraction but BM/c rows tall (the 1/c of a tile each CTA of the cluster finishes).
// Split-K's splitk_fixup op (SPLITK_MODE=fixup) is tiled like the contraction before it,
// one BM x BN tile per block on at most its threads, and gets the per-tile arrival
// counters: k:058 runs it inside the split kernel, in the CTA that finishes a tile.
#include <functional>

#include "ir/error.h"
#include "passes/mma_choice.h"
#include "passes/passes.h"

namespace loom {
namespace {

// The least power of two >= x, or `cap` (a power of two) when that is smaller. The cap
// bounds the loop: doubling an int64 towards an extent near INT64_MAX overflows to 0 and
// never ends.
int64_t pow2_at_least(int64_t x, int64_t cap) {
  int64_t p = 1;
  while (p < x && p < cap) p *= 2;
  return p;
}

// The simple schedule's defaults: 4x4 cells per thread, 64x64 blocks (256 threads),
// shrunk for small extents so a tiny GEMM is not padded to 64.
struct TileDefault { int64_t b, f; };
TileDefault default_tile(std::optional<int64_t> extent) {
  if (!extent) return {64, 4};
  int64_t f = pow2_at_least(*extent, 4);
  int64_t b = std::max(f, pow2_at_least(*extent, 64));
  return {b, f};
}

std::optional<int64_t> known(const Expr& e, const std::map<std::string, int64_t>& sizes) {
  if (e.is_const()) return e.const_value();
  Expr::Env env(sizes.begin(), sizes.end());
  try {
    return e.eval(env);
  } catch (const Error&) {
    return std::nullopt;
  }
}

void check_tiling(const char* b_name, int64_t b, const char* f_name, int64_t f) {
  if (b % f != 0)
    throw Error(std::string(b_name) + "=" + std::to_string(b) + " is not a multiple of " +
                f_name + "=" + std::to_string(f) +
                ": a block's tile is split evenly among its threads (choose " + b_name +
                " as a multiple of " + f_name + ")");
}

// The contraction's reduce loop in the cell: the inputs it loads are the atom's A and B.
const Stmt* reduce_loop(const Block& cell) {
  for (const Stmt& st : cell) {
    if (st.kind == StmtKind::For && st.loop_kind == LoopKind::Reduce) return &st;
    if (st.kind == StmtKind::If)
      if (const Stmt* r = reduce_loop(st.body)) return r;
  }
  return nullptr;
}

bool atom_accepts(DType atom_in, DType tensor) {
  // mma .tf32 takes f32 tensors too: their values are rounded (cvt.rna) into the fragment.
  if (atom_in == DType::TF32) return tensor == DType::TF32 || tensor == DType::F32;
  return atom_in == tensor;
}

std::string str(int64_t v) { return std::to_string(v); }

void check_mma(const AtomDef& a, const LoopOp& op, const Block& cell, CompileState& s) {
  const std::string knob = "ATOM=" + s.knobs.get_str("ATOM", "fma");
  if (s.target.compute_capability() < a.min_sm)
    throw Error(knob + " needs sm_" + str(a.min_sm) + " or newer (" + a.ptx + "); the target is " +
                s.target.arch + " (use ATOM=fma there)");
  if (a.needs_arch_specific && s.target.arch != "sm_" + str(a.min_sm) + "a")
    throw Error(knob + " (" + a.ptx + ") exists only on the arch-specific target sm_" +
                str(a.min_sm) + "a; the target is " + s.target.arch +
                " (compile with --target sm_90a, or use ATOM=mma_*)");
  const Stmt* red = reduce_loop(cell);
  if (!red) throw Error("t:010_partition_loops: " + knob + ": op '" + op.name + "' has no reduction");
  walk(red->body, [&](const Stmt& st) {
    if (st.kind != StmtKind::Load) return;
    DType t = s.loop.tensor(st.tensor).dtype;
    if (!atom_accepts(a.a_type, t))
      throw Error(knob + " multiplies " + dtype_name(a.a_type) + " operands (" + a.ptx +
                  ") but input " + st.tensor + " is " + dtype_name(t) + "; use the ATOM of " +
                  "its type (" + std::string(a.threads == 128 ? "wgmma_f16, wgmma_bf16, wgmma_tf32"
                                                                  : "mma_f16, mma_bf16, mma_tf32") +
                  " for f32/tf32) or ATOM=fma");
  });
}

// The mma tiers of a contraction's output nest (m, n as in the header comment).
struct MmaTiling {
  int64_t WM, WN, FM, FN, BM, BN, AM, AN;
};

MmaTiling mma_tiling(const AtomDef& a, CompileState& s) {
  MmaTiling t;
  t.AM = a.m, t.AN = a.n;
  const bool wg = is_wgmma(&a);
  bool wm = s.knobs.has("WM"), wn = s.knobs.has("WN");
  if (wm != wn && !wg)
    throw Error("WM and WN go together (warps per block along m and n); set both or neither");
  // wgmma: two consumer warpgroups of one 64 x N atom each (128 x N blocks) by default.
  t.WM = s.knob("WM", wg ? 2 : 2), t.WN = s.knob("WN", wg ? 1 : 2);
  if (t.WM < 1 || t.WN < 1)
    throw Error("ATOM=" + s.knobs.get_str("ATOM", "fma") + " tiles by warps: WM and WN must be "
                "at least 1 (WM=" + str(t.WM) + ",WN=" + str(t.WN) + ")");
  t.FM = s.knob("FM", wg ? 1 : 2), t.FN = s.knob("FN", wg ? 1 : 4);
  if (s.knobs.get_str("CONSUMERS", "cooperative") == "pingpong") {
    // Each of the two consumer warpgroups owns whole tiles of a persistent CTA's tile
    // loop (k:030 hands them out): the tile is one warpgroup's.
    if (!wg)
      throw Error("CONSUMERS=pingpong alternates wgmma warpgroups over whole tiles: it needs "
                  "ATOM=wgmma_* (the atom is " + s.knobs.get_str("ATOM", "fma") + ")");
    if (s.knobs.get_int("PERSISTENT", 0) == 0 || s.knobs.get_int("WARP_SPECIALIZE", 0) == 0)
      throw Error("CONSUMERS=pingpong hands a persistent CTA's tiles to its consumer "
                  "warpgroups in turn: it needs PERSISTENT=1 and WARP_SPECIALIZE=1");
    if (t.WM != 2 || t.WN != 1)
      throw Error("CONSUMERS=pingpong has two consumer warpgroups each owning whole tiles of "
                  "BM = FM*64 rows: WM=2,WN=1 (got WM=" + str(t.WM) + ",WN=" + str(t.WN) +
                  "; a taller tile per warpgroup is FM=2)");
    t.WM = 1;
  }
  t.BM = s.knob("BM", t.WM * t.FM * t.AM), t.BN = s.knob("BN", t.WN * t.FN * t.AN);
  auto agree = [&](const char* b, int64_t got, const char* w, int64_t wv, const char* f,
                   int64_t fv, int64_t av) {
    if (got != wv * fv * av)
      throw Error(std::string(b) + "=" + str(got) + " does not match " + w + "=" + str(wv) + "," +
                  f + "=" + str(fv) + " with " + str(av) + "-wide atoms: with ATOM=" +
                  s.knobs.get_str("ATOM", "mma_*") + " a block tile is " + w + "*" + f + "*" +
                  str(av) + " = " + str(wv * fv * av) +
                  " (leave " + b + " unset or change " + w + "/" + f + ")");
  };
  agree("BM", t.BM, "WM", t.WM, "FM", t.FM, t.AM);
  agree("BN", t.BN, "WN", t.WN, "FN", t.FN, t.AN);
  if (t.WM * t.WN * a.threads > s.target.max_threads_per_block)
    throw Error("WM=" + str(t.WM) + ",WN=" + str(t.WN) + " is " + str(t.WM * t.WN * a.threads) +
                " threads per block; the limit is " + str(s.target.max_threads_per_block) +
                " (use fewer warps, more atoms per warp: FM/FN)");
  return t;
}

// CLUSTER_M x CLUSTER_N: CTAs per thread-block cluster along M and N (sm_90, wgmma with
// warp specialization: the CTAs of a cluster column share B slabs, those of a cluster row
// A slabs, each loading part of a shared slab for all — k:015).
struct ClusterShape {
  int64_t m = 1, n = 1;
};

// Portable cluster sizes: a cluster of up to 8 CTAs launches on any sm_90 GPU; 16 needs
// cudaFuncAttributeNonPortableClusterSizeAllowed, which Loom's launcher does not set.
constexpr int64_t kMaxPortableCluster = 8;

ClusterShape cluster_shape(const AtomDef& a, CompileState& s) {
  const ClusterShape c{s.knob("CLUSTER_M", 1), s.knob("CLUSTER_N", 1)};
  if (c.m == 1 && c.n == 1) return c;
  const std::string knob = "CLUSTER_M=" + str(c.m) + ",CLUSTER_N=" + str(c.n);
  auto pow2 = [](int64_t v) { return v >= 1 && (v & (v - 1)) == 0; };
  if (!pow2(c.m) || !pow2(c.n) || c.m > 4)
    throw Error(knob + ": Loom builds clusters of 1, 2 or 4 CTAs along M and 1, 2, 4 or 8 "
                "along N (powers of two, so each shared slab splits evenly among them)");
  if (c.m * c.n > kMaxPortableCluster)
    throw Error(knob + " is a cluster of " + str(c.m * c.n) + " CTAs; the portable limit is " +
                str(kMaxPortableCluster) + " (16 needs the non-portable cluster attribute, "
                "which Loom's launcher does not set): lower CLUSTER_M or CLUSTER_N");
  if (!is_wgmma(&a))
    throw Error(knob + " shares TMA slabs between the CTAs of a cluster: it needs "
                "ATOM=wgmma_* with STAGE=tma (the target is " + s.target.arch + ")");
  if (s.knobs.get_int("WARP_SPECIALIZE", 0) == 0)
    throw Error(knob + " needs WARP_SPECIALIZE=1: a CTA's slot is refilled by its peers' "
                "producers too, so it is released through mbarriers that every CTA's "
                "consumers arrive on, not by a block barrier");
  return c;
}

// A contraction's block tile and the threads that compute it (a specialized kernel's
// producer warpgroup, added by k:030, not counted): split-K's fixup op is partitioned to
// match it, so that k:058 can hand the tile to those threads.
struct BlockTile {
  int64_t BM = 0, BN = 0, threads = 0, cluster_m = 1, cluster_n = 1;
};

// The leading loop l:022 adds for CLUSTER_K, or nullptr.
const Stmt* cluster_k_loop(const std::vector<const Stmt*>& loops) {
  return !loops.empty() && loops[0]->axis == "cluster_k" ? loops[0] : nullptr;
}

void check_cluster_k(const AtomDef& a, ClusterShape cs, int64_t BM, CompileState& s) {
  const std::string knob = "CLUSTER_K=" + std::to_string(s.knobs.get_int("CLUSTER_K", 1));
  if (!is_wgmma(&a))
    throw Error(knob + " reduces a tile's K slices through the distributed shared memory of "
                "an sm_90 cluster: it needs ATOM=wgmma_* (the atom is " +
                s.knobs.get_str("ATOM", "fma") + ")");
  if (cs.m * cs.n > 1)
    throw Error(knob + " with CLUSTER_M=" + std::to_string(cs.m) + ",CLUSTER_N=" +
                std::to_string(cs.n) + ": a cluster spans either the output tiles (M and N: "
                "shared A and B slabs) or K; use one of them");
  if (s.knobs.get_int("PERSISTENT", 0) != 0)
    throw Error(knob + " ends each CTA with the cluster's reduction of its one tile; "
                "PERSISTENT=1 walks many tiles per CTA: use PERSISTENT=0");
  if (s.knobs.get_str("EPILOGUE", "direct") != "direct")
    throw Error(knob + " keeps the partial tile in shared memory for the cluster's reduction, "
                "which then stores the output directly; EPILOGUE=" +
                s.knobs.get_str("EPILOGUE", "direct") + " does not compose with it: use "
                "EPILOGUE=direct");
  const int64_t c = s.knobs.get_int("CLUSTER_K", 1);
  if (BM % c != 0)
    throw Error(knob + ": each CTA of the cluster finishes BM/" + std::to_string(c) +
                " rows of the tile, and BM=" + std::to_string(BM) + " is not a multiple of " +
                std::to_string(c) + " (choose CLUSTER_K dividing BM)");
}

// Columns of padding per row of a CLUSTER_K partial tile (see the header comment).
constexpr int64_t kClusterPartialPad = 8;

// Accesses of CLUSTER_K's partial, `tensor[lead.., m, n]` after the output loops became
// tiers, move to the tile-by-tile layout: [lead.., tile row, tile column, row in tile,
// column in tile]. `m_tile(m)` gives (tile row, row in tile) of a row index.
void block_partial(Block& cell, const std::string& tensor, const std::string& n_b,
                   const std::function<std::pair<Expr, Expr>(const Expr&)>& m_tile) {
  walk(cell, [&](Stmt& st) {
    if ((st.kind != StmtKind::Load && st.kind != StmtKind::Write) || st.tensor != tensor) return;
    const Expr m = st.index[st.index.size() - 2], n = st.index.back();
    st.index.pop_back();
    st.index.pop_back();
    const auto [mt, mi] = m_tile(m);
    st.index.push_back(mt);
    st.index.push_back(Expr::var(n_b));
    st.index.push_back(mi);
    st.index.push_back(n.substitute({{n_b, Expr(0)}}));
  });
}

TileOp partition_mma(const LoopOp& op, const Stmt& lm, const Stmt& ln,
                     const std::vector<const Stmt*>& loops, const Block& inner,
                     const AtomDef& a, CompileState& s, BlockTile& tile) {
  check_mma(a, op, inner, s);
  const MmaTiling t = mma_tiling(a, s);
  tile = {t.BM, t.BN, t.WM * t.WN * a.threads};
  const ClusterShape cs = cluster_shape(a, s);
  const int64_t CM = cs.m, CN = cs.n;
  tile.cluster_m = CM;
  tile.cluster_n = CN;
  const Stmt* ck = cluster_k_loop(loops);
  if (ck) check_cluster_k(a, cs, t.BM, s);
  const std::string m = lm.var, n = ln.var;
  auto v = [](const std::string& name) { return Expr::var(name); };
  // With CLUSTER_M (CLUSTER_N) > 1 a grid step covers CM block rows (CN block columns),
  // one per CTA of the cluster.
  Expr m_of = (CM > 1 ? v(m + "_b") * (t.BM * CM) + v(m + "_cta") * t.BM : v(m + "_b") * t.BM) +
              v(m + "_w") * (t.FM * t.AM) + v(m + "_a") * t.AM + v(m + "_e");
  Expr n_of = (CN > 1 ? v(n + "_b") * (t.BN * CN) + v(n + "_cta") * t.BN : v(n + "_b") * t.BN) +
              v(n + "_w") * (t.FN * t.AN) + v(n + "_a") * t.AN + v(n + "_e");
  Block cell = inner;
  substitute_block(cell, {{m, m_of}, {n, n_of}});
  if (ck)
    block_partial(cell, op.output, n + "_b", [&](const Expr& row) {
      return std::pair{v(m + "_b"), row.substitute({{m + "_b", Expr(0)}})};
    });
  Block body = {Stmt::If((m_of < lm.extent) && (n_of < ln.extent), std::move(cell))};
  auto wrap = [&](const std::string& var, Expr extent, Tier tier, const std::string& axis) {
    body = {Stmt::For(var, extent, LoopKind::Parallel, axis, std::move(body), tier)};
  };
  wrap(n + "_e", t.AN, Tier::Atom, n);
  wrap(m + "_e", t.AM, Tier::Atom, m);
  wrap(n + "_a", t.FN, Tier::Register, n);
  wrap(m + "_a", t.FM, Tier::Register, m);
  // wgmma: a warpgroup (4 warps, 128 threads) computes each atom together.
  const Tier group = is_wgmma(&a) ? Tier::Warpgroup : Tier::Warp;
  wrap(n + "_w", t.WN, group, n);
  wrap(m + "_w", t.WM, group, m);
  // Two CLUSTER loops (M outer): k:010 numbers the cluster's CTAs rank = m_cta * CN + n_cta.
  if (CN > 1) wrap(n + "_cta", CN, Tier::Cluster, n);
  if (CM > 1) wrap(m + "_cta", CM, Tier::Cluster, m);
  if (ck) wrap(ck->var, ck->extent, Tier::Cluster, ck->axis);
  wrap(n + "_b", ceil_div(ln.extent, t.BN * CN), Tier::Grid, n);
  wrap(m + "_b", ceil_div(lm.extent, t.BM * CM), Tier::Grid, m);
  for (int i = int(loops.size()) - 3; i >= (ck ? 1 : 0); --i)
    wrap(loops[size_t(i)]->var, loops[size_t(i)]->extent, Tier::Grid, loops[size_t(i)]->axis);
  return TileOp{op.name, op.inputs, op.output, std::move(body)};
}

int64_t gcd(int64_t a, int64_t b) { return b == 0 ? a : gcd(b, a % b); }

// splitk_fixup's tiling: the contraction's BM x BN block tile on at most its threads, at
// most BN/V of them along a row (V = 4, 2 or 1 dividing BN: a few columns each) and the
// rest along the rows, so one block of the fixup op is exactly one tile of the split op.
struct FixupTiling { int64_t BM, BN, FM, FN; };
FixupTiling fixup_tiling(const BlockTile& c) {
  int64_t V = 4;
  while (c.BN % V != 0) V /= 2;
  const int64_t TN = gcd(c.BN / V, c.threads);
  const int64_t TM = gcd(c.threads / TN, c.BM);
  return {c.BM, c.BN, c.BM / TM, c.BN / TN};
}

TileOp partition(const LoopOp& op, CompileState& s, BlockTile& tile) {
  // Collect the output nest.
  std::vector<const Stmt*> loops;
  const Block* inner = &op.body;
  while (inner->size() == 1 && (*inner)[0].kind == StmtKind::For &&
         (*inner)[0].loop_kind == LoopKind::Parallel) {
    loops.push_back(&(*inner)[0]);
    inner = &(*inner)[0].body;
  }
  if (loops.size() < 2)
    throw Error("t:010_partition_loops: op '" + op.name +
                "' has fewer than two parallel output loops; Loom tiles 2-D outputs");
  const Stmt& lm = *loops[loops.size() - 2];
  const Stmt& ln = *loops[loops.size() - 1];

  auto dm = default_tile(known(lm.extent, s.sizes));
  auto dn = default_tile(known(ln.extent, s.sizes));
  // The tiling knobs describe the contraction. The other ops of a program (split-K's
  // zero fill and partial-sum reduction, unfused elementwise ops) are bandwidth-bound
  // sweeps: they get small 16x64 blocks of 1x4-cell threads, so the grid has many blocks
  // whatever tile the GEMM uses (a 128x128 reduce grid was one block: 829 us).
  bool contraction = op.name.rfind("matmul", 0) == 0;
  if (contraction)
    if (const AtomDef* a = chosen_mma(s))
      return partition_mma(op, lm, ln, loops, *inner, *a, s, tile);
  if (cluster_k_loop(loops))
    throw Error("CLUSTER_K=" + std::to_string(s.knobs.get_int("CLUSTER_K", 1)) +
                " reduces a tile's K slices through the distributed shared memory of an sm_90 "
                "cluster: it needs ATOM=wgmma_* (the atom is " + s.knobs.get_str("ATOM", "fma") + ")");
  const bool cluster_reduce = op.name == "clusterk_reduce";
  const int64_t c = cluster_reduce ? s.knobs.get_int("CLUSTER_K", 1) : 1;
  int64_t FM, FN, BM, BN;
  if (contraction) {
    FM = s.knob("FM", dm.f), FN = s.knob("FN", dn.f);
    BM = s.knob("BM", std::max(dm.b, FM)), BN = s.knob("BN", std::max(dn.b, FN));
  } else if (op.name == "splitk_fixup" || cluster_reduce) {
    LOOM_CHECK(tile.threads > 0, "the combine op follows the contraction it finishes");
    BlockTile part = tile;
    part.BM /= c;  // t:010 checked that c divides BM (check_cluster_k)
    const FixupTiling f = fixup_tiling(part);
    BM = f.BM, BN = f.BN, FM = f.FM, FN = f.FN;
  } else {
    FM = 1, FN = std::min<int64_t>(4, dn.f);
    BM = std::min<int64_t>(16, dm.b), BN = std::min<int64_t>(64, std::max(dn.b, FN));
  }
  check_tiling("BM", BM, "FM", FM);
  check_tiling("BN", BN, "FN", FN);
  int64_t TM = BM / FM, TN = BN / FN;
  if (contraction) tile = {BM, BN, TM * TN};
  if (TM * TN > s.target.max_threads_per_block)
    throw Error("BM=" + std::to_string(BM) + ",BN=" + std::to_string(BN) + ",FM=" +
                std::to_string(FM) + ",FN=" + std::to_string(FN) + " needs (BM/FM)*(BN/FN) = " +
                std::to_string(TM * TN) + " threads per block; the limit is " +
                std::to_string(s.target.max_threads_per_block) +
                " (raise FM/FN or lower BM/BN)");

  const std::string m = lm.var, n = ln.var;
  Expr mb = Expr::var(m + "_b"), mt = Expr::var(m + "_t"), mr = Expr::var(m + "_r");
  int64_t V = s.knob("VECTORIZE", 4);
  while (V > 1 && FN % V != 0) V /= 2;
  // The atomic fixup's body (load a sum, clear it, store it) and the cluster reduction's
  // sum stay scalar (k:040 widens register-array loads and load-and-accumulate
  // loops only): V = 1 puts consecutive threads on consecutive columns, one 128-byte line
  // per warp access instead of four lines at a 16-byte stride. The partials sum
  // (SPLITK_MODE=partials) is a load-and-accumulate loop: V columns per thread become
  // vector loads.
  const bool partials_sum =
      op.name == "splitk_fixup" && s.knobs.get_str("SPLITK_MODE", "reduce") == "partials";
  if ((op.name == "splitk_fixup" && !partials_sum) || cluster_reduce) V = 1;
  Expr nb = Expr::var(n + "_b"), nt = Expr::var(n + "_t");
  Expr ng = Expr::var(n + "_g"), nv = Expr::var(n + "_v"), nr = Expr::var(n + "_r");
  Expr m_of = mb * BM + mt * FM + mr;
  Expr n_of = V > 1 ? nb * BN + ng * (TN * V) + nt * V + nv : nb * BN + nr * TN + nt;

  // 4: guarded cell.
  Block cell = *inner;
  substitute_block(cell, {{m, m_of}, {n, n_of}});
  if (cluster_reduce)  // block row m_b is row m_b % c of the contraction's tile m_b / c
    block_partial(cell, op.inputs.at(0), n + "_b", [&](const Expr& row) {
      return std::pair{mb / c, (mb % c) * BM + row.substitute({{m + "_b", Expr(0)}})};
    });
  Block body = {Stmt::If((m_of < lm.extent) && (n_of < ln.extent), std::move(cell))};

  // 1-3: the tiers, innermost first.
  auto wrap = [&](const std::string& var, Expr extent, Tier tier, const std::string& axis) {
    body = {Stmt::For(var, extent, LoopKind::Parallel, axis, std::move(body), tier)};
  };
  if (V > 1) {
    wrap(n + "_v", V, Tier::Register, n);
    if (FN / V > 1) wrap(n + "_g", FN / V, Tier::Register, n);
    else substitute_block(body, {{n + "_g", Expr(0)}});
  } else {
    wrap(n + "_r", FN, Tier::Register, n);
  }
  wrap(m + "_r", FM, Tier::Register, m);
  int64_t WM = contraction ? s.knob("WM", 0) : 0, WN = contraction ? s.knob("WN", 0) : 0;
  if ((WM == 0) != (WN == 0))
    throw Error("WM and WN go together (warps per block along m and n); set both or neither");
  if (WM > 0) {
    if (TM % WM != 0 || TN % WN != 0 || (TM / WM) * (TN / WN) != 32)
      throw Error("WM=" + std::to_string(WM) + ",WN=" + std::to_string(WN) + " must split the " +
                  std::to_string(TM) + "x" + std::to_string(TN) +
                  " threads of the block into warps of 32 lanes: (BM/FM/WM)*(BN/FN/WN) = " +
                  std::to_string((TM / std::max<int64_t>(WM, 1)) * (TN / std::max<int64_t>(WN, 1))) +
                  ", needs 32");
    int64_t LM = TM / WM, LN = TN / WN;
    substitute_block(body, {{m + "_t", Expr::var(m + "_w") * LM + Expr::var(m + "_l")},
                            {n + "_t", Expr::var(n + "_w") * LN + Expr::var(n + "_l")}});
    wrap(n + "_l", LN, Tier::Thread, n);
    wrap(m + "_l", LM, Tier::Thread, m);
    wrap(n + "_w", WN, Tier::Warp, n);
    wrap(m + "_w", WM, Tier::Warp, m);
  } else {
    wrap(n + "_t", TN, Tier::Thread, n);
    wrap(m + "_t", TM, Tier::Thread, m);
  }
  wrap(n + "_b", ceil_div(ln.extent, BN), Tier::Grid, n);
  wrap(m + "_b", ceil_div(lm.extent, BM), Tier::Grid, m);
  for (int i = int(loops.size()) - 3; i >= 0; --i)
    wrap(loops[i]->var, loops[i]->extent, Tier::Grid, loops[i]->axis);

  return TileOp{op.name, op.inputs, op.output, std::move(body)};
}

// The arrival counters k:058_splitk_fixup fuses splitk_fixup with: one per block tile of
// the split op ([batch.., m tiles, n tiles], a cluster's CTAs past M included), zeroed
// by the runtime and left zeroed by the kernel (TensorDecl::zero_init).
TensorDecl tile_counters(const LoopOp& fixup, const BlockTile& tile, const ProgramBase& p) {
  TensorDecl c;
  c.name = "splitk_count";
  for (int i = 0; p.has_tensor(c.name); ++i) c.name = "splitk_count" + std::to_string(i);
  c.dtype = DType::F32;
  c.role = TensorRole::Temp;
  c.zero_init = true;
  std::vector<Expr> extents;
  for (const Block* b = &fixup.body; b->size() == 1 && (*b)[0].kind == StmtKind::For;
       b = &(*b)[0].body)
    extents.push_back((*b)[0].extent);
  LOOM_CHECK(extents.size() >= 2, "splitk_fixup has (batch..,) m, n loops");
  const Expr M = extents[extents.size() - 2], N = extents.back();
  extents.pop_back();
  extents.pop_back();
  extents.push_back(ceil_div(M, tile.BM * tile.cluster_m) * tile.cluster_m);
  extents.push_back(ceil_div(N, tile.BN * tile.cluster_n) * tile.cluster_n);
  c.shape = extents;
  return c;
}

// CLUSTER_K's partial [c, lead.., M, N] stored tile by tile (block_partial).
void block_partial_shape(TensorDecl& partial, const BlockTile& tile) {
  std::vector<Expr>& sh = partial.shape;
  const Expr M = sh[sh.size() - 2], N = sh.back();
  sh.pop_back();
  sh.pop_back();
  sh.push_back(ceil_div(M, tile.BM));
  sh.push_back(ceil_div(N, tile.BN));
  sh.push_back(tile.BM);
  sh.push_back(tile.BN + kClusterPartialPad);
}

}  // namespace

Pass pass_partition_loops() {
  return Pass{"t:010_partition_loops", Level::Loop, Level::Tile,
              "output loops factored GRID > THREAD > REGISTER; every cell guarded by its "
              "bounds",
              {"ATOM", "ACC", "BM", "BN", "FM", "FN", "WM", "WN", "VECTORIZE", "CLUSTER_M",
               "CLUSTER_N"},
              [](CompileState& s) {
                LOOM_CHECK(!s.graph.attention(), "t:012 lowers attention; the pipeline skips t:010");
                TileProgram t;
                static_cast<ProgramBase&>(t) = s.loop;
                BlockTile tile;
                for (const auto& op : s.loop.ops) {
                  t.ops.push_back(partition(op, s, tile));
                  if (op.name == "splitk_fixup") t.tensors.push_back(tile_counters(op, tile, t));
                  if (op.name == "clusterk_reduce")
                    block_partial_shape(t.tensor(op.inputs.at(0)), tile);
                }
                s.tile = std::move(t);
                s.level = Level::Tile;
              }};
}

}  // namespace loom
