// t:048_stream_k — a persistent kernel's last waves split by K iterations (STREAM_K=1).
//
// A persistent grid of P CTAs (clusters) over T output tiles runs ceil(T / P) rounds; when
// T / P is not whole, the last round leaves P - T % P of them idle for a whole tile's
// mainloop (4096 x 14336 x 4096 bf16 on H100: 896 cluster tiles on 66 clusters, 13.58
// waves, 14 rounds; bench/NOTES.md, 2026-11-23, the last wave). Stream-K (Osama et al., "Stream-K:
// Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on the
// GPU") gives every CTA the same number of K iterations instead: here the first
// W = floor(T / P) - 1 waves stay whole tiles (data-parallel) and the remaining
// R = T - W * P tiles (between one and two waves) are cut into their R * KT slab
// iterations, CTA c taking the contiguous range [g0, g1) = [c * R * KT / P,
// (c + 1) * R * KT / P). Each range is at least KT iterations long, so a tile is split
// in at most two parts: its head (k from 0, the last unit of CTA c) and its tail (the
// first unit of CTA c + 1). The persistent loop walks *units*:
//
//   for t_i in 0..W + (g1 - 1) / KT - g0 / KT + 1  # persistent
//     let tile, k_lo, k_len      (t_i < W: cta + t_i * P, 0, KT; after: the range's tiles)
//     let ring_base              (slabs this CTA issued before the unit; t:050's ring count)
//     acc = 0
//     for k_r in 0..k_len reduce: (the slab loop, k_o = k_lo + k_r)
//     if sk_part: sk_ws[b, head, ...] = acc            (a split unit stores its partial)
//     let sk_last = tile.arrive sk_count[b, ...] of 2 when sk_part   (1 for whole tiles)
//     if sk_part && sk_last: acc += sk_ws[b, 1 - head, ...]   (the other part, complete)
//     if sk_last: epilogue
//
// where b = cta + head is the range boundary inside the tile (boundary c + 1 between CTAs
// c and c + 1). Both parts store and arrive, so neither waits for the other: the one that
// arrives second (its acquire orders the other's stores before its loads) adds the other
// part and runs the epilogue; the counter is per boundary and per consumer warpgroup of
// each CTA of the cluster (a warpgroup's 64-row slice is its own: it arrives alone, on
// the named barrier of its epilogue, k:053), and the last arrival resets it. The partial
// tiles go to an f32 workspace [P + 1, 2, <batch, cluster rank, warpgroup loops>, <the
// accumulator>] that is written before it is read (no clearing); the store and the add are
// the accumulator's register nests, lowered by k:026 like the epilogue (each thread its
// own cells).
// What it costs (H100, bench/NOTES.md, 2026-11-23, stream-K): CTAs at different K offsets of
// neighbouring tiles no longer read the same A and B slabs at the same time, so the split
// phase loses the L2 reuse of the data-parallel waves (hit rate 76% -> 37% at 4096 x 4096
// x 16384) and becomes DRAM-bound: on the Hopper GEMM shapes it is 3-38% slower, and off by
// default; where it can pay is a long partial wave (T / P = 2.18 at 3072 x 3072 x 4096).
// Needs: PERSISTENT=1 (t:027's units), warpgroup MMAs under WARP_SPECIALIZE=1 with
// cooperative consumers (a unit is the cluster's; ping-pong splits tiles between
// warpgroups), one accumulator, constant K. With T <= P or T % P == 0 there is no partial
// wave to balance and the program is left as it is.
#include <algorithm>

#include "ir/error.h"
#include "passes/passes.h"

