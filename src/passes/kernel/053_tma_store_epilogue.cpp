// k:053_tma_store_epilogue — a wgmma kernel's accumulator tile leaves through shared
// memory and TMA stores (EPILOGUE=tma_store).
//
// The direct epilogue stores each thread's cells where they lie (2 x 4 B per thread per
// 8 columns) and keeps the consumer warps busy issuing them while nothing multiplies.
// Here the consumers write the tile, after the fused ops and the rounding to the output
// dtype, into a shared tile, and one thread per owner hands it to the copy engine
// (`cp.async.bulk.tensor` shared -> global): the store runs while the consumers go on to
// the next tile's mainloop, and the tensor map clips boxes at the M/N edges, so the
// shared writes need no bounds guards. Steps, for each kernel that issues wgmma:
//  1. The epilogue: the statements after the mainloop in the block that holds both (the
//     kernel body, a consumer arm, the persistent tile loop's body). Its global stores
//     write one output, 2-D or a bmm's [B, M, N] (a rank-3 map, boxes of one entry, so
//     each entry's edges clip), never atomically.
//  2. Each store's flat offset is `row * N + col` as k:010 built it; row and col split
//     into the block's part (blockIdx, the tile loop: the TMA box corner) and the cell's
//     part (threadIdx and the epilogue's loops). Checked at random points.
//  3. Every thread and loop iteration of the consumers is enumerated: the cells must tile
//     the block tile R x C exactly once. When each consumer warpgroup's cells form an
//     equal rectangle (WM x WN warpgroups), each warpgroup owns its part: its own named
//     barrier (id 1 + warpgroup, 128 threads) and its own storing thread, so the two
//     consumer warpgroups never wait for each other; otherwise all consumers share one.
//  4. The tile `<out>_s[C / S, R, S]` is stored as column strips S elements wide, S the
//     widest of 128 B (64 bf16, 32 f32) that divides the owner's columns: one strip row
//     is one span of the 128-byte swizzle, which TMA boxes must match (inner box extent
//     x element bytes = swizzle span), and the swizzle makes the 8 rows that a warp's
//     32-bit stores touch land in 8 distinct 16-byte bank groups (conflict-free). Each
//     owner stores its part as boxes of its rows x S.
//  5. Rewrite: `if storing: bulk.wait.read 0; bar.sync` (the previous tile's store has
//     finished reading the tile), the stores retargeted to the tile with their guards
//     turned into load predicates (loads past the edges yield 0; the cells they feed are
//     clipped), `fence.proxy.async` (the copy engine reads through the async proxy),
//     `bar.sync`, `if storing: tma.store boxes; bulk.commit`. After the tile loop (or the
//     epilogue, without one) the storing threads wait for their last reads before exit.
//
// EPI_BUFFERS=N > 0 (the large-wgmma default, N = 2): the tile is streamed instead. A
// 128 x 256 bf16 tile is 64 KB, and kept whole it cost the fourth ring stage (STAGES=4 x
// 48 KB slabs no longer fit 227 KB): on H100 (2026-11-22) K = 8192 lost 3% for it (0.97x
// -> 0.94x), and a 4-byte output's 128 KB tile did not fit at all, so the whole tile was
// only worth it for K <= 4096. cuBLAS's kernel keeps 4 stages plus ~40 KB of epilogue
// staging. Streamed: each owner writes its columns strip by strip (S columns, its rows)
// into N buffers `<out>_s[N, R, S]` (2 x 128 x 64 x 2 B = 32 KB, any output type):
//   if storing: bulk.wait.read N-1   (the store that last read this buffer, strip j - N,
//                                     perhaps of the previous tile, has finished reading)
//   bar.sync (owner); strip j's statements; fence.proxy.async; bar.sync (owner)
//   if storing: tma.store strip j; bulk.commit
// so the strip's stores overlap the next strips' fused epilogue and the next tile's
// mainloop. The epilogue's register loops are unrolled and its statements sorted by strip
// (a thread's m64nN accumulator holds columns in groups of 8, values 4j..4j+3 for columns
// 8j..8j+7, so strip s is the contiguous run of values 32s..32s+31 of an n256 atom).
// 16-bit strips are written with stmatrix.x4 (STMATRIX=1): 8 values per instruction instead
// of 4 st.shared.b32; the 128-byte swizzle that makes the TMA box keeps each 16-byte row
// whole and puts a matrix's 8 rows in 8 distinct bank groups (conflict-free). The costs:
// 2 named barriers per strip instead of per tile (EPI_SYNC=2; 1 with EPI_SYNC=1, below),
// and a wait for strip j - N's reads.
// Owners must be stacked along M (WN=1): their strips then share the buffers' layout.
//
// EPI_SYNC=1 (the default with N >= 2 buffers dividing the strips): one named barrier per
// strip instead of two. The storing thread's wait moves in front of the barrier that
// hands strip j to the copy engine, and waits one strip further (bulk.wait.read N-2):
//   strip j's statements; fence.proxy.async
//   if storing: bulk.wait.read N-2    (the stores before strip j issue except the newest
//                                      N-2 have read their buffers: strip j+1-N's, the one
//                                      strip j+1 writes next, is free)
//   bar.sync (owner)
//   if storing: tma.store strip j; bulk.commit
// Every strip's buffer was last read by the store N strips earlier (N divides the strips,
// so this holds across tiles: the next tile's strip 0 after this tile's strip S-N), and
// that store was retired before the barrier the writers of strip j last passed, so the
// barrier in front of each strip's writes (EPI_SYNC=2's first) orders nothing that is
// not ordered already. The wait is as far behind its store as EPI_SYNC=2's: both come one
// strip's writes after the store they wait for was issued. Between two tiles of the
// 128x256 default that is 4 BAR.SYNC per consumer warpgroup instead of 8. With one
// buffer, or N not dividing the strips (BN=192: strip 0 reuses the newest store's
// buffer), EPI_SYNC=1 keeps the two barriers (the wait must follow the last store).
//
// EPI_BUFFERS = T x strips (T >= 2) in a persistent tile loop: a ring across tiles. The
// buffers form T groups of one tile's strips, tile t_i writing group t_i % T, and the waits
// above count N = T x strips stores back. With N = strips (the ring within a tile) strip j
// waits for this tile's strip j - N + 1, whose store was issued a strip's writes earlier:
// a store-bound kernel (a bmm's Q.K^T: K = 64..128, a huge output) stalls its consumers
// there while the copy engine, backed up behind the writes to memory, reads the buffer.
// With T = 2 the store waited for is the previous tile's, issued a mainloop earlier, so
// the consumers go on while up to two tiles' stores stream. Each strip's writes and stores
// add `t_i % T x strips x R x S` (whole swizzle repeats: the XOR pattern is unchanged).
// Not with stream-K (the epilogue runs for some tiles only: the group of tile t_i would no
// longer hold the store N strips back) or without a tile loop (no next tile: N caps at the
// strips, as a bigger EPI_BUFFERS always did).
//
// EPILOGUE=smem on a warp-specialized wgmma kernel (k:054 stages the others): the same
// strips, but the owner's threads copy them out instead of the copy engine, for outputs
// whose rows a tensor map cannot address (a row pitch that is not a multiple of 16 B:
// GPT-2's 50257-column LM head, a ragged N). The direct epilogue's stores there are
// scalars scattered over 8 rows per warp instruction (2 bytes a lane: quarter-used
// sectors); the copy has each warp write 32 consecutive elements of one row, as wide as
// every row start provably allows (scalars for an odd N), under `row < M - r0` and
// `col < N - c0`. Per strip: the statements (stmatrix into the swizzled buffer), the
// owner's barrier, the copy. Strip j + 1 writes the buffer that strip j + 1 - N's copy
// read, and every copier finished that copy before it passed strip j's barrier, so with
// N >= 2 buffers dividing the strips one barrier per strip orders it (the next tile's
// strip 0 after this tile's strip S - N alike; EPI_SYNC=1, the default); otherwise, or with
// EPI_SYNC=2, a barrier also precedes each strip's writes. No proxy fence, bulk group or
// drain: the generic proxy writes and reads. The copy is synchronous — the consumers
// store before the next tile's mainloop — which is what the TMA store saves and what an
// aligned output keeps (bench/NOTES.md, 2026-11-30, has a design for overlapping it).
#include <algorithm>
#include <optional>
#include <set>

