// k:056_tma_epilogue_operands — a warp-specialized wgmma kernel's epilogue operands of
// the output's shape (a residual R[M, N], a gate E[M, N]) arrive by TMA during the
// mainloop (EPI_LOAD=tma).
//
// The direct epilogue reads such an operand after the mainloop, 2 bytes per thread and
// load, while the tensor cores idle: a SwiGLU gate on 1024x8192x2048 took 84 us against
// 49 us for the plain linear (H100, bench/NOTES.md). CUTLASS's sm90 epilogue loads these
// "source" tiles by TMA into shared memory, issued by the producer while the consumers
// still multiply; so does this pass. For each kernel whose consumer arm (k:030) reads, after
// its mainloop, a rank-2 global input E at `(row_block + r) * ld + col_block + c` (the
// block's origin and a cell (r, c) of the tile, checked at random points and over every
// consumer thread and epilogue loop iteration):
//  1. E's tile is cut into column strips S elements wide (S x bytes = 128, the widest TMA
//     swizzle span: 64 bf16, 32 f32 columns), R rows each (the tile's), the layout of
//     k:053's output strips, and strip j lands in buffer j % NB of `E_s[NB, R, S]`
//     (NB = EPI_LOAD_BUFFERS, default the tile's strips: the whole tile). The 128-byte
//     swizzle puts the 8 rows a warp reads in 8 distinct 16-byte bank groups.
//  2. Each buffer has a full mbarrier (one arrival + the box's bytes) and an empty one
//     (one arrival per consumer warpgroup). The producer, right after issuing the tile's
//     last K slab — so the operand lands during the last slabs' math — issues strip j:
//       mbar.wait empty[j % NB] parity (F + 1) % 2   (the consumers read fill F - 1)
//       expect_tx full[j % NB]; tma.load strip j -> E_s[j % NB]
//     with F = t * (strips / NB) + j / NB the buffer's fill number (t: the persistent tile
//     loop's count, 0 without one); a fresh barrier passes parity 1 at once. With fewer
//     buffers than strips, strips NB.. of tile t wait for the release of strips 0.. in
//     tile t's epilogue; in a persistent loop the producer issues them inside tile t + 1's
//     slab loop once its first S slabs are out (the ring is full then, and frees only after
//     that epilogue anyway), and the last tile's after the loop, so that they never hold
//     back the next tile's first slabs.
//  3. The consumers' epilogue statements (top level of the block that holds the mainloop,
//     as k:053 left them: unrolled and sorted by column strip with EPI_BUFFERS) read the
//     buffer instead: before the first statement reading strip j, `mbar.wait full[j % NB]
//     parity F % 2`; after the last, once the warpgroup has met at a barrier (k:053's
//     per-strip named barrier, or one added at the end of the epilogue: each thread reads
//     its own cells, and the barrier orders all of them before the one thread's arrival),
//     `if threadIdx.x % 128 == 0: mbar.arrive empty[j % NB]` — the persistent kernel's
//     next tile refills a buffer only after every consumer warpgroup has read it. A refill's wait must follow the release of the strip before
//     it in that buffer: where one statement reads both, the pass refuses (more buffers).
//     Reads keep their predicates: past the tensor's edges the TMA box is zero-filled,
//     as the predicated global load yielded 0.
// Where TMA cannot address E (a constant row pitch not a multiple of 16 bytes, a tile
// not a whole number of strips, a ping-pong or cp.async kernel), E keeps the direct
// reads, and a note (`loom: note: ...`) says why; EPI_LOAD's recorded value is `direct`
// where no operand of the program was loaded so.
#include <algorithm>
#include <set>

#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

constexpr int64_t kWarpgroup = 128;
constexpr int64_t kSpanBytes = 128;

bool holds(const Stmt& s, const std::function<bool(const Stmt&)>& pred) {
  bool found = false;
  walk(Block{s}, [&](const Stmt& x) { found |= pred(x); });
  return found;
}