namespace loom {
namespace {

struct TierLoop {
  std::string var;
  int64_t extent;
  Tier tier;
};

// The persistent loop and the CTA-level loops (cluster, warpgroup, ...) above it.
Stmt* find_persistent(Block& b, std::vector<TierLoop>& tiers, int64_t& P) {
  for (Stmt& s : b) {
    if (s.kind != StmtKind::For) continue;
    if (s.axis == "persistent") return &s;
    const size_t depth = tiers.size();
    if (s.tier == Tier::Grid && s.var == "cta") {
      // A run-time tile count (t:027 with a symbolic M or N) sizes the grid at launch;
      // the stream-K split is planned here, from the count.
      if (!s.extent.is_const())
        throw Error("STREAM_K=1 divides the tiles' K iterations among the CTAs when compiling "
                    "and needs a constant tile count; this grid is " + s.extent.str() +
                    " CTAs (a run-time size): bind the sizes (--dims, PlanOptions::sizes) or "
                    "use STREAM_K=0");
      P = s.extent.const_value();
    } else if (s.tier != Tier::None) {
      if (!s.extent.is_const()) return nullptr;
      tiers.push_back({s.var, s.extent.const_value(), s.tier});
    }
    if (Stmt* p = find_persistent(s.body, tiers, P)) return p;
    tiers.resize(depth);
  }
  return nullptr;
}

// The innermost statement of a register nest (a chain of single-statement loops).
Stmt& innermost(Stmt& s) {
  Stmt* x = &s;
  while (x->kind == StmtKind::For && x->body.size() == 1) x = &x->body[0];
  return *x;
}

void stream_k(TileOp& op, TileProgram& p) {
  std::vector<TierLoop> tiers;
  int64_t P = 0;
  Stmt* loop = find_persistent(op.body, tiers, P);
  if (!loop || P < 1)
    throw Error("STREAM_K=1 splits the units of a persistent tile loop: op " + op.name +
                " has none (set PERSISTENT=1 with constant sizes)");
  // Other grid loops (a batch) run schedules of their own: they index the workspace too.
  for (const TierLoop& t : tiers)
    if (t.tier != Tier::Grid && t.tier != Tier::Cluster && t.tier != Tier::Warpgroup)
      throw Error("STREAM_K=1 arrives once per consumer warpgroup on a split tile's counter; op " +
                  op.name + " splits its CTA into " + tier_name(t.tier) + "s (loop " + t.var +
                  "): use ATOM=wgmma_* with cooperative consumers");
  const std::string t_i = loop->var;
  // T = the tiles over every CTA's share; each share is `extent` at that cta.
  int64_t T = 0;
  for (int64_t c = 0; c < P; ++c) {
    const Expr n = loop->extent.substitute({{"cta", Expr(c)}});
    if (!n.is_const())
      throw Error("STREAM_K=1 needs a constant number of output tiles; op " + op.name +
                  " has " + loop->extent.str() + " per CTA");
    T += n.const_value();
  }
  if (T <= P || T % P == 0) return;  // no partial wave

  Block& body = loop->body;
  if (body.empty() || body[0].kind != StmtKind::Let || body[0].var != "tile")
    throw Error("t:048_stream_k: the persistent loop of op " + op.name +
                " does not start with t:027's `let tile`");
  // The slab loop, the accumulator and its zeroing before it, the epilogue after it.
  size_t k_at = body.size();
  for (size_t i = 0; i < body.size(); ++i) {
    bool staged = false;
    walk(body[i].body, [&](const Stmt& x) { staged |= x.kind == StmtKind::Stage; });
    if (body[i].kind == StmtKind::For && body[i].loop_kind == LoopKind::Reduce && staged) {
      k_at = i;
      break;
    }
  }
  if (k_at == body.size())
    throw Error("STREAM_K=1 splits the staged slab loop of each tile; op " + op.name +
                " has none under its persistent loop (STAGE=tma)");
  Stmt& k_loop = body[k_at];
  if (!k_loop.extent.is_const())
    throw Error("STREAM_K=1 needs a constant K: op " + op.name + " runs " + k_loop.extent.str() +
                " slabs per tile (bind the sizes with --dims)");
  const int64_t KT = k_loop.extent.const_value();
  std::vector<size_t> zeroings;
  for (size_t i = 0; i < k_at; ++i)
    if (body[i].kind == StmtKind::For && innermost(body[i]).kind == StmtKind::Init)
      zeroings.push_back(i);
  if (zeroings.size() != 1)
    throw Error("STREAM_K=1 stores one accumulator per split tile; op " + op.name + " zeroes " +
                std::to_string(zeroings.size()) + " before its slab loop");
  Stmt zeroing = body[zeroings[0]];
  const std::string acc = innermost(zeroing).dst;
  std::vector<Expr> acc_shape;
  for (size_t i = 0; i < k_at; ++i)
    if (body[i].kind == StmtKind::Alloc && body[i].dst == acc) acc_shape = body[i].index;
  if (acc_shape.empty())
    throw Error("t:048_stream_k: op " + op.name + " zeroes " + acc + " without allocating it");

  // The unit walk. W whole-tile waves, then R tiles' iterations over the P CTAs.
  const int64_t W = T / P - 1, D = W * P, R = T - D, I = R * KT;
  const Expr cta = Expr::var("cta"), ti = Expr::var(t_i);
  const Expr g0 = Expr::var("sk_g0"), g1 = Expr::var("sk_g1"), unit = Expr::var("sk_unit");
  const Expr tile = Expr::var("sk_tile"), lo = Expr::var("sk_lo"), hi = Expr::var("sk_hi");
  const Expr k_lo = Expr::var("k_lo"), k_len = Expr::var("k_len");
  Block lets = {
      Stmt::Let("sk_g0", cta * I / P),
      Stmt::Let("sk_g1", (cta + 1) * I / P),
      Stmt::Let("sk_unit", Expr::make(Expr::Kind::Le, Expr(W), ti)),
      Stmt::Let("sk_tile", g0 / KT + ti - W),
      Stmt::Let("sk_lo", max(g0, tile * KT)),
      Stmt::Let("sk_hi", min(g1, tile * KT + KT)),
      Stmt::Let("tile", cta + ti * P + unit * (tile + D - cta - ti * P)),
      Stmt::Let("k_lo", unit * (lo - tile * KT)),
      Stmt::Let("k_len", Expr(KT) + unit * (hi - lo - KT)),
      Stmt::Let("ring_base", ti * KT + unit * (lo - g0 + W * KT - ti * KT)),
      Stmt::Let("sk_part", k_len < Expr(KT)),
      Stmt::Let("sk_head", Expr::make(Expr::Kind::Eq, k_lo, Expr(0))),
      Stmt::Let("sk_b", cta + Expr::var("sk_head")),
  };
  const Expr g0c = cta * I / P, g1c = (cta + 1) * I / P;
  loop->extent = Expr(W) + (g1c - 1) / KT - g0c / KT + 1;

  // The slab loop over the unit's iterations.
  Block k_body = k_loop.body;
  substitute_block(k_body, {{k_loop.var, k_lo + Expr::var("k_r")}});
  Stmt units_k = Stmt::For("k_r", k_len, LoopKind::Reduce, k_loop.axis, k_body, k_loop.tier);
  units_k.unroll = k_loop.unroll;

  // The workspace and the counters.
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int i = 0; p.has_tensor(name); ++i) name = base + std::to_string(i);
    return name;
  };
  TensorDecl ws;
  ws.name = fresh("streamk_ws");
  ws.dtype = DType::F32;
  ws.role = TensorRole::Temp;
  ws.shape = {Expr(P + 1), Expr(2)};
  TensorDecl count;
  count.name = fresh("streamk_count");
  count.dtype = DType::F32;
  count.role = TensorRole::Temp;
  count.zero_init = true;
  count.shape = {Expr(P + 1)};
  std::vector<Expr> owner;  // the batch, the CTA's rank in its cluster, the warpgroup
  for (const TierLoop& t : tiers) {
    ws.shape.push_back(Expr(t.extent));
    count.shape.push_back(Expr(t.extent));
    owner.push_back(Expr::var(t.var));
  }
  ws.shape.insert(ws.shape.end(), acc_shape.begin(), acc_shape.end());
  p.tensors.push_back(ws);
  p.tensors.push_back(count);
  op.inputs.push_back(ws.name);
  op.inputs.push_back(count.name);

