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
//     write one 2-D output, never atomically.
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
// Design choice: the whole tile stays in shared memory, not sub-tiles. A 128 x 256 bf16
// tile is 64 KB, so STAGES=4 x 48 KB slabs no longer fit 227 KB (a clear error says so)
// and rung 6 of `loom ladder hopper` runs STAGES=3 (208 KB). What it buys: no store is
// waited for inside the epilogue — the only wait, for the previous tile's reads, comes a
// whole mainloop later — two named barriers per tile, and no reordering of the fused
// epilogue's statements (which come in fragment order, not strip order). Sub-tiles
// (2 x 64 x 64 per warpgroup, 32 KB, keeping STAGES=4) would wait for strip j's reads
// before writing strip j+2 and need the epilogue sorted by strip; session 6 measured
// STAGES=3 as fast as 4 on the persistent kernel, so that is the next step only if the
// GPU says the fourth stage matters. The stores are plain st.shared (2 x bf16 after
// k:040); stmatrix would issue 4x fewer store instructions for 16-bit outputs.
#include <algorithm>
#include <random>
#include <set>

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
};

// Where the tile goes: an owner's threads and its rectangle of the block tile.
struct Owner {
  int64_t first_thread = 0, threads = 0;
  int64_t r0 = 0, c0 = 0, rows = 0, cols = 0;
};

class TmaStoreEpilogue {
 public:
  TmaStoreEpilogue(CompileState& s, KernelOp& k) : s_(s), p_(s.kernel), k_(k) {}

  void run() {
    locate(k_.body);
    if (!epi_) refuse("its global stores do not follow the wgmma mainloop in one block");
    decompose();
    enumerate();
    rewrite();
    check_resources();
  }

 private:
  [[noreturn]] void refuse(const std::string& why) const {
    throw Error("EPILOGUE=tma_store cannot take kernel " + k_.name + ": " + why +
                "; use EPILOGUE=direct");
  }

  static bool is_wgmma(const KernelOp& k, const Stmt& s) {
    if (s.kind != StmtKind::Atom) return false;
    const WarpAtom* w = find_warp_atom(k, s.atom);
    return w && w->threads == kWarpgroup;
  }
  bool global_write(const Stmt& s) const {
    return s.kind == StmtKind::Write && p_.tensor(s.tensor).role != TensorRole::Shared;
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

  // ---- step 2 ----

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
    out_ = &p_.tensor(sites_[0].store->tensor);
    if (out_->role != TensorRole::Output) refuse("it stores into " + out_->name + ", not an output");
    if (out_->shape.size() != 2)
      refuse("its output " + out_->name + " has rank " + std::to_string(out_->shape.size()) +
             "; the TMA-store epilogue takes 2-D outputs (no batch)");
    const int64_t eb = dtype_bytes(out_->dtype);
    if (out_->shape[1].is_const() && out_->shape[1].const_value() * eb % 16 != 0)
      refuse(out_->name + "'s rows are " + std::to_string(out_->shape[1].const_value() * eb) +
             " B; a tensor map's row stride is a multiple of 16 B");
    const Expr n = out_->strides()[0];
    for (Site& site : sites_) {
      const Stmt& st = *site.store;
      if (st.tensor != out_->name) refuse("its epilogue stores into two tensors");
      if (st.atomic_add) refuse("its epilogue adds atomically (split-K)");
      auto rc = split_row_col(st.index.at(0), n);
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
      check_split(st.index[0], site, n);
      const Site& first = sites_[0];
      auto same = [](const Expr& a, const Expr& b) {
        auto d = constant_difference(a, b);
        return a.same_as(b) || (d && *d == 0);
      };
      if (!same(first.row_block, site.row_block) || !same(first.col_block, site.col_block))
        refuse("its stores have different block origins (" + first.row_block.str() + ", " +
               first.col_block.str() + ") and (" + site.row_block.str() + ", " +
               site.col_block.str() + ")");
    }
  }