#include "atoms/atoms.h"
#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

constexpr int64_t kWarpgroup = 128;
constexpr int64_t kSpanBytes = 128;  // the widest TMA swizzle

bool holds(const Stmt& s, const std::function<bool(const Stmt&)>& pred) {
  bool found = false;
  walk(Block{s}, [&](const Stmt& x) { found |= pred(x); });
  return found;
}

// A statement of the epilogue's store, with what encloses it inside the epilogue.
struct Site {
  Stmt* store = nullptr;
  std::vector<std::pair<std::string, int64_t>> loops;  // epilogue loops, outermost first
  Expr row, col;                                       // the cell's part
  Expr row_block, col_block;                           // the block's part
  Expr batch_block = Expr(0);                          // a batch's entry ([B, M, N] outputs)
  int64_t strip = -1;  // EPI_BUFFERS: the column strip its cells lie in
};

// Where the tile goes: an owner's threads and its rectangle of the block tile.
struct Owner {
  int64_t first_thread = 0, threads = 0;
  int64_t r0 = 0, c0 = 0, rows = 0, cols = 0;
};

class TmaStoreEpilogue {
 public:
  TmaStoreEpilogue(CompileState& s, KernelOp& k)
      : s_(s), p_(s.kernel), k_(k), buffers_(s.knob("EPI_BUFFERS", 0)),
        sync_(s.knob("EPI_SYNC", 1)), stmatrix_(s.knob("STMATRIX", 1) != 0),
        copy_(s.knobs.get_str("EPILOGUE", "direct") == "smem") {}

  void run() {
    locate(k_.body);
    if (!epi_) refuse("its global stores do not follow the wgmma mainloop in one block");
    if (buffers_ > 0) unroll_epilogue();
    decompose();
    enumerate();
    if (buffers_ > 0) plan_strips();
    if (copy_) rewrite_copy();
    else rewrite();
    check_resources();
  }

 private:
  const char* mode() const { return copy_ ? "EPILOGUE=smem" : "EPILOGUE=tma_store"; }
  [[noreturn]] void refuse(const std::string& why) const {
    throw Error(std::string(mode()) + " cannot take kernel " + k_.name + ": " + why +
                "; use EPILOGUE=direct");
  }

  static bool is_wgmma(const KernelOp& k, const Stmt& s) {
    if (s.kind != StmtKind::Atom) return false;
    const WarpAtom* w = find_warp_atom(k, s.atom);
    return w && w->threads == kWarpgroup;
  }
  // Stream-K's partial tiles (t:048) go to its workspace before the epilogue, not through it.
  bool global_write(const Stmt& s) const {
    return s.kind == StmtKind::Write && p_.tensor(s.tensor).role != TensorRole::Shared &&
           !is_stream_k_workspace(s.tensor);
  }

  // ---- step 1 ----

  // Descends into the one statement that holds every global write, collecting the Lets,
  // loops and arm conditions on the way, until a block holds the mainloop beside them.
  void locate(Block& b) {
    std::vector<size_t> writes, mains;
    for (size_t i = 0; i < b.size(); ++i) {
      if (holds(b[i], [&](const Stmt& x) { return global_write(x); })) writes.push_back(i);
      if (holds(b[i], [&](const Stmt& x) { return is_wgmma(k_, x); })) mains.push_back(i);
    }
    if (writes.empty()) return;
    if (!mains.empty() && mains.back() < writes.front()) {
      epi_ = &b;
      e0_ = writes.front();
      e1_ = writes.back() + 1;
      for (size_t i = 0; i < e0_; ++i)
        if (b[i].kind == StmtKind::Let) lets_[b[i].var] = b[i].value;
      // Stream-K (t:048): `if sk_last: epilogue`, decided by each group of a tile arrival.
      if (e1_ == e0_ + 1 && b[e0_].kind == StmtKind::If) {
        const Expr cond = b[e0_].cond;
        for (size_t i = 0; i < e0_; ++i)
          if (b[i].kind == StmtKind::TileArrive && cond.is_var() && cond.var_name() == b[i].var)
            decided_by_ = b[i].value.const_value();
        if (decided_by_ == 0)
          refuse("its stores sit under `if " + cond.str() + "`, which no tile arrival decides");
        epilogue_cond_ = cond;
        Block& inner = b[e0_].body;
        std::vector<size_t> in;
        for (size_t i = 0; i < inner.size(); ++i)
          if (holds(inner[i], [&](const Stmt& x) { return global_write(x); })) in.push_back(i);
        epi_ = &inner;
        e0_ = in.front();
        e1_ = in.back() + 1;
        for (size_t i = 0; i < e0_; ++i)
          if (inner[i].kind == StmtKind::Let) lets_[inner[i].var] = inner[i].value;
      }
      return;
    }
    if (writes.size() != 1) return;
    const size_t i = writes.front();
    for (size_t j = 0; j < i; ++j)
      if (b[j].kind == StmtKind::Let) lets_[b[j].var] = b[j].value;
    Stmt& s = b[i];
    if (s.kind == StmtKind::For) {
      tile_loop_ = {&b, i};
      locate(s.body);
    } else if (s.kind == StmtKind::If) {
      consumer_cond_ = s.cond;
      locate(s.body);
    } else if (s.kind == StmtKind::Specialize) {
      for (Stmt& arm : s.body)
        if (holds(arm, [&](const Stmt& x) { return global_write(x); })) {
          consumer_cond_ = arm.cond;
          locate(arm.body);
        }
    }
  }

  // `e` with every Let in scope substituted, down to threadIdx, loop variables, blockIdx
  // and the sizes.
  Expr full(Expr e) const {
    for (int round = 0; round < 16; ++round) {
      std::set<std::string> vars;
      e.collect_vars(vars);
      std::map<std::string, Expr> repl;
      for (const std::string& v : vars)
        if (auto it = lets_.find(v); it != lets_.end()) repl[v] = it->second;
      if (repl.empty()) return e;
      e = e.substitute(repl);
    }
    LOOM_CHECK(false, "k:053: Lets nest deeper than 16");
  }

  // The cell's part of an index: what depends on the thread or an epilogue loop.
  bool local_term(const Expr& t) const {
    if (t.is_const()) return true;
    const Expr f = full(t);
    if (f.is_const() || f.uses("threadIdx.x")) return true;
    for (const auto& v : epilogue_vars_)
      if (f.uses(v)) return true;
    return false;
  }

  // ---- step 1b (EPI_BUFFERS) ----

  // Strips are written one after the other, but one register-loop iteration's statements
  // span several strips (an m64n256 atom's 128 values per thread cover 4 of them): the
  // epilogue's register loops (constant extents, which codegen unrolls anyway) are
  // unrolled here, so that each statement belongs to one strip. Every copy of a body with
  // more than one iteration gets its own names for the values it defines (SSA per scope).
  void unroll_epilogue() {
    Block& b = *epi_;
    Block out;
    for (size_t i = e0_; i < e1_; ++i) unroll_into(std::move(b[i]), out);
    b.erase(b.begin() + long(e0_), b.begin() + long(e1_));
    b.insert(b.begin() + long(e0_), std::make_move_iterator(out.begin()),
             std::make_move_iterator(out.end()));
    e1_ = e0_ + out.size();
  }