  const Expr b = Expr::var("sk_b"), head = Expr::var("sk_head");
  auto nest = [&](Expr part, bool store) {
    Stmt n = zeroing;
    Stmt& cell = innermost(n);
    std::vector<Expr> at = {b, part};
    at.insert(at.end(), owner.begin(), owner.end());
    at.insert(at.end(), cell.dst_index.begin(), cell.dst_index.end());
    if (store) {
      cell = Stmt::Write(ws.name, at, Operand::value(acc, cell.dst_index));
      return n;
    }
    const std::vector<Expr> idx = cell.dst_index;
    Stmt add = Stmt::Accum(acc, Operand::value("sk_v"));
    add.dst_index = idx;
    Stmt outer = n;  // the innermost loop gets two statements: load, add
    Stmt* x = &outer;
    while (x->kind == StmtKind::For && x->body.size() == 1 && x->body[0].kind == StmtKind::For)
      x = &x->body[0];
    x->body = {Stmt::Load("sk_v", ws.name, at), add};
    return outer;
  };
  std::vector<Expr> counter_at = {b};
  counter_at.insert(counter_at.end(), owner.begin(), owner.end());
  const Expr part = Expr::var("sk_part"), last = Expr::var("sk_last");
  Block tail = {
      Stmt::If(part, {nest(head, true)}),
      Stmt::TileArrive("sk_last", count.name, Expr(0), 2, 128, part),
      Stmt::If(part && last, {nest(Expr(1) - head, false)}),
  };
  tail[1].index = counter_at;
  Block epilogue(body.begin() + long(k_at) + 1, body.end());