// `row * ld + col`, the row term leftmost in the sum as k:010 builds flat offsets.
std::optional<std::pair<Expr, Expr>> split_row_col(const Expr& e, const Expr& ld) {
  if (e.kind() == Expr::Kind::Mul && e.rhs().same_as(ld)) return std::pair{e.lhs(), Expr(0)};
  if (e.kind() == Expr::Kind::Add)
    if (auto r = split_row_col(e.lhs(), ld)) return std::pair{r->first, r->second + e.rhs()};
  return std::nullopt;
}

// Why an operand or a kernel keeps the direct reads (not an error: the fallback).
struct Skip {
  std::string why;
};

// One epilogue read of the operand.
struct Read {
  Stmt* load = nullptr;
  size_t top = 0;  // the top-level epilogue statement that holds it
  std::vector<std::pair<std::string, int64_t>> loops;
  Expr r, c;                  // the cell, local terms
  Expr row_block, col_block;  // the block's origin
  std::set<int64_t> strips;
};

class OperandLoader {
 public:
  OperandLoader(CompileState& s, KernelOp& k, int64_t buffers_knob)
      : s_(s), p_(s.kernel), k_(k), buffers_knob_(buffers_knob) {}

  // Returns how many operands now arrive by TMA; fills `skipped` with the others' reasons.
  int run(std::vector<std::string>& skipped) {
    try {
      locate();
    } catch (const Skip& sk) {
      skipped.push_back("kernel " + k_.name + ": " + sk.why);
      return 0;
    }
    // Candidate operands: global inputs of rank 2 or more read in the epilogue (a bias
    // vector stays a direct read, as it should: one row, cached).
    std::vector<std::string> names;
    for (size_t i = e0_; i < epi_->size(); ++i)
      walk(Block{(*epi_)[i]}, [&](const Stmt& x) {
        if (x.kind != StmtKind::Load || !p_.has_tensor(x.tensor)) return;
        const TensorDecl& t = p_.tensor(x.tensor);
        if (t.role == TensorRole::Input && t.shape.size() >= 2 &&
            std::find(names.begin(), names.end(), x.tensor) == names.end())
          names.push_back(x.tensor);
      });
    int done = 0;
    for (const std::string& n : names) {
      try {
        load(n);
        ++done;
      } catch (const Skip& sk) {
        skipped.push_back(n + " in kernel " + k_.name + ": " + sk.why);
      }
    }
    return done;
  }

 private:
  // The consumer arm's block holding the mainloop and the epilogue after it, the producer
  // block holding the slab loop, and the persistent tile loops of both.
  void locate() {
    const Stmt* spec = nullptr;
    for (Stmt& x : k_.body)
      if (x.kind == StmtKind::Specialize) spec = &x;
    if (!spec) throw Skip{"no producer warpgroup (EPI_LOAD=tma needs WARP_SPECIALIZE=1, STAGE=tma)"};
    if (spec->body.size() != 2)
      throw Skip{"ping-pong consumers (each tile's reader is one warpgroup; not built)"};
    Stmt& prod = const_cast<Stmt&>(spec->body[0]);
    Stmt& cons = const_cast<Stmt&>(spec->body[1]);
    const Expr& cc = cons.cond;
    if (!(cc.kind() == Expr::Kind::Lt && cc.lhs().is_var() && cc.lhs().var_name() == "threadIdx.x" &&
          cc.rhs().is_const()))
      throw Skip{"its consumer arm is not `threadIdx.x < C`"};
    consumers_ = cc.rhs().const_value();
    if (consumers_ % kWarpgroup != 0) throw Skip{"its consumers are not whole warpgroups"};
    find_epilogue(cons.body);
    if (!epi_) throw Skip{"no wgmma mainloop followed by an epilogue in one block"};
    prod_arm_ = &prod.body;
    find_producer(prod.body);
    if (!prod_) throw Skip{"its producer has no TMA slab loop (a cp.async producer)"};
    for (const std::string& v : {tile_var_c_, tile_var_p_})
      if (v != tile_var_c_) throw Skip{"the producer's and consumers' tile loops differ"};
  }