  void unroll_into(Stmt s, Block& out) {
    if (s.kind == StmtKind::If) {
      Block body;
      for (Stmt& c : s.body) unroll_into(std::move(c), body);
      s.body = std::move(body);
    }
    if (s.kind != StmtKind::For) {
      out.push_back(std::move(s));
      return;
    }
    if (s.tier != Tier::Register || !s.extent.is_const())
      refuse("EPI_BUFFERS sorts the epilogue by column strip, and its loop `" + s.var +
             "` is not a constant register loop; use EPI_BUFFERS=0");
    std::set<std::string> values, ints;
    walk(s.body, [&](const Stmt& x) {
      if (x.kind == StmtKind::Let) ints.insert(x.var);
      else if (!x.dst.empty() && x.dst_index.empty()) values.insert(x.dst);
      else if (x.kind == StmtKind::Alloc) values.insert(x.dst);
    });
    const int64_t n = s.extent.const_value();
    for (int64_t i = 0; i < n; ++i) {
      Block body = s.body;
      substitute_block(body, {{s.var, Expr(i)}});
      if (n > 1) {
        const std::string suffix = "_u" + std::to_string(i);
        std::map<std::string, Expr> renamed;
        for (const std::string& v : ints) renamed[v] = Expr::var(v + suffix);
        if (!renamed.empty()) substitute_block(body, renamed);
        walk(body, [&](Stmt& x) {
          if (x.kind == StmtKind::Let && ints.count(x.var)) x.var += suffix;
          if (values.count(x.dst)) x.dst += suffix;
          for (Operand& a : x.args)
            if (values.count(a.name)) a.name += suffix;
        });
      }
      for (Stmt& c : body) unroll_into(std::move(c), out);
    }
  }

  // ---- step 2 ----

  // A batched output's offset `b * (M * N) + rest`, the batch term leftmost in the sum
  // as k:010 builds it: (b, rest).
  static std::optional<std::pair<Expr, Expr>> split_batch(const Expr& e, const Expr& mn) {
    if (e.kind() != Expr::Kind::Add) return std::nullopt;
    const Expr& l = e.lhs();
    if (l.kind() == Expr::Kind::Mul && l.rhs().same_as(mn)) return std::pair{l.lhs(), e.rhs()};
    if (auto r = split_batch(l, mn)) return std::pair{r->first, r->second + e.rhs()};
    return std::nullopt;
  }

  static std::optional<std::pair<Expr, Expr>> split_row_col(const Expr& e, const Expr& n) {
    if (e.kind() == Expr::Kind::Mul && e.rhs().same_as(n)) return std::pair{e.lhs(), Expr(0)};
    if (e.kind() == Expr::Kind::Add)
      if (auto r = split_row_col(e.lhs(), n)) return std::pair{r->first, r->second + e.rhs()};
    return std::nullopt;
  }

  void collect_sites(Stmt& s, std::vector<std::pair<std::string, int64_t>>& loops) {
    switch (s.kind) {
      case StmtKind::For:
        if (!s.extent.is_const()) refuse("epilogue loop " + s.var + " has a symbolic extent");
        epilogue_vars_.insert(s.var);
        loops.emplace_back(s.var, s.extent.const_value());
        for (Stmt& c : s.body) collect_sites(c, loops);
        loops.pop_back();
        break;
      case StmtKind::If:
        for (Stmt& c : s.body) collect_sites(c, loops);
        break;
      case StmtKind::Write:
        if (!global_write(s)) refuse("its epilogue writes shared memory");
        sites_.push_back(Site{&s, loops, Expr(0), Expr(0), Expr(0), Expr(0)});
        break;
      case StmtKind::Load: case StmtKind::Compute: case StmtKind::Init: case StmtKind::Accum:
      case StmtKind::Alloc: case StmtKind::Atom:
        break;
      default:
        refuse("its epilogue holds a `" + print_block({s}).substr(0, 40) + "`");
    }
  }

  void decompose() {
    std::vector<std::pair<std::string, int64_t>> loops;
    for (size_t i = e0_; i < e1_; ++i) collect_sites((*epi_)[i], loops);
    LOOM_CHECK(!sites_.empty(), "k:053: an epilogue without stores");
    out_ = p_.tensor(sites_[0].store->tensor);
    if (out_->role != TensorRole::Output) refuse("it stores into " + out_->name + ", not an output");
    // A batch of outputs [B, M, N] (bmm, a batched wgmma kernel's (batch, tile) walk) is
    // stored through a rank-3 map, boxes of one entry's rows x S: the map clips them at
    // each entry's M and N edges as a 2-D one does at the matrix's.
    rank_ = out_->shape.size();
    if (rank_ != 2 && rank_ != 3)
      refuse("its output " + out_->name + " has rank " + std::to_string(rank_) +
             "; the TMA-store epilogue takes 2-D outputs and batches of them ([B, M, N])");
    const int64_t eb = dtype_bytes(out_->dtype);
    const Expr& width = out_->shape[rank_ - 1];
    if (!copy_ && width.is_const() && width.const_value() * eb % 16 != 0)
      refuse(out_->name + "'s rows are " + std::to_string(width.const_value() * eb) +
             " B; a tensor map's row stride is a multiple of 16 B (EPILOGUE=smem copies "
             "such rows with the threads)");
    const Expr n = out_->strides()[rank_ - 2];
    const Expr mn = rank_ == 3 ? out_->strides()[0] : Expr(0);
    for (Site& site : sites_) {
      const Stmt& st = *site.store;
      if (st.tensor != out_->name) refuse("its epilogue stores into two tensors");
      if (st.atomic_add) refuse("its epilogue adds atomically (split-K)");
      Expr offset = st.index.at(0);
      if (rank_ == 3) {
        auto br = split_batch(offset, mn);
        if (!br) refuse("the store offset " + offset.str() + " is not `b * " + mn.str() + " + row * " +
                        n.str() + " + col`");
        if (full(br->first).uses("threadIdx.x") ||
            std::any_of(epilogue_vars_.begin(), epilogue_vars_.end(),
                        [&](const std::string& v) { return full(br->first).uses(v); }))
          refuse("its batch index " + br->first.str() + " varies within the tile");
        site.batch_block = br->first;
        offset = br->second;
      }
      auto rc = split_row_col(offset, n);
      if (!rc) refuse("the store offset " + st.index[0].str() + " is not `row * " + n.str() + " + col`");
      auto split = [&](const Expr& e, Expr& local, Expr& block) {
        local = Expr(0);
        block = Expr(0);
        for (const Expr& t : sum_terms(distribute_constants(e))) {
          if (local_term(t)) local = local + t;
          else if (full(t).uses("threadIdx.x")) refuse("index term " + t.str() + " mixes block and thread");
          else block = block + t;
        }
      };
      split(rc->first, site.row, site.row_block);
      split(rc->second, site.col, site.col_block);
      check_split(st.index[0], site, n, mn);
      const Site& first = sites_[0];
      auto same = [](const Expr& a, const Expr& b) {
        auto d = constant_difference(a, b);
        return a.same_as(b) || (d && *d == 0);
      };
      if (!same(first.row_block, site.row_block) || !same(first.col_block, site.col_block) ||
          !same(first.batch_block, site.batch_block))
        refuse("its stores have different block origins (" + first.row_block.str() + ", " +
               first.col_block.str() + ") and (" + site.row_block.str() + ", " +
               site.col_block.str() + ")");
    }
  }