  Block out = lets;
  out.insert(out.end(), body.begin() + 1, body.begin() + long(k_at));
  out.push_back(units_k);
  out.insert(out.end(), tail.begin(), tail.end());
  out.push_back(Stmt::If(last, epilogue));
  body = std::move(out);
}

}  // namespace

Pass pass_stream_k() {
  return Pass{"t:048_stream_k", Level::Tile, Level::Tile,
              "with STREAM_K=1 a persistent kernel's last one to two waves are split by K "
              "iterations evenly over its CTAs; a split tile's two parts meet through an f32 "
              "workspace and a counter, the second to arrive running the epilogue",
              {"STREAM_K"},
              [](CompileState& s) {
                if (s.knob("STREAM_K", 0) == 0) return;
                auto need = [&](const char* knob, const std::string& want, const std::string& have) {
                  if (have != want)
                    throw Error(std::string("STREAM_K=1 needs ") + knob + "=" + want + " (it is " +
                                have + "): " +
                                "the split tiles are units of a persistent, warp-specialized "
                                "TMA kernel whose consumer warpgroups share each tile");
                };
                need("PERSISTENT", "1", std::to_string(s.knobs.get_int("PERSISTENT", 0)));
                need("WARP_SPECIALIZE", "1", std::to_string(s.knobs.get_int("WARP_SPECIALIZE", 0)));
                need("STAGE", "tma", s.knobs.get_str("STAGE", "sync"));
                need("CONSUMERS", "cooperative", s.knobs.get_str("CONSUMERS", "cooperative"));
                need("SPLITK", "1", std::to_string(s.knobs.get_int("SPLITK", 1)));
                need("CLUSTER_K", "1", std::to_string(s.knobs.get_int("CLUSTER_K", 1)));
                for (auto& op : s.tile.ops) stream_k(op, s.tile);
              }};
}

}  // namespace loom