  bool is_wgmma(const Stmt& x) const {
    if (x.kind != StmtKind::Atom) return false;
    const WarpAtom* w = find_warp_atom(k_, x.atom);
    return w && w->threads == kWarpgroup;
  }

  void find_epilogue(Block& b) {
    size_t main = b.size();
    for (size_t i = 0; i < b.size(); ++i)
      if (holds(b[i], [&](const Stmt& x) { return is_wgmma(x); })) main = i;
    if (main == b.size()) return;
    if (b[main].kind == StmtKind::For && b[main].axis == "persistent") {
      tile_var_c_ = b[main].var;
      for (Stmt& c : b[main].body)
        if (c.kind == StmtKind::Let) lets_[c.var] = c.value;
      find_epilogue(b[main].body);
      return;
    }
    if (b[main].kind == StmtKind::If && !holds(b[main], [](const Stmt& x) {
          return x.kind == StmtKind::For && x.loop_kind == LoopKind::Reduce;
        })) {
      find_epilogue(b[main].body);
      return;
    }
    epi_ = &b;
    e0_ = main + 1;
  }

  void find_producer(Block& b) {
    for (size_t i = 0; i < b.size(); ++i) {
      Stmt& x = b[i];
      if (x.kind == StmtKind::For &&
          std::any_of(x.body.begin(), x.body.end(), [](const Stmt& c) {
            return c.kind == StmtKind::TmaLoad;
          })) {
        prod_ = &b;
        p_at_ = i;
        return;
      }
      if (x.kind == StmtKind::For && x.axis == "persistent") {
        tile_var_p_ = x.var;
        tile_loop_p_ = {&b, i};
        for (const Stmt& c : x.body)
          if (c.kind == StmtKind::Let) prod_lets_.insert(c.var);
      }
      if (x.kind == StmtKind::For || x.kind == StmtKind::If) {
        find_producer(x.body);
        if (prod_) return;
      }
    }
  }

  // The ring's depth S: the slab loop's slot `count % S` in its empty-barrier wait; 0 where
  // the loop does not show it.
  static int64_t ring_depth(const Stmt& loop) {
    int64_t depth = 0;
    std::function<void(const Expr&)> find = [&](const Expr& e) {
      if (e.kind() == Expr::Kind::Mod && e.rhs().is_const()) depth = e.rhs().const_value();
      else if (e.kind() == Expr::Kind::Add) find(e.lhs());
    };
    for (const Stmt& x : loop.body)
      if (x.kind == StmtKind::MbarWait && depth == 0) find(x.value);
    return depth;
  }

  // `e` with the tile loop's Lets substituted (m_b, n_b, ...) and the kernel's top ones.
  Expr full(Expr e) const {
    std::map<std::string, Expr> all = lets_;
    for (const Stmt& x : k_.body)
      if (x.kind == StmtKind::Let) all[x.var] = x.value;
    for (int round = 0; round < 16; ++round) {
      std::set<std::string> vars;
      e.collect_vars(vars);
      std::map<std::string, Expr> repl;
      for (const std::string& v : vars)
        if (auto it = all.find(v); it != all.end()) repl[v] = it->second;
      if (repl.empty()) return e;
      e = e.substitute(repl);
    }
    throw Skip{"its index Lets nest deeper than 16"};
  }

  void collect(Stmt& s, size_t top, const std::string& name,
               std::vector<std::pair<std::string, int64_t>>& loops, std::vector<Read>& out) {
    if (s.kind == StmtKind::For) {
      if (!s.extent.is_const()) {
        if (holds(s, [&](const Stmt& x) { return x.kind == StmtKind::Load && x.tensor == name; }))
          throw Skip{"it is read in epilogue loop `" + s.var + "` of run-time extent"};
        return;
      }
      loops.emplace_back(s.var, s.extent.const_value());
      for (Stmt& c : s.body) collect(c, top, name, loops, out);
      loops.pop_back();
      return;
    }
    if (s.kind == StmtKind::If) {
      for (Stmt& c : s.body) collect(c, top, name, loops, out);
      return;
    }
    if (s.kind == StmtKind::Load && s.tensor == name) out.push_back(Read{&s, top, loops, {}, {}, {}, {}, {}});
  }