  // offset == batch_block * M * N + (row_block + row) * N + col_block + col at random points.
  void check_split(const Expr& offset, const Site& site, const Expr& n, const Expr& mn) const {
    const Expr f = full(offset);
    const Expr g = full(site.batch_block * mn + (site.row_block + site.row) * n + site.col_block +
                        site.col);
    // Random values may zero a divisor (a GROUP_M raster's last group): drawn again.
    if (!agree_at_random_points(f, g, 53))
      refuse("its store offset " + offset.str() + " does not split into a block origin and a "
             "cell");
  }

  // ---- step 3 ----

  // Calls fn(thread, env) for every consumer thread and epilogue loop iteration of `site`.
  void for_each_point(const Site& site, const std::function<void(int64_t, Expr::Env&)>& fn) const {
    Expr::Env env;
    std::vector<int64_t> it(site.loops.size(), 0);
    for (int64_t t = 0; t < consumers_; ++t) {
      env["threadIdx.x"] = t;
      std::fill(it.begin(), it.end(), 0);
      while (true) {
        for (size_t i = 0; i < it.size(); ++i) env[site.loops[i].first] = it[i];
        fn(t, env);
        size_t d = it.size();
        while (d > 0 && ++it[d - 1] == site.loops[d - 1].second) it[--d] = 0;
        if (d == 0) break;
      }
    }
  }

  void enumerate() {
    consumers_ = k_.block_threads;
    if (consumer_cond_) {
      const Expr& c = *consumer_cond_;
      if (c.kind() == Expr::Kind::Lt && c.lhs().is_var() && c.lhs().var_name() == "threadIdx.x" &&
          c.rhs().is_const())
        consumers_ = c.rhs().const_value();
      else
        refuse("its epilogue sits under `if " + c.str() + "`, not a consumer arm `threadIdx.x < C`");
    }
    // Every cell once; per warpgroup, its bounding box.
    std::map<std::pair<int64_t, int64_t>, int64_t> seen;
    const int64_t groups = std::max<int64_t>(1, consumers_ / kWarpgroup);
    std::vector<int64_t> lo_r(size_t(groups), INT64_MAX), hi_r(size_t(groups), -1);
    std::vector<int64_t> lo_c(size_t(groups), INT64_MAX), hi_c(size_t(groups), -1);
    std::vector<int64_t> cells(size_t(groups), 0);
    for (Site& site : sites_) {
      const Expr row = full(site.row), col = full(site.col);
      std::set<std::string> vars;
      row.collect_vars(vars);
      col.collect_vars(vars);
      for (const std::string& v : vars)
        if (v != "threadIdx.x" && !epilogue_vars_.count(v))
          refuse("a cell index uses `" + v + "`, which is neither the thread nor an epilogue loop");
      const int width = site.store->width;
      for_each_point(site, [&](int64_t t, Expr::Env& env) {
        const int64_t r = row.eval(env), c = col.eval(env);
        if (r < 0 || c < 0) refuse("a cell lies before the block's origin");
        const size_t g = size_t(std::min(groups - 1, t / kWarpgroup));
        for (int w = 0; w < width; ++w) {
          if (++seen[{r, c + w}] > 1)
            refuse("cell (" + std::to_string(r) + ", " + std::to_string(c + w) + ") is stored twice");
          lo_r[g] = std::min(lo_r[g], r), hi_r[g] = std::max(hi_r[g], r);
          lo_c[g] = std::min(lo_c[g], c + w), hi_c[g] = std::max(hi_c[g], c + w);
          ++cells[g];
        }
      });
    }
    rows_ = 0, cols_ = 0;
    for (const auto& [rc, n] : seen) rows_ = std::max(rows_, rc.first + 1), cols_ = std::max(cols_, rc.second + 1);
    if (int64_t(seen.size()) != rows_ * cols_)
      refuse("its stores cover " + std::to_string(seen.size()) + " cells of a " +
             std::to_string(rows_) + " x " + std::to_string(cols_) + " tile, not all of it");
    const int64_t eb = dtype_bytes(out_->dtype);
    auto strip = [&](int64_t cols) {
      int64_t s = kSpanBytes / eb;
      while (s * eb > 16 && cols % s != 0) s /= 2;
      return cols % s == 0 ? s : 0;
    };
    // Per-warpgroup owners when every warpgroup holds an equal rectangle.
    bool per_wg = groups > 1 || consumers_ == kWarpgroup;
    for (size_t g = 0; per_wg && g < size_t(groups); ++g) {
      Owner o{int64_t(g) * kWarpgroup, kWarpgroup, lo_r[g], lo_c[g], hi_r[g] - lo_r[g] + 1,
              hi_c[g] - lo_c[g] + 1};
      per_wg = o.rows * o.cols == cells[g] && o.rows == hi_r[0] - lo_r[0] + 1 &&
               o.cols == hi_c[0] - lo_c[0] + 1 && o.rows <= 256 && o.rows % 8 == 0 &&
               o.r0 % 8 == 0 && strip(o.cols) > 0;
      owners_.push_back(o);
    }
    if (!per_wg) owners_ = {Owner{0, consumers_, 0, 0, rows_, cols_}};
    for (const Owner& o : owners_)
      if (epilogue_cond_ && o.threads != decided_by_)
        refuse("its epilogue runs under `" + epilogue_cond_->str() + "`, which each group of " +
               std::to_string(decided_by_) + " threads learns alone, but an owner of its tile "
               "is " + std::to_string(o.threads) + " threads waiting on one named barrier (a "
               "stream-K kernel's consumer warpgroups must each hold an equal rectangle)");
    strip_ = cols_;
    for (const Owner& o : owners_) {
      const int64_t s = strip(o.cols);
      if (s == 0 || o.c0 % s != 0)
        refuse("its tile's columns (" + std::to_string(o.cols) + " x " + dtype_name(out_->dtype) +
               ") are not whole 16-byte strips");
      if (o.rows > 256 || o.rows % 8 != 0)
        refuse("a TMA box of " + std::to_string(o.rows) + " rows (at most 256, whole 8-row "
               "swizzle atoms)");
      strip_ = std::min(strip_, s);
    }
  }

  // EPI_BUFFERS: every owner spans the tile's columns (owners stacked along M), so the
  // strips are the tile's and each store's cells lie in one of them.
  void plan_strips() {
    for (const Owner& o : owners_)
      if (o.c0 != 0 || o.cols != cols_)
        refuse("EPI_BUFFERS streams column strips through buffers shared by warpgroups "
               "stacked along M, and this kernel's warpgroups split the tile's columns "
               "(WN > 1); use WN=1 or EPI_BUFFERS=0");
    strips_ = cols_ / strip_;
    nbuf_ = std::min<int64_t>(buffers_, strips_);
    // A ring across tiles: N = T x strips buffers, tile t_i's strips in the group t_i % T.
    // Only in a tile loop whose every iteration stores its tile (stream-K skips some: the
    // group would no longer name the store N strips back).
    if (tile_loop_.first && !epilogue_cond_ && buffers_ >= 2 * strips_)
      tile_ring_ = buffers_ / strips_;
    for (Site& site : sites_) {
      const Expr col = full(site.col);
      for_each_point(site, [&](int64_t, Expr::Env& env) {
        const int64_t c = col.eval(env);
        const int64_t first = c / strip_, last = (c + site.store->width - 1) / strip_;
        if (site.strip < 0) site.strip = first;
        if (first != site.strip || last != site.strip)
          refuse("EPI_BUFFERS: the store `" + print_block({*site.store}).substr(0, 60) +
                 "` writes cells of column strips " + std::to_string(site.strip) + " and " +
                 std::to_string(first != site.strip ? first : last) +
                 " (one statement per strip is needed); use EPI_BUFFERS=0");
      });
    }
  }