  // offset == (row_block + row) * N + col_block + col at random points.
  void check_split(const Expr& offset, const Site& site, const Expr& n) const {
    const Expr f = full(offset);
    const Expr g = full((site.row_block + site.row) * n + site.col_block + site.col);
    std::set<std::string> vars;
    f.collect_vars(vars);
    g.collect_vars(vars);
    std::mt19937_64 rng(53);
    for (int trial = 0; trial < 16; ++trial) {
      Expr::Env env;
      for (const std::string& v : vars) env[v] = int64_t(rng() % 1000) + 1;
      if (f.eval(env) != g.eval(env))
        refuse("its store offset " + offset.str() + " does not split into a block origin and a "
               "cell");
    }
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

  // ---- steps 4 and 5 ----

  // The tile's offset of cell (r, c): strip c / S, row r, column c % S. Terms of c that
  // are multiples of S go to the strip whole, so the XOR sees only the lane's part.
  Expr tile_offset(const Expr& r, const Expr& c) const {
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
    return strip * (rows_ * strip_) + r * strip_ + within;
  }

  // The split of tile_offset must hold for every cell; else the plain / and % form.
  Expr checked_tile_offset(const Site& site) const {
    const Expr fast = tile_offset(site.row, site.col);
    const Expr ff = full(fast), fr = full(site.row), fc = full(site.col);
    bool ok = true;
    for_each_point(site, [&](int64_t, Expr::Env& env) {
      const int64_t r = fr.eval(env), c = fc.eval(env);
      ok &= ff.eval(env) == c / strip_ * rows_ * strip_ + r * strip_ + c % strip_ &&
            c % strip_ + site.store->width <= strip_;
    });
    if (ok) return fast;
    return site.col / strip_ * (rows_ * strip_) + site.row * strip_ + site.col % strip_;
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

  void rewrite() {
    const int64_t eb = dtype_bytes(out_->dtype);
    TensorDecl tile;
    tile.name = out_->name + "_s";
    for (int i = 2; p_.has_tensor(tile.name); ++i) tile.name = out_->name + "_s" + std::to_string(i);
    tile.dtype = out_->dtype;
    tile.role = TensorRole::Shared;
    tile.shape = {Expr(cols_ / strip_), Expr(rows_), Expr(strip_)};
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
    Block& b = *epi_;
    Block epilogue(b.begin() + long(e0_), b.begin() + long(e1_));
    unguard(epilogue, Expr(1));

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
    d.swizzle_bytes = swizzle;
    k_.tma.push_back(d);

    Block head = {Stmt::If(storing, {Stmt::BulkWait(0)}), sync};
    Block tail = {Stmt::FenceProxyAsync(), sync};
    const Expr row0 = sites_[0].row_block, col0 = sites_[0].col_block;
    for (const Owner& o : owners_) {
      Block stores;
      for (int64_t j = 0; j < o.cols / strip_; ++j) {
        const int64_t strip = o.c0 / strip_ + j;
        stores.push_back(Stmt::TmaStore(tile.name, Expr(strip * rows_ * strip_ + o.r0 * strip_),
                                        out_->name, {row0 + o.r0, col0 + (o.c0 + j * strip_)},
                                        d.name));
      }
      stores.push_back(Stmt::BulkCommit());
      tail.push_back(Stmt::If(Expr::make(Expr::Kind::Eq, tid, Expr(o.first_thread)), stores));
    }
    Block rewritten = head;
    rewritten.insert(rewritten.end(), epilogue.begin(), epilogue.end());
    rewritten.insert(rewritten.end(), tail.begin(), tail.end());
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

  void check_resources() const {
    const SharedLayout l = shared_layout(p_, k_);
    const int64_t bytes = kernel_smem_bytes(l, k_);
    const int64_t tile = rows_ * cols_ * dtype_bytes(out_->dtype);
    if (bytes > s_.target.smem_per_block)
      throw Error("EPILOGUE=tma_store: kernel " + k_.name + " needs " + std::to_string(bytes) +
                  " B of shared memory, " + std::to_string(tile) + " B of them for its " +
                  std::to_string(rows_) + " x " + std::to_string(cols_) + " output tile " + tile_ +
                  " (knobs " + s_.knobs.str() + "); this GPU allows " +
                  std::to_string(s_.target.smem_per_block) +
                  " B per block: lower STAGES (e.g. STAGES=3), BN or BM, or use EPILOGUE=direct");
    // The copy engine reads a swizzled box from the swizzle's repeat (8 rows of its span).
    const int64_t align = swizzle_bytes_ ? 8 * swizzle_bytes_ : 128;
    if (l.offset_bytes.at(tile_) % align != 0)
      throw Error("EPILOGUE=tma_store: kernel " + k_.name + "'s output tile " + tile_ +
                  " starts at byte " + std::to_string(l.offset_bytes.at(tile_)) +
                  " of shared memory, not a multiple of " + std::to_string(align) +
                  " as its TMA swizzle needs; use EPILOGUE=direct");
  }

  CompileState& s_;
  KernelProgram& p_;
  KernelOp& k_;
  Block* epi_ = nullptr;
  size_t e0_ = 0, e1_ = 0;
  std::pair<Block*, size_t> tile_loop_{nullptr, 0};
  std::optional<Expr> consumer_cond_;
  std::map<std::string, Expr> lets_;
  std::set<std::string> epilogue_vars_;
  std::vector<Site> sites_;
  const TensorDecl* out_ = nullptr;
  int64_t consumers_ = 0, rows_ = 0, cols_ = 0, strip_ = 0;
  int swizzle_bytes_ = 0;
  std::vector<Owner> owners_;
  std::string tile_;
};

}  // namespace

Pass pass_tma_store_epilogue() {
  return Pass{"k:053_tma_store_epilogue", Level::Kernel, Level::Kernel,
              "with EPILOGUE=tma_store every wgmma kernel writes its output tile into a swizzled "
              "shared tile (per consumer warpgroup, named barriers), and one thread per owner "
              "stores it with TMA; the store overlaps the next tile's mainloop",
              {"EPILOGUE"},
              [](CompileState& s) {
                if (s.knobs.get_str("EPILOGUE", "direct") != "tma_store") return;
                bool any = false;
                for (auto& k : s.kernel.kernels) {
                  bool wgmma = false;
                  walk(k.body, [&](const Stmt& x) {
                    const WarpAtom* w = x.kind == StmtKind::Atom ? find_warp_atom(k, x.atom) : nullptr;
                    wgmma |= w && w->threads == kWarpgroup;
                  });
                  if (!wgmma) continue;
                  TmaStoreEpilogue(s, k).run();
                  any = true;
                }
                if (!any)
                  throw Error("EPILOGUE=tma_store stores wgmma accumulators (sm_90a): use "
                              "ATOM=wgmma_* with STAGE=tma, or EPILOGUE=direct / smem");
              }};
}

}  // namespace loom