  // Calls fn(env) for every consumer thread and loop iteration of `r`.
  void for_each_point(const Read& r, const std::function<void(Expr::Env&)>& fn) const {
    Expr::Env env;
    std::vector<int64_t> it(r.loops.size(), 0);
    for (int64_t t = 0; t < consumers_; ++t) {
      env["threadIdx.x"] = t;
      std::fill(it.begin(), it.end(), 0);
      while (true) {
        for (size_t i = 0; i < it.size(); ++i) env[r.loops[i].first] = it[i];
        fn(env);
        size_t d = it.size();
        while (d > 0 && ++it[d - 1] == r.loops[d - 1].second) it[--d] = 0;
        if (d == 0) break;
      }
    }
  }

  void load(const std::string& name) {
    // The producer's blocks as the previous operand left them (its inserts move them).
    prod_ = nullptr;
    tile_loop_p_ = {nullptr, 0};
    prod_lets_.clear();
    find_producer(*prod_arm_);
    const TensorDecl e = p_.tensor(name);
    if (e.shape.size() != 2)
      throw Skip{"it has rank " + std::to_string(e.shape.size()) + " (a batch of operands through a "
                 "rank-3 tensor map is not built)"};
    const int64_t eb = dtype_bytes(e.dtype);
    const Expr ld = e.strides()[0];
    if (ld.is_const() && ld.const_value() * eb % 16 != 0)
      throw Skip{"its rows are " + std::to_string(ld.const_value() * eb) +
                 " B apart; a tensor map's row pitch is a multiple of 16 B"};
    const int64_t S = kSpanBytes / eb;
    std::vector<Read> reads;
    std::vector<std::pair<std::string, int64_t>> loops;
    for (size_t i = e0_; i < epi_->size(); ++i) collect((*epi_)[i], i, name, loops, reads);
    if (reads.empty()) throw Skip{"no reads"};
    // Decompose every read: block origin + cell.
    int64_t rows = 0, cols = 0;
    for (Read& rd : reads) {
      std::set<std::string> loop_vars;
      for (const auto& [v, n] : rd.loops) loop_vars.insert(v);
      auto local = [&](const Expr& t) {
        if (t.is_const()) return true;
        const Expr f = full(t);
        if (f.is_const() || f.uses("threadIdx.x")) return true;
        for (const std::string& v : loop_vars)
          if (f.uses(v)) return true;
        return false;
      };
      auto rc = split_row_col(rd.load->index.at(0), ld);
      if (!rc) throw Skip{"read at " + rd.load->index.at(0).str() + ", not `row * " + ld.str() + " + col`"};
      auto split = [&](const Expr& x, Expr& cell, Expr& block) {
        cell = Expr(0);
        block = Expr(0);
        for (const Expr& t : sum_terms(distribute_constants(x))) {
          if (local(t)) cell = cell + t;
          else if (full(t).uses("threadIdx.x")) throw Skip{"index term " + t.str() + " mixes block and thread"};
          else block = block + t;
        }
      };
      split(rc->first, rd.r, rd.row_block);
      split(rc->second, rd.c, rd.col_block);
      const Read& f0 = reads[0];
      auto same = [](const Expr& a, const Expr& b) {
        auto d = constant_difference(a, b);
        return a.same_as(b) || (d && *d == 0);
      };
      if (!same(f0.row_block, rd.row_block) || !same(f0.col_block, rd.col_block))
        throw Skip{"its reads have different block origins"};
      // The split holds at random points.
      const Expr f = full(rd.load->index.at(0));
      const Expr g = full((rd.row_block + rd.r) * ld + rd.col_block + rd.c);
      if (!agree_at_random_points(f, g, 56))
        throw Skip{"its read offset " + rd.load->index[0].str() + " does not split into a block origin and a cell"};
      const Expr fr = full(rd.r), fc = full(rd.c);
      std::set<std::string> cv;
      fr.collect_vars(cv);
      fc.collect_vars(cv);
      for (const std::string& v : cv)
        if (v != "threadIdx.x" && !loop_vars.count(v))
          throw Skip{"a cell index uses `" + v + "`, neither the thread nor an epilogue loop"};
      const int width = rd.load->width;
      bool ok = true;
      for_each_point(rd, [&](Expr::Env& env) {
        const int64_t r = fr.eval(env), c = fc.eval(env);
        if (r < 0 || c < 0 || c % S + width > S) ok = false;
        rows = std::max(rows, r + 1);
        cols = std::max(cols, c + width);
        rd.strips.insert(c / S);
      });
      if (!ok) throw Skip{"a read lies before the block's origin or across a strip"};
    }
    // The tile: R rows, whole strips (the consumers' cells, rounded up to a strip).
    if (rows > 256) throw Skip{"its tile has " + std::to_string(rows) + " rows; a TMA box at most 256"};
    const int64_t strips = (cols + S - 1) / S;
    const int64_t nb = buffers_knob_ > 0 ? std::min(buffers_knob_, strips) : strips;
    if (strips % nb != 0)
      throw Error("EPI_LOAD_BUFFERS=" + std::to_string(buffers_knob_) + " does not divide the " +
                  std::to_string(strips) + " column strips of " + name + "'s tile in kernel " +
                  k_.name + "; use a divisor of " + std::to_string(strips) + " (0: the whole tile)");
    // Per top-level statement, its strips; each strip's first and last statement.
    std::map<int64_t, std::pair<size_t, size_t>> span;
    for (const Read& rd : reads)
      for (int64_t j : rd.strips) {
        auto it = span.find(j);
        if (it == span.end()) span[j] = {rd.top, rd.top};
        else it->second = {std::min(it->second.first, rd.top), std::max(it->second.second, rd.top)};
      }
    // Each thread reads its own cells, but one thread per warpgroup releases the buffer:
    // the release follows a barrier that holds the whole warpgroup (k:053's per-strip named
    // barrier, or one added at the end of the epilogue), which orders every reader's loads
    // before it. release[j]: the position the release goes in front of.
    const Block& body = *epi_;
    auto warpgroup_barrier = [&](const Stmt& x) {
      return x.kind == StmtKind::Barrier && !x.named_arrive() &&
             (x.imm == 0 || int64_t(x.imm) % kWarpgroup == 0);
    };
    bool add_barrier = false;
    std::map<int64_t, size_t> release;
    for (const auto& [j, fl] : span) {
      size_t b = fl.second + 1;
      while (b < body.size() && !warpgroup_barrier(body[b])) ++b;
      if (b == body.size()) add_barrier = true;
      release[j] = b + 1;
    }
    for (const auto& [j, fl] : span)
      if (auto prev = span.find(j - nb); j >= nb && prev != span.end() && release[j - nb] > fl.first)
        throw Error("EPI_LOAD=tma: kernel " + k_.name + "'s epilogue reads column strip " +
                    std::to_string(j) + " of " + name + " before it is done with strip " +
                    std::to_string(j - nb) + ", which shares its buffer (EPI_LOAD_BUFFERS=" +
                    std::to_string(nb) + "); use EPI_LOAD_BUFFERS=" + std::to_string(strips) +
                    " (the whole tile) or EPI_LOAD=direct");

    // The producer computes the box corners: what they use must be in its scope.
    for (const Expr& x : {reads[0].row_block, reads[0].col_block}) {
      std::set<std::string> vars;
      x.collect_vars(vars);
      for (const std::string& v : vars)
        if (lets_.count(v) && !prod_lets_.count(v))
          throw Skip{"its block origin uses `" + v + "`, which the producer does not compute"};
    }

    // The buffer, its tensor map and barriers.
    TensorDecl buf;
    buf.name = name + "_s";
    for (int i = 2; p_.has_tensor(buf.name); ++i) buf.name = name + "_s" + std::to_string(i);
    buf.dtype = e.dtype;
    buf.role = TensorRole::Shared;
    buf.shape = {Expr(nb), Expr(rows), Expr(S)};
    const int log_eb = eb == 4 ? 2 : eb == 2 ? 1 : 0;
    buf.swizzle = Swizzle{3, 4 - log_eb, 3};
    TmaDescriptor d;
    d.name = buf.name + "_tmap";
    d.tensor = name;
    d.shared = buf.name;
    d.box = {S, rows};
    d.swizzle_bytes = int(kSpanBytes);
    const int64_t full_base = k_.mbarriers, empty_base = full_base + nb;
    const int64_t slab = rows * S;
    const int64_t box_bytes = slab * eb;

    // Reads retargeted: strip j's cell (r, c) at buffer j % NB, row r, column c - j * S.
    for (Read& rd : reads) {
      Expr at;
      if (rd.strips.size() == 1) {
        const int64_t j = *rd.strips.begin();
        at = Expr(j % nb * slab - j * S) + rd.r * S + rd.c;
      } else {
        at = rd.c / S % nb * slab + rd.r * S + rd.c % S;
      }
      rd.load->tensor = buf.name;
      rd.load->index = {at};
    }

    // Fill numbers: F = t * (strips / NB) + j / NB.
    const Expr t = tile_var_c_.empty() ? Expr(0) : Expr::var(tile_var_c_);
    auto fill = [&](int64_t j) { return t * (strips / nb) + Expr(j / nb); };
    // Consumers: waits before each strip's first reader, releases after its last, inserted
    // from the back so that the indices stay valid.
    std::vector<std::pair<size_t, Stmt>> inserts;  // (position, statement), before position
    const Expr first_thread = Expr::make(Expr::Kind::Eq, Expr::var("threadIdx.x") % kWarpgroup, Expr(0));
    for (const auto& [j, fl] : span) {
      inserts.push_back({fl.first, Stmt::MbarWait(Expr(full_base + j % nb), fill(j) % 2)});
      inserts.push_back({release.at(j), Stmt::If(first_thread, {Stmt::MbarArrive(Expr(empty_base + j % nb))})});
    }
    if (add_barrier) {
      // Every consumer thread runs the epilogue: a named barrier per consumer warpgroup
      // (k:053's ids and counts), or the consumers' one where a warpgroup is the block.
      const Expr tid = Expr::var("threadIdx.x");
      epi_->push_back(Stmt::NamedBarrier(Expr(1) + tid / kWarpgroup, int(kWarpgroup)));
    }
    std::stable_sort(inserts.begin(), inserts.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    // Equal positions: a release (after statement p - 1) goes before a wait (before p);
    // sorted descending by position and inserted at the same index, the later insert lands
    // first, so insert waits before releases at one position.
    for (size_t i = 0; i < inserts.size();) {
      size_t j = i;
      Block waits, releases;
      while (j < inserts.size() && inserts[j].first == inserts[i].first) {
        (inserts[j].second.kind == StmtKind::MbarWait ? waits : releases).push_back(inserts[j].second);
        ++j;
      }
      Block at = releases;
      at.insert(at.end(), waits.begin(), waits.end());
      epi_->insert(epi_->begin() + long(inserts[i].first), at.begin(), at.end());
      i = j;
    }

    // Producer: after the slab loop, the tile's strips. With fewer buffers than strips,
    // strips NB.. wait for the consumers to release strips 0.. of the same tile, in its
    // epilogue: issued right after the slab loop they would hold back the next tile's
    // first slabs until then. In a persistent loop they are issued instead inside the next
    // tile's slab loop, once its first S slabs (the ring's depth) are issued — the ring is
    // full then, and its next slot frees only after the epilogue anyway — and after the
    // tile loop for the last tile.
    const Read& r0 = reads[0];
    auto issue = [&](int64_t j, const Expr& t, const Expr& row0, const Expr& col0) {
      const Expr f = t * (strips / nb) + Expr(j / nb);
      const Expr full_b = Expr(full_base + j % nb), empty_b = Expr(empty_base + j % nb);
      return Block{Stmt::MbarWait(empty_b, (f + 1) % 2), Stmt::MbarArriveExpectTx(full_b, box_bytes),
                   Stmt::TmaLoad(buf.name, Expr(j % nb * slab), name, {row0, col0 + Expr(j * S)},
                                 d.name, full_b, box_bytes)};
    };
    const Expr tp = tile_var_p_.empty() ? Expr(0) : Expr::var(tile_var_p_);
    Stmt& slab_loop = (*prod_)[p_at_];
    const int64_t ring = ring_depth(slab_loop);
    const bool defer = nb < strips && tile_loop_p_.first && ring > 0;
    Block first_round;
    for (int64_t j = 0; j < (defer ? nb : strips); ++j)
      for (Stmt& x : issue(j, tp, r0.row_block, r0.col_block)) first_round.push_back(x);
    if (defer) {
      // The previous tile's strips NB..: its origin is the origin's Lets expanded, at t - 1.
      const Expr row = full(r0.row_block), col = full(r0.col_block);
      auto later = [&](const Expr& t) {
        const std::map<std::string, Expr> at = {{tile_var_p_, t}};
        Block b;
        for (int64_t j = nb; j < strips; ++j)
          for (Stmt& x : issue(j, t, row.substitute(at), col.substitute(at))) b.push_back(x);
        return b;
      };
      const Expr ko = Expr::var(slab_loop.var);
      const Expr when = Expr(0) < tp &&
                        Expr::make(Expr::Kind::Eq, ko, min(Expr(ring), slab_loop.extent - 1));
      slab_loop.body.insert(slab_loop.body.begin(), Stmt::If(when, later(tp - 1)));
      prod_->insert(prod_->begin() + long(p_at_) + 1, first_round.begin(), first_round.end());
      // Last: this moves the tile loop, and prod_ (its body) with it.
      auto [outer, at] = tile_loop_p_;
      const Expr tiles = (*outer)[at].extent;
      const Stmt last = Stmt::If(Expr(0) < tiles, later(tiles - 1));
      outer->insert(outer->begin() + long(at) + 1, last);
    } else {
      prod_->insert(prod_->begin() + long(p_at_) + 1, first_round.begin(), first_round.end());
    }
    prod_ = nullptr;

    // The barriers' setup, with k:015's and k:030's.
    bool inited = false;
    for (Stmt& x : k_.body) {
      if (x.kind != StmtKind::If || inited) continue;
      for (size_t i = 0; i < x.body.size(); ++i)
        if (x.body[i].kind == StmtKind::FenceMbarInit) {
          Block inits;
          for (int64_t b = 0; b < nb; ++b) inits.push_back(Stmt::MbarInit(Expr(full_base + b), 1));
          for (int64_t b = 0; b < nb; ++b)
            inits.push_back(Stmt::MbarInit(Expr(empty_base + b), int(consumers_ / kWarpgroup)));
          x.body.insert(x.body.begin() + long(i), inits.begin(), inits.end());
          inited = true;
          break;
        }
    }
    if (!inited) throw Error("k:056_tma_epilogue_operands: kernel " + k_.name + " has no mbarrier setup");
    k_.mbarriers += int(2 * nb);
    k_.tma.push_back(d);
    p_.tensors.push_back(buf);
    check_resources(buf.name, nb * box_bytes);
  }

  void check_resources(const std::string& buf, int64_t buf_bytes) const {
    const SharedLayout l = shared_layout(p_, k_);
    const int64_t bytes = kernel_smem_bytes(l, k_);
    if (bytes > s_.target.smem_per_block)
      throw Error("EPI_LOAD=tma: kernel " + k_.name + " needs " + std::to_string(bytes) +
                  " B of shared memory, " + std::to_string(buf_bytes) + " B of them for the "
                  "epilogue operand's buffer " + buf + " (knobs " + s_.knobs.str() + "); this GPU "
                  "allows " + std::to_string(s_.target.smem_per_block) + " B per block: lower "
                  "EPI_LOAD_BUFFERS (e.g. 1 or 2), STAGES or EPI_BUFFERS, or use EPI_LOAD=direct");
    if (l.offset_bytes.at(buf) % (8 * kSpanBytes) != 0)
      throw Error("EPI_LOAD=tma: kernel " + k_.name + "'s operand buffer " + buf + " starts at byte " +
                  std::to_string(l.offset_bytes.at(buf)) + " of shared memory, not a multiple of " +
                  std::to_string(8 * kSpanBytes) + " as its TMA swizzle needs; use EPI_LOAD=direct");
  }

  CompileState& s_;
  KernelProgram& p_;
  KernelOp& k_;
  const int64_t buffers_knob_;
  int64_t consumers_ = 0;
  Block* epi_ = nullptr;
  size_t e0_ = 0;
  Block* prod_ = nullptr;
  size_t p_at_ = 0;
  std::string tile_var_c_, tile_var_p_;
  std::pair<Block*, size_t> tile_loop_p_{nullptr, 0};  // the producer's persistent loop
  Block* prod_arm_ = nullptr;
  std::map<std::string, Expr> lets_;
  std::set<std::string> prod_lets_;
};

}  // namespace