  // ---- steps 4 and 5 ----

  // The tile's offset of cell (r, c): strip c / S, row r, column c % S. Terms of c that
  // are multiples of S go to the strip whole, so the XOR sees only the lane's part.
  std::pair<Expr, Expr> tile_offset_parts(const Expr& r, const Expr& c) const {
    Expr strip = 0, within = 0;
    for (const Expr& t : sum_terms(distribute_constants(c))) {
      if (t.is_const()) {
        strip = strip + t.const_value() / strip_;
        within = within + t.const_value() % strip_;
      } else if (t.kind() == Expr::Kind::Mul && t.rhs().is_const() && t.rhs().const_value() % strip_ == 0) {
        strip = strip + t.lhs() * (t.rhs().const_value() / strip_);
      } else {
        within = within + t;
      }
    }
    return {strip, r * strip_ + within};
  }

  // The split of tile_offset_parts must hold for every cell; else the plain / and % form.
  // With EPI_BUFFERS the strip is the site's constant one, stored in buffer strip % N.
  Expr checked_tile_offset(const Site& site) const {
    const auto [strip, rest] = tile_offset_parts(site.row, site.col);
    const int64_t slab = rows_ * strip_;
    const Expr fast = nbuf_ ? Expr(site.strip % nbuf_ * slab) + rest : strip * slab + rest;
    const Expr ff = full(fast), fr = full(site.row), fc = full(site.col);
    bool ok = true;
    for_each_point(site, [&](int64_t, Expr::Env& env) {
      const int64_t r = fr.eval(env), c = fc.eval(env);
      const int64_t at = nbuf_ ? c / strip_ % nbuf_ : c / strip_;
      ok &= ff.eval(env) == at * slab + r * strip_ + c % strip_ &&
            c % strip_ + site.store->width <= strip_;
    });
    if (ok) return fast;
    if (nbuf_) return Expr(site.strip % nbuf_ * slab) + site.row * strip_ + site.col % strip_;
    return site.col / strip_ * slab + site.row * strip_ + site.col % strip_;
  }

  // `if cond: body` around a store becomes body, its loads predicated by cond: past the
  // edges the loads yield 0 and the cells they feed are clipped by the tensor map.
  void unguard(Block& b, const Expr& cond) {
    Block out;
    for (Stmt& s : b) {
      if (s.kind == StmtKind::If && holds(s, [&](const Stmt& x) { return x.kind == StmtKind::Write; })) {
        unguard(s.body, cond && s.cond);
        for (Stmt& c : s.body) out.push_back(std::move(c));
        continue;
      }
      if (s.kind == StmtKind::For) unguard(s.body, cond);
      if (s.kind != StmtKind::Load || (cond.is_const() && cond.const_value() != 0)) {
        out.push_back(std::move(s));
        continue;
      }
      const Expr pred = s.pred.is_const() && s.pred.const_value() != 0 ? cond : (cond && s.pred);
      if (s.width == 1) {
        s.pred = pred;
        out.push_back(std::move(s));
        continue;
      }
      // A vector load has no predicated form (codegen): one predicated load per element.
      if (s.dst_index.empty()) refuse("a guarded vector load fills no register array");
      for (int i = 0; i < s.width; ++i) {
        Stmt e = s;
        e.width = 1;
        e.pred = pred;
        e.index = {s.index.at(0) + i};
        e.dst_index.back() = s.dst_index.back() + i;
        out.push_back(std::move(e));
      }
    }
    b = std::move(out);
  }

  // The strips' shared tile `<out>_s[strips or buffers, R, S]`, swizzled by its span (what
  // a TMA box needs, and what makes a warp's stores and stmatrix conflict-free); the
  // epilogue's stores retargeted into it.
  TensorDecl make_tile() {
    const int64_t eb = dtype_bytes(out_->dtype);
    TensorDecl tile;
    tile.name = out_->name + "_s";
    for (int i = 2; p_.has_tensor(tile.name); ++i) tile.name = out_->name + "_s" + std::to_string(i);
    tile.dtype = out_->dtype;
    tile.role = TensorRole::Shared;
    tile.shape = {Expr(nbuf_ ? ring() : cols_ / strip_), Expr(rows_), Expr(strip_)};
    const int64_t span = strip_ * eb;
    const int swizzle = span >= 32 ? int(span) : 0;
    if (swizzle) {
      const int log_eb = eb == 4 ? 2 : eb == 2 ? 1 : 0;
      tile.swizzle = Swizzle{swizzle == 128 ? 3 : swizzle == 64 ? 2 : 1, 4 - log_eb, 3};
    }
    swizzle_bytes_ = swizzle;
    for (const Site& site : sites_) {
      const Expr at = checked_tile_offset(site);
      site.store->tensor = tile.name;
      site.store->index = {at};
    }
    return tile;
  }