Pass pass_tma_epilogue_operands() {
  return Pass{"k:056_tma_epilogue_operands", Level::Kernel, Level::Kernel,
              "with EPI_LOAD=tma a warp-specialized wgmma kernel's epilogue operands of the "
              "output's shape (residual, gate) are loaded by the producer with TMA into swizzled "
              "shared strips right after the tile's last K slab, and the consumers' epilogue reads "
              "them there (full/empty mbarriers per strip buffer)",
              {"EPI_LOAD", "EPI_LOAD_BUFFERS"},
              [](CompileState& s) {
                const std::string mode = s.knobs.get_str("EPI_LOAD", "direct");
                if (mode != "tma" && mode != "direct")
                  throw Error("EPI_LOAD=" + mode + ": use EPI_LOAD=tma (epilogue operands by TMA "
                              "during the mainloop) or EPI_LOAD=direct (global loads in the epilogue)");
                if (mode != "tma") return;
                const int64_t buffers = s.knob("EPI_LOAD_BUFFERS", 0);
                if (buffers < 0)
                  throw Error("EPI_LOAD_BUFFERS=" + std::to_string(buffers) + ": the operand "
                              "buffers per tile, at least 1 (0: the whole tile)");
                std::vector<std::string> skipped;  // why an operand keeps the direct reads
                int done = 0;
                for (auto& k : s.kernel.kernels) {
                  bool wgmma = false;
                  walk(k.body, [&](const Stmt& x) {
                    const WarpAtom* w = x.kind == StmtKind::Atom ? find_warp_atom(k, x.atom) : nullptr;
                    wgmma |= w && w->threads == kWarpgroup;
                  });
                  if (wgmma) done += OperandLoader(s, k, buffers).run(skipped);
                }
                // Where nothing was loaded so, the knob set records it: direct reads.
                s.used_knobs["EPI_LOAD"] = done > 0 ? "tma" : "direct";
                for (const std::string& why : skipped)
                  s.notes.push_back("EPI_LOAD=tma: epilogue operand " + why + "; it keeps the "
                                    "direct reads");
              }};
}

}  // namespace loom