  void rewrite() {
    const int64_t eb = dtype_bytes(out_->dtype);
    TensorDecl tile = make_tile();
    const int swizzle = swizzle_bytes_;
    Block& b = *epi_;
    const std::vector<int64_t> strip_of = nbuf_ ? statement_strips() : std::vector<int64_t>{};
    Block epilogue(b.begin() + long(e0_), b.begin() + long(e1_));
    if (!nbuf_) unguard(epilogue, Expr(1));

    const bool per_wg = owners_.size() > 1 || owners_[0].threads == kWarpgroup;
    const Expr tid = Expr::var("threadIdx.x");
    const Expr storing = per_wg ? Expr::make(Expr::Kind::Eq, tid % kWarpgroup, Expr(0))
                                : Expr::make(Expr::Kind::Eq, tid, Expr(0));
    const Stmt sync = per_wg ? Stmt::NamedBarrier(Expr(1) + tid / kWarpgroup, int(kWarpgroup))
                             : Stmt::NamedBarrier(Expr(1), int(consumers_));
    TmaDescriptor d;
    d.name = tile.name + "_tmap";
    d.tensor = out_->name;
    d.shared = tile.name;
    d.box = {strip_, owners_[0].rows};
    if (rank_ == 3) d.box.push_back(1);  // one entry of the batch
    d.swizzle_bytes = swizzle;
    k_.tma.push_back(d);

    const Expr row0 = sites_[0].row_block, col0 = sites_[0].col_block;
    const Expr batch0 = sites_[0].batch_block;
    // The ring across tiles: this tile's group of strip buffers.
    Expr group_base = 0;
    if (tile_ring_ > 1) {
      const Stmt& loop = (*tile_loop_.first)[tile_loop_.second];
      group_base = Expr::var(loop.var) % tile_ring_ * (strips_ * rows_ * strip_);
    }
    // Owner o's stores of its strips [j0, j1), strip j from tile slab `slot(j)`.
    auto store_strips = [&](const Owner& o, int64_t j0, int64_t j1, int64_t buffers) {
      Block stores;
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t slab = buffers ? j % buffers : o.c0 / strip_ + j;
        std::vector<Expr> corner = {row0 + o.r0, col0 + (o.c0 + j * strip_)};
        if (rank_ == 3) corner.insert(corner.begin(), batch0);
        const Expr at = Expr(slab * rows_ * strip_ + o.r0 * strip_);
        stores.push_back(Stmt::TmaStore(tile.name, buffers ? group_base + at : at, out_->name,
                                        corner, d.name));
      }
      stores.push_back(Stmt::BulkCommit());
      return Stmt::If(Expr::make(Expr::Kind::Eq, tid, Expr(o.first_thread)), stores);
    };
    Block rewritten;
    if (nbuf_) {
      // Per strip: the storing thread waits until the store that last read this buffer
      // (strip j - N, maybe of the previous tile) is done, the owner meets, writes the
      // strip, fences it for the copy engine, meets again, and the strip is stored.
      std::vector<Block> groups;
      groups.resize(size_t(strips_));
      for (size_t i = 0; i < epilogue.size(); ++i)
        groups[size_t(strip_of[i])].push_back(std::move(epilogue[i]));
      // With a ring across tiles the N = T x strips buffers are used in turn across the
      // tile loop (strip j of tile t_i: buffer (t_i * strips + j) % N), so every wait below
      // counts N stores back, and the previous tile's stores stream on through this tile's
      // mainloop and epilogue until their buffers come round again.
      const int64_t n = ring();
      const bool one_sync = sync_ == 1 && n >= 2 && strips_ % nbuf_ == 0;
      for (int64_t j = 0; j < strips_; ++j) {
        Block& g = groups[size_t(j)];
        unguard(g, Expr(1));
        if (stmatrix_ && eb == 2) use_stmatrix(g, tile);
        if (tile_ring_ > 1) shift_tile_writes(g, tile.name, group_base);
        if (one_sync) {
          rewritten.insert(rewritten.end(), g.begin(), g.end());
          rewritten.push_back(Stmt::FenceProxyAsync());
          rewritten.push_back(Stmt::If(storing, {Stmt::BulkWait(int(n - 2))}));
          rewritten.push_back(sync);
          for (const Owner& o : owners_) rewritten.push_back(store_strips(o, j, j + 1, nbuf_));
          continue;
        }
        // Buffers are strip j % N within a tile; when N does not divide the strips (BN=192:
        // 3 strips, 2 buffers) the next tile's strip 0 reuses the buffer of this tile's
        // last strip, the newest store, so it waits for all of them. The previous tile's
        // stores have had a whole mainloop to finish, so the full wait costs nothing.
        const int keep = j == 0 && strips_ % nbuf_ != 0 ? 0 : int(n - 1);
        rewritten.push_back(Stmt::If(storing, {Stmt::BulkWait(keep)}));
        rewritten.push_back(sync);
        rewritten.insert(rewritten.end(), g.begin(), g.end());
        rewritten.push_back(Stmt::FenceProxyAsync());
        rewritten.push_back(sync);
        for (const Owner& o : owners_) rewritten.push_back(store_strips(o, j, j + 1, nbuf_));
      }
    } else {
      rewritten = {Stmt::If(storing, {Stmt::BulkWait(0)}), sync};
      rewritten.insert(rewritten.end(), epilogue.begin(), epilogue.end());
      rewritten.push_back(Stmt::FenceProxyAsync());
      rewritten.push_back(sync);
      for (const Owner& o : owners_) rewritten.push_back(store_strips(o, 0, o.cols / strip_, 0));
    }
    b.erase(b.begin() + long(e0_), b.begin() + long(e1_));
    b.insert(b.begin() + long(e0_), rewritten.begin(), rewritten.end());
    // The last stores must finish reading the tile before the CTA's shared memory goes.
    const Stmt drain = Stmt::If(storing, {Stmt::BulkWait(0)});
    if (tile_loop_.first) {
      Block& outer = *tile_loop_.first;
      outer.insert(outer.begin() + long(tile_loop_.second) + 1, drain);
    } else {
      b.insert(b.begin() + long(e0_ + rewritten.size()), drain);
    }
    p_.tensors.push_back(tile);
    tile_ = tile.name;
  }

  // EPILOGUE=smem: the same strips, copied out by the owners' threads (the header).
  void rewrite_copy() {
    const int64_t eb = dtype_bytes(out_->dtype);
    TensorDecl tile = make_tile();
    Block& b = *epi_;
    const std::vector<int64_t> strip_of = nbuf_ ? statement_strips() : std::vector<int64_t>{};
    Block epilogue(b.begin() + long(e0_), b.begin() + long(e1_));
    const bool per_wg = owners_.size() > 1 || owners_[0].threads == kWarpgroup;
    const Expr tid = Expr::var("threadIdx.x");
    const Stmt sync = per_wg ? Stmt::NamedBarrier(Expr(1) + tid / kWarpgroup, int(kWarpgroup))
                             : Stmt::NamedBarrier(Expr(1), int(consumers_));
    Expr group_base = 0;
    if (tile_ring_ > 1) {
      const Stmt& loop = (*tile_loop_.first)[tile_loop_.second];
      group_base = Expr::var(loop.var) % tile_ring_ * (strips_ * rows_ * strip_);
    }
    auto copies = [&](int64_t j, int64_t slab, const Expr& base) {
      Block out;
      for (size_t o = 0; o < owners_.size(); ++o)
        out.push_back(copy_strip(owners_[o], o, j, slab, base, tile));
      return out;
    };
    Block rewritten;
    if (nbuf_) {
      std::vector<Block> groups(static_cast<size_t>(strips_));
      for (size_t i = 0; i < epilogue.size(); ++i)
        groups[size_t(strip_of[i])].push_back(std::move(epilogue[i]));
      const bool one_sync = sync_ == 1 && ring() >= 2 && strips_ % nbuf_ == 0;
      for (int64_t j = 0; j < strips_; ++j) {
        Block& g = groups[size_t(j)];
        unguard(g, Expr(1));
        if (stmatrix_ && eb == 2) use_stmatrix(g, tile);
        if (tile_ring_ > 1) shift_tile_writes(g, tile.name, group_base);
        if (!one_sync) rewritten.push_back(sync);
        rewritten.insert(rewritten.end(), g.begin(), g.end());
        rewritten.push_back(sync);
        const Block c = copies(j, j % nbuf_, group_base);
        rewritten.insert(rewritten.end(), c.begin(), c.end());
      }
    } else {
      unguard(epilogue, Expr(1));
      rewritten = {sync};
      rewritten.insert(rewritten.end(), epilogue.begin(), epilogue.end());
      rewritten.push_back(sync);
      for (int64_t j = 0; j < cols_ / strip_; ++j) {
        // Owner o's strips are its columns' (o.c0 / S + its j), each its own slab.
        for (size_t o = 0; o < owners_.size(); ++o)
          if (j < owners_[o].cols / strip_)
            rewritten.push_back(
                copy_strip(owners_[o], o, j, owners_[o].c0 / strip_ + j, Expr(0), tile));
      }
    }
    b.erase(b.begin() + long(e0_), b.begin() + long(e1_));
    b.insert(b.begin() + long(e0_), rewritten.begin(), rewritten.end());
    p_.tensors.push_back(tile);
    tile_ = tile.name;
  }

  // Owner o's copy of its strip j (slab `slab` of the tile, plus `base`): its threads walk
  // the strip's R x S cells W at a time, consecutive threads along a row, and store each
  // chunk inside the output. W: the widest power of two of at most 16 B dividing S and the
  // output's width for which every row start and the strip's first column are provably
  // multiples of W.
  Stmt copy_strip(const Owner& o, size_t owner, int64_t j, int64_t slab, const Expr& base,
                  const TensorDecl& tile) const {
    const int64_t eb = dtype_bytes(out_->dtype);
    const Expr n = out_->strides()[rank_ - 2];
    const Expr row0 = sites_[0].row_block + o.r0;
    const Expr col0 = sites_[0].col_block + (o.c0 + j * strip_);
    const Expr batch = rank_ == 3 ? sites_[0].batch_block * out_->strides()[0] : Expr(0);
    int64_t w = 1;
    for (int64_t c = 16 / eb; c > 1; c /= 2) {
      if (strip_ % c != 0) continue;
      // A chunk ends at N: a view's pitch (out_pitch=) may allow W where its width does not,
      // and the columns past N are the caller's.
      if (!provably_divisible(distribute_constants(out_->shape[rank_ - 1]), c)) continue;
      const Expr start =
          distribute_constants(full(batch + (row0 + Expr::var("copy_row")) * n + col0));
      if (provably_divisible(start, c)) {
        w = c;
        break;
      }
    }
    const std::string tag = tile.name + "_o" + std::to_string(owner) + "_j" + std::to_string(j);
    const std::string cv = tag + "_c", ev = tag + "_e", vv = tag + "_v";
    const int64_t per_row = strip_ / w, units = o.rows * per_row;
    const Expr e = Expr::var(ev), r = e / per_row, c = e % per_row * w;
    const Expr local = owner_thread(o);
    Expr cond = units % o.threads != 0 ? (e < units) : Expr(1);
    // `r < M - row0`, not `row0 + r < M`: one loop-invariant bound (k:054 found the other
    // form spilling).
    cond = cond && (r < out_->shape[rank_ - 2] - row0) && (c < out_->shape[rank_ - 1] - col0);
    Stmt ld =
        Stmt::Load(vv, tile.name, {base + Expr(slab * rows_ * strip_) + (r + o.r0) * strip_ + c});
    Stmt st = Stmt::Write(out_->name, {batch + (row0 + r) * n + col0 + c}, Operand::value(vv));
    Block move;
    if (w > 1) {
      move.push_back(Stmt::Alloc(vv, {Expr(w)}));
      ld.dst_index = {Expr(0)};
      ld.width = st.width = int(w);
      st.args[0].index = {Expr(0)};
    }
    move.push_back(ld);
    move.push_back(st);
    Block step = {Stmt::Let(ev, Expr::var(cv) * o.threads + local), Stmt::If(cond, move)};
    Stmt loop = Stmt::For(cv, Expr((units + o.threads - 1) / o.threads), LoopKind::Parallel,
                          "epilogue.store", step);
    if (owners_.size() == 1) return loop;
    return Stmt::If(Expr::make(Expr::Kind::Eq, Expr::var("threadIdx.x") / kWarpgroup,
                               Expr(int64_t(o.first_thread / kWarpgroup))),
                    {loop});
  }

  // The thread's index within its owner.
  Expr owner_thread(const Owner& o) const {
    const Expr tid = Expr::var("threadIdx.x");
    if (owners_.size() == 1) return o.first_thread == 0 ? tid : tid - o.first_thread;
    return tid % kWarpgroup;
  }

  // The strip buffers in the ring: N per tile, times the tiles it spans.
  int64_t ring() const { return nbuf_ * tile_ring_; }

  // Moves a strip's writes of the tile (plain stores and stmatrix) into this tile's group
  // of buffers.
  static void shift_tile_writes(Block& g, const std::string& tile, const Expr& base) {
    walk(g, [&](Stmt& x) {
      const bool write = x.kind == StmtKind::Write ||
                         (x.kind == StmtKind::Atom && x.dst.empty() && !x.args.empty());
      if (write && x.tensor == tile) x.index.at(0) = base + x.index.at(0);
    });
  }

  // EPI_BUFFERS: the strip of each epilogue statement (top level, e0_..e1_): a store's
  // own, and for the statements feeding it (loads, fused ops), that of the next store.
  // Checked: nothing a strip uses is defined by a later strip's statements.
  std::vector<int64_t> statement_strips() const {
    std::map<const Stmt*, int64_t> site_strip;
    for (const Site& site : sites_) site_strip[site.store] = site.strip;
    const Block& b = *epi_;
    const size_t n = e1_ - e0_;
    std::vector<int64_t> strip(n, -1);
    std::function<void(const Stmt&, std::set<int64_t>&)> strips_in = [&](const Stmt& x,
                                                                           std::set<int64_t>& out) {
      if (auto it = site_strip.find(&x); it != site_strip.end()) out.insert(it->second);
      for (const Stmt& c : x.body) strips_in(c, out);
    };
    for (size_t i = 0; i < n; ++i) {
      std::set<int64_t> in;
      strips_in(b[e0_ + i], in);
      if (in.size() > 1)
        refuse("EPI_BUFFERS: one epilogue statement stores into column strips " +
               std::to_string(*in.begin()) + " and " + std::to_string(*in.rbegin()) +
               "; use EPI_BUFFERS=0");
      if (in.size() == 1) strip[i] = *in.begin();
    }
    int64_t next = strips_ - 1;
    for (size_t i = n; i-- > 0;) {
      if (strip[i] < 0) strip[i] = next;
      next = strip[i];
    }
    std::map<std::string, int64_t> defined_in;
    for (size_t i = 0; i < n; ++i)
      walk(Block{b[e0_ + i]}, [&](const Stmt& x) {
        if (!x.dst.empty()) defined_in[x.dst] = std::max(defined_in[x.dst], strip[i]);
      });
    for (size_t i = 0; i < n; ++i)
      walk(Block{b[e0_ + i]}, [&](const Stmt& x) {
        for (const Operand& a : x.args)
          if (auto it = defined_in.find(a.name); it != defined_in.end() && it->second > strip[i])
            refuse("EPI_BUFFERS: the epilogue's value `" + a.name + "`, used for column strip " +
                   std::to_string(strip[i]) + ", is computed with strip " +
                   std::to_string(it->second) + "'s statements; use EPI_BUFFERS=0");
      });
    return strip;
  }

  // stmatrix.x4 for a strip's 16-bit cells: every 8 consecutive values a thread stores
  // (4 registers of 2) must be one lane's part of 4 8x8 matrices, each stacked row 16
  // contiguous bytes of the swizzled tile — the wgmma accumulator's layout, 2 column blocks
  // of 8 by 16 rows per warp (plain form; a transposed output would take .trans). Then one
  // instruction replaces 4 st.shared.b32 (or 8 of b16), at the last of its stores. Where
  // a strip's stores do not line up so, they stay plain stores.
  void use_stmatrix(Block& g, const TensorDecl& tile) {
    struct Elem {
      size_t stmt;
      Operand value;
      Expr offset;
    };
    std::vector<Elem> elems;
    for (size_t i = 0; i < g.size(); ++i) {
      const Stmt& x = g[i];
      if (x.kind != StmtKind::Write || x.tensor != tile.name) continue;
      for (int k = 0; k < x.width; ++k) {
        Operand v = x.args.at(0);
        if (k > 0) {
          if (v.index.empty()) return;
          v.index.back() = v.index.back() + k;
        }
        elems.push_back({i, v, x.index.at(0) + k});
      }
    }
    if (elems.empty() || elems.size() % 8 != 0) return;
    std::vector<std::pair<std::string, Expr>> chunks;  // atom, this lane's row offset
    for (size_t c = 0; c < elems.size(); c += 8) {
      // A chunk starts and ends on whole stores.
      if ((c > 0 && elems[c].stmt == elems[c - 1].stmt) ||
          (c + 8 < elems.size() && elems[c + 7].stmt == elems[c + 8].stmt))
        return;
      std::vector<Expr> offs;
      for (size_t v = 0; v < 8; ++v) offs.push_back(elems[c + v].offset);
      std::optional<std::pair<std::string, Expr>> pick;
      for (const char* id : {"stmatrix_x4", "stmatrix_x4_trans"})
        if (auto row = stmatrix_row(offs, warp_copy(atom(id)), tile)) {
          pick = std::pair{std::string(id), *row};
          break;
        }
      if (!pick) return;
      chunks.push_back(*pick);
    }
    Block out;
    size_t next = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const bool tile_write = g[i].kind == StmtKind::Write && g[i].tensor == tile.name;
      if (!tile_write) {
        out.push_back(std::move(g[i]));
        continue;
      }
      const size_t last = 8 * next + 7;
      if (elems[last].stmt != i) continue;
      std::vector<Operand> values;
      for (size_t v = 0; v < 8; ++v) values.push_back(elems[8 * next + v].value);
      const auto& [id, row] = chunks[next++];
      if (!find_warp_copy(k_, id)) k_.warp_copies.push_back(warp_copy(atom(id)));
      out.push_back(Stmt::StoreCopyAtom(id, tile.name, row, values));
    }
    g = std::move(out);
  }

  // The row offset each lane gives `w` to store value v of every lane at offs[v], as
  // offs[0] plus a term of the lane; nullopt where no such addressing exists.
  std::optional<Expr> stmatrix_row(const std::vector<Expr>& offs, const WarpCopy& w,
                                   const TensorDecl& tile) const {
    constexpr int kLanes = WarpAtom::kLanes;
    std::vector<Expr> f;
    for (const Expr& e : offs) f.push_back(full(e));
    std::vector<int> delta(kLanes, 0);
    Expr::Env env;
    for (int64_t warp = 0; warp < consumers_ / kLanes; ++warp) {
      std::vector<int64_t> start(size_t(w.rows), -1), first(kLanes);
      for (int lane = 0; lane < kLanes; ++lane) {
        env["threadIdx.x"] = warp * kLanes + lane;
        for (int v = 0; v < w.values; ++v) {
          const auto [row, col] = w.dst[size_t(lane * w.values + v)];
          const int64_t at = f[size_t(v)].eval(env) - col;
          if (v == 0) first[size_t(lane)] = f[0].eval(env);
          int64_t& s = start[size_t(row)];
          if (s >= 0 && s != at) return std::nullopt;
          s = at;
        }
      }
      for (int r = 0; r < w.rows; ++r) {
        const int64_t s = start[size_t(r)];
        // One aligned 16-byte row, which the swizzle keeps whole.
        if (w.row_lane[size_t(r)] != r || s < 0 || s % w.cols != 0) return std::nullopt;
        for (int c = 1; c < w.cols; ++c)
          if (tile.physical(s + c) != tile.physical(s) + c) return std::nullopt;
        const int64_t d = s - first[size_t(r)];
        if (warp == 0) delta[size_t(r)] = int(d);
        else if (d != delta[size_t(r)]) return std::nullopt;
      }
    }
    try {
      return offs[0] + lane_bits_expr(delta, Expr::var("threadIdx.x") % kLanes);
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  void check_resources() const {
    const SharedLayout l = shared_layout(p_, k_);
    const int64_t bytes = kernel_smem_bytes(l, k_);
    const int64_t tile = (nbuf_ ? ring() * strip_ : cols_) * rows_ * dtype_bytes(out_->dtype);
    if (bytes > s_.target.smem_per_block)
      throw Error(std::string(mode()) + ": kernel " + k_.name + " needs " + std::to_string(bytes) +
                  " B of shared memory, " + std::to_string(tile) + " B of them for its " +
                  (nbuf_ ? std::to_string(ring()) + " strip buffers of " + std::to_string(rows_) +
                               " x " + std::to_string(strip_)
                         : std::to_string(rows_) + " x " + std::to_string(cols_) + " output tile") +
                  " " + tile_ + " (knobs " + s_.knobs.str() + "); this GPU allows " +
                  std::to_string(s_.target.smem_per_block) +
                  " B per block: lower STAGES (e.g. STAGES=3), BN or BM, use EPI_BUFFERS=2 "
                  "(strip buffers instead of the whole tile), or use EPILOGUE=direct");
    // The copy engine reads a swizzled box from the swizzle's repeat (8 rows of its span).
    const int64_t align = swizzle_bytes_ ? 8 * swizzle_bytes_ : 128;
    if (l.offset_bytes.at(tile_) % align != 0)
      throw Error(std::string(mode()) + ": kernel " + k_.name + "'s output tile " + tile_ +
                  " starts at byte " + std::to_string(l.offset_bytes.at(tile_)) +
                  " of shared memory, not a multiple of " + std::to_string(align) +
                  " as its swizzle needs; use EPILOGUE=direct");
  }

  CompileState& s_;
  KernelProgram& p_;
  KernelOp& k_;
  Block* epi_ = nullptr;
  size_t e0_ = 0, e1_ = 0;
  // Stream-K: the epilogue runs under a tile arrival's answer, which each group of
  // `decided_by_` threads gets alone: each owner must be such a group.
  std::optional<Expr> epilogue_cond_;
  int64_t decided_by_ = 0;
  std::pair<Block*, size_t> tile_loop_{nullptr, 0};
  std::optional<Expr> consumer_cond_;
  std::map<std::string, Expr> lets_;
  std::set<std::string> epilogue_vars_;
  std::vector<Site> sites_;
  // A copy, not a pointer into p_.tensors: rewrite() adds the output tile's shared
  // tensor, which may move the vector (check_resources read the freed one).
  std::optional<TensorDecl> out_;
  size_t rank_ = 2;  // the output's: 2, or 3 for a batch of outputs
  int64_t consumers_ = 0, rows_ = 0, cols_ = 0, strip_ = 0;
  const int64_t buffers_;  // EPI_BUFFERS
  const int64_t sync_;     // EPI_SYNC: named barriers per strip (1 or 2)
  const bool stmatrix_;
  const bool copy_;  // EPILOGUE=smem: the owners' threads copy the strips out
  int64_t strips_ = 0, nbuf_ = 0;  // with EPI_BUFFERS: the tile's strips, buffers per tile
  int64_t tile_ring_ = 1;          // the tiles the ring of strip buffers spans
  int swizzle_bytes_ = 0;
  std::vector<Owner> owners_;
  std::string tile_;
};

}  // namespace

Pass pass_tma_store_epilogue() {
  return Pass{"k:053_tma_store_epilogue", Level::Kernel, Level::Kernel,
              "with EPILOGUE=tma_store every wgmma kernel writes its output tile into a swizzled "
              "shared tile (per consumer warpgroup, named barriers), and one thread per owner "
              "stores it with TMA; the store overlaps the next tile's mainloop. With "
              "EPILOGUE=smem a warp-specialized wgmma kernel's owners copy the same strips out "
              "with their threads (rows TMA cannot address)",
              {"EPILOGUE", "EPI_BUFFERS", "STMATRIX", "EPI_SYNC"},
              [](CompileState& s) {
                const std::string mode = s.knobs.get_str("EPILOGUE", "direct");
                if (mode != "tma_store" && mode != "smem") return;
                bool any = false;
                for (auto& k : s.kernel.kernels) {
                  bool wgmma = false;
                  walk(k.body, [&](const Stmt& x) {
                    const WarpAtom* w = x.kind == StmtKind::Atom ? find_warp_atom(k, x.atom) : nullptr;
                    wgmma |= w && w->threads == kWarpgroup;
                  });
                  if (!wgmma) continue;
                  if (mode == "smem" && !warp_specialized_wgmma(k)) continue;  // k:054's
                  TmaStoreEpilogue(s, k).run();
                  any = true;
                }
                if (!any && mode == "tma_store")
                  throw Error("EPILOGUE=tma_store stores wgmma accumulators (sm_90a): use "
                              "ATOM=wgmma_* with STAGE=tma, or EPILOGUE=direct / smem");
              }};
}

}  // namespace loom
