// k:026_lower_wgmma — ATOM nests become wgmma.mma_async on shared tiles (ATOM=wgmma_*).
//
// Until here every thread of a warpgroup runs each ATOM nest whole, like the warps of the
// mma.sync path before k:025: accumulators acc[FM, FN, 64, N] and operand tiles
// in0[FM, 64, AK], in1[FN, AK, N] are replicated in all 128 threads, the operand tiles
// loaded from the shared slabs t:040 staged. wgmma instead reads A and B straight from
// shared memory through matrix descriptors and spreads C over the warpgroup's 128
// threads by the atom table's C layout, which is affine in the thread's warp w = t / 32,
// groupID g = t % 32 / 4 and threadID_in_group q = t % 4 plus a constant per value
// (checked against the table on every thread and value).
// Steps, for each ATOM nest (found by its loops' axes m, n, k):
//  1. (m, k) / (k, n): the nest is one unpredicated load of a shared slab into the A
//     (B) operand tile. It disappears; its load index is remembered per register array:
//     the flat offset of cell (r, c) is origin + r * row_stride + c * col_stride, both
//     strides constant (a slab without that affine shape is an error naming it).
//  2. (m, n, k): `acc[.., m_e, n_e] <- fma_f32(in0[.., m_e, k_e], in1[.., k_e, n_e])`
//     -> `acc[..] <- wgmma(A_s{origin, rs, cs}, B_s{origin, rs, cs})`, the operands the
//     shared tiles of step 1 with the MAC's register indices substituted and the cells
//     at 0 (stmt.h: a warpgroup atom's shared operand).
//  3. (m, n): the accumulators' zeroing or the epilogue -> one copy per C value (scalars
//     the body defines get a `_v<v>` suffix so the copies stay single-assignment).
//  4. The accumulator array loses its two cell dimensions for the atom's N/2 values; the
//     operand arrays and their now empty register loops go away.
//  5. Ordering (the instruction is asynchronous): in the outermost reduce loop holding
//     wgmma, `wgmma.fence` before the first statement that issues one (the zeroing or the
//     last iteration's accumulation wrote the registers), `wgmma.commit` and
//     `wgmma.wait 0` after the last — the slab is read and the accumulators written
//     before the loop's closing barrier lets the next copy overwrite the slot.
// With WGMMA_A=regs (the `_rs` variant) step 1 keeps the A nest as the fill of a register
// fragment in the atom's A layout (step 1r: ldmatrix or element loads from the slab,
// src/passes/wgmma_fragment.h), the product reads that fragment, and step 5 becomes 5r:
// one fragment and one commit group per atom step, a wait before each fill (wgmma reads A
// registers asynchronously) and a fence between fill and wgmma. tf32 shared operands must
// be K-major (no descriptor transpose for 32-bit types): an M-major shared A or an
// N-major B is an error naming the orientation that works (A from registers, which may
// lie M-major; SWAP_AB=1 to make an N-major B that A; or the threads' transposing copies).
// Step 6 (WGMMA_ZERO=scale_d, the default): the zeroing of the accumulators right before
// that reduce loop goes, and each wgmma in the loop takes scale-d `0 < k_o || 0 < k_i`
// (over the reduce loops from the slab loop down to it): the tile's first atom step
// computes D = A·B without reading its accumulators (PTX ISA 9.7.15.5.2: scale-d false
// ignores D's input), every later one accumulates. Between two tiles of a persistent
// kernel that saves the zeroing (N/2 registers per atom: 64 CS2R for m64n256) while the
// tensor pipes idle. Safe where (a) the loop runs at least once (a constant extent >= 1:
// otherwise nothing would zero the tile), (b) each accumulator array is written by one
// wgmma statement of the loop, whose first issue per fragment is at all-zero reduce
// variables, and (c) the zeroing covers the whole array and nothing between it and the
// loop touches the accumulators; otherwise the explicit zeroing stays.
// The kernel declares the atom (KernelOp::warp_atoms, threads = 128, shared B, and A
// shared or from registers) and the ldmatrix entries the fills use.
#include <optional>
#include <set>

#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/atom_nest.h"
#include "passes/mma_choice.h"
#include "passes/passes.h"
#include "passes/wgmma_fragment.h"

namespace loom {
namespace {

constexpr int kThreads = 128;

// Value v of thread t covers row = w_*(t/32) + g_*(t%32/4) + q_*(t%4) + offset[v].first,
// and likewise col: the C layout of every wgmma shape.
struct WarpgroupForm {
  int row_w = 0, row_g = 0, row_q = 0, col_w = 0, col_g = 0, col_q = 0;
  std::vector<std::pair<int, int>> offset;
};

WarpgroupForm warpgroup_form(const AtomDef& a) {
  const OperandLayout& c = operand_layout(a, "C");
  WarpgroupForm f;
  auto at = [&](int t, int v) { return c.map(t, v); };
  const auto base = at(0, 0);
  f.row_w = at(32, 0).first - base.first, f.col_w = at(32, 0).second - base.second;
  f.row_g = at(4, 0).first - base.first, f.col_g = at(4, 0).second - base.second;
  f.row_q = at(1, 0).first - base.first, f.col_q = at(1, 0).second - base.second;
  for (int v = 0; v < c.values_per_thread; ++v) f.offset.push_back(at(0, v));
  for (int t = 0; t < kThreads; ++t)
    for (int v = 0; v < c.values_per_thread; ++v) {
      const int w = t / 32, g = t % 32 / 4, q = t % 4;
      const std::pair<int, int> want = at(t, v);
      const std::pair<int, int> got = {f.row_w * w + f.row_g * g + f.row_q * q + f.offset[v].first,
                                       f.col_w * w + f.col_g * g + f.col_q * q + f.offset[v].second};
      if (got != want)
        throw Error("k:026_lower_wgmma: the C layout of " + a.id + " is not affine in the "
                    "thread's warp, groupID and threadID_in_group (thread " + std::to_string(t) +
                    ", value " + std::to_string(v) + ")");
    }
  return f;
}

// A shared operand tile as step 1 found it: the load's index over the array's indices.
struct SharedTile {
  std::string tensor;
  Expr index;
  std::vector<std::string> array_vars;  // the load's dst_index variables, in order
};

class WgmmaLowering {
 public:
  WgmmaLowering(const AtomDef& a, const ProgramBase& p, KernelOp& k, bool regs, bool scale_d,
                bool truncate, bool slab_fills)
      : atom_(a), id_(wgmma_variant_id(a, regs)), regs_(regs), scale_d_(scale_d),
        truncate_(truncate), slab_fills_(slab_fills), p_(p), c_(warpgroup_form(a)), k_(k) {}

  void run() {
    bool bound = false;
    for (const Stmt& s : k_.body) bound |= s.kind == StmtKind::Let && s.var == "wg_thread";
    lower(k_.body, bound);
    if (!used_) return;
    shrink_arrays(k_.body);
    if (regs_)
      order_async_rs(k_.body);
    else
      order_async(k_.body);
    if (scale_d_) zero_by_scale_d(k_.body);
    if (!find_warp_atom(k_, id_)) {
      k_.warp_atoms.push_back(warpgroup_atom(atom_, regs_));
      k_.warp_atoms.back().a_truncated = truncate_;
    }
    for (const std::string& id : copies_used_)
      if (!find_warp_copy(k_, id)) k_.warp_copies.push_back(warp_copy(atom(id)));
  }

 private:
  void lower(Block& b, bool bound) {
    for (size_t i = 0; i < b.size(); ++i) {
      Stmt& s = b[i];
      if (s.kind == StmtKind::For && s.tier == Tier::Atom) {
        if (!bound)
          throw Error("k:026_lower_wgmma: kernel '" + k_.name + "' has ATOM loops but no "
                      "`wg_thread` (k:010_bind_hardware binds it for warpgroup tiers)");
        Block out = lower_nest(s);
        b.erase(b.begin() + long(i));
        b.insert(b.begin() + long(i), out.begin(), out.end());
        i = i + out.size() - 1;
      } else if (s.kind == StmtKind::For || s.kind == StmtKind::If) {
        lower(s.body, bound);
      }
    }
  }

  Block lower_nest(const Stmt& top) {
    const AtomCells c = atom_cells(top, "k:026_lower_wgmma", atom_.id, atom_.m, atom_.n, atom_.k);
    const Block& body = *c.body;
    const bool m = !c.m.empty(), n = !c.n.empty(), k = !c.k.empty();
    if (m && n && k) return {product(body, c)};
    if (m && k && !n) return regs_ ? a_fragment(body, c) : remember_tile(body, c.m, c.k, "A");
    if (k && n && !m) return remember_tile(body, c.k, c.n, "B");
    if (m && n && !k) return per_value(body, c);
    throw Error("k:026_lower_wgmma: an ATOM nest over " + std::string(m ? "m " : "") +
                (n ? "n " : "") + (k ? "k " : "") +
                "is none of a wgmma's operands (m k: A, k n: B, m n: C, m n k: the product)");
  }

  static bool ends_in(const std::vector<Expr>& index, const std::string& row,
                      const std::string& col) {
    return index.size() >= 2 && index.end()[-2].is_var() && index.back().is_var() &&
           index.end()[-2].var_name() == row && index.back().var_name() == col;
  }

  // The nest's one unpredicated load of a shared slab into the operand tile (the form
  // t:040 leaves), checked.
  const Stmt& slab_load(const Block& body, const std::string& row, const std::string& col,
                        const char* operand) const {
    if (body.size() != 1 || body[0].kind != StmtKind::Load || body[0].width != 1 ||
        body[0].index.size() != 1 || !ends_in(body[0].dst_index, row, col))
      throw Error(std::string("k:026_lower_wgmma: wgmma reads its ") + operand + " operand from "
                  "shared memory, so its ATOM nest must be one load of a shared slab into the "
                  "operand tile; found `" + print_block(body) + "`");
    const Stmt& ld = body[0];
    if (p_.tensor(ld.tensor).role != TensorRole::Shared)
      throw Error(std::string("k:026_lower_wgmma: wgmma's ") + operand + " operand comes from " +
                  ld.tensor + ", which is not a shared slab (ATOM=wgmma_* needs STAGE=tma or "
                  "cp_async)");
    if (!ld.pred.is_const() || ld.pred.const_value() != 1)
      throw Error(std::string("k:026_lower_wgmma: the load of wgmma's ") + operand +
                  " operand is predicated (" + ld.pred.str() + "); the staged slab must hold the "
                  "whole tile (zero-filled at the edges) for wgmma to read it");
    return ld;
  }

  // Step 1.
  Block remember_tile(const Block& body, const std::string& row, const std::string& col,
                      const char* operand) {
    const Stmt& ld = slab_load(body, row, col, operand);
    SharedTile t{ld.tensor, ld.index[0], {}};
    for (const Expr& e : ld.dst_index) {
      if (!e.is_var())
        throw Error("k:026_lower_wgmma: operand array `" + ld.dst + "` is indexed by " + e.str() +
                    "; t:030 indexes operand tiles by loop variables");
      t.array_vars.push_back(e.var_name());
    }
    tiles_[ld.dst] = t;
    dead_arrays_.insert(ld.dst);
    return {};
  }

  // Step 1r (WGMMA_A=regs): the A nest becomes the fill of the register fragment
  // frag[.., v] (src/passes/wgmma_fragment.h: ldmatrix, or one load per value).
  Block a_fragment(const Block& body, const AtomCells& c) {
    const Stmt& ld = slab_load(body, c.m, c.k, "A");
    FragmentFill f = wgmma_a_fragment_fill(atom_, p_, ld, c.m, c.k, Expr::var("wg_thread"));
    if (!f.copy_id.empty()) copies_used_.insert(f.copy_id);
    a_frags_.insert(ld.dst);
    return f.stmts;
  }

  // The operand `o` of the MAC (an element of a remembered tile) as a shared operand.
  Operand shared_operand(const Operand& o, const char* operand) const {
    auto it = tiles_.find(o.name);
    if (it == tiles_.end())
      throw Error(std::string("k:026_lower_wgmma: the ") + operand + " operand `" + o.name +
                  "` of the product was not loaded from a shared slab in the same reduction step");
    const SharedTile& t = it->second;
    if (o.index.size() != t.array_vars.size())
      throw Error("k:026_lower_wgmma: `" + o.name + "` is indexed with " +
                  std::to_string(o.index.size()) + " indices but loaded with " +
                  std::to_string(t.array_vars.size()));
    // The load's own variables: register indices -> the MAC's, cells -> (r, c).
    std::map<std::string, Expr> at_cell;
    const size_t n = t.array_vars.size();
    for (size_t i = 0; i + 2 < n; ++i) at_cell[t.array_vars[i]] = o.index[i];
    auto offset = [&](int64_t r, int64_t c) {
      std::map<std::string, Expr> s = at_cell;
      s[t.array_vars[n - 2]] = Expr(r);
      s[t.array_vars[n - 1]] = Expr(c);
      return distribute_constants(t.index.substitute(s));
    };
    const Expr origin = offset(0, 0);
    // The step along a tile dimension, evaluated at a few points of the other variables
    // (the index is a flat offset of sums and products: a constant difference where the
    // tile is affine, which the symbolic simplifier does not always see).
    std::set<std::string> vars;
    t.index.collect_vars(vars);
    for (const Expr& e : o.index) e.collect_vars(vars);
    auto stride = [&](int64_t r, int64_t c, const char* along) {
      const Expr step = offset(r, c);
      std::optional<int64_t> d;
      for (int64_t sample : {0, 1, 3, 7}) {
        Expr::Env env;
        for (const std::string& v : vars) env[v] = sample;
        int64_t here = 0;
        try {
          here = step.eval(env) - origin.eval(env);
        } catch (const Error&) {
          continue;  // a symbol the sample cannot bind (sizes): other samples decide
        }
        if (d && *d != here)
          throw Error(std::string("k:026_lower_wgmma: the ") + operand + " tile in " + t.tensor +
                      " does not step by a constant along its " + along + " (" +
                      (step - origin).str() + "); wgmma descriptors need an affine tile");
        d = here;
      }
      if (!d)
        throw Error(std::string("k:026_lower_wgmma: cannot evaluate the ") + operand +
                    " tile's step in " + t.tensor);
      return Expr(*d);
    };
    // Rows and columns as the atom orders the tile (A: m x k, B: k x n).
    return Operand::value(t.tensor, {origin, stride(1, 0, "rows"), stride(0, 1, "columns")});
  }

  // Step 2.
  Stmt product(const Block& body, const AtomCells& c) {
    if (body.size() != 1 || body[0].kind != StmtKind::Atom || body[0].atom != "fma_f32" ||
        body[0].args.size() != 2)
      throw Error("k:026_lower_wgmma: the m n k ATOM nest must hold one fma_f32 (k:020 makes it "
                  "from multiply + accumulate); found `" + print_block(body) + "`");
    const Stmt& fma = body[0];
    const Operand* a = nullptr;
    const Operand* b = nullptr;
    for (const Operand& o : fma.args) {
      if (ends_in(o.index, c.m, c.k)) a = &o;
      else if (ends_in(o.index, c.k, c.n)) b = &o;
    }
    if (!a || !b || !ends_in(fma.dst_index, c.m, c.n))
      throw Error("k:026_lower_wgmma: `" + print_block(body) + "` does not multiply an A tile [.., " +
                  c.m + ", " + c.k + "] by a B tile [.., " + c.k + ", " + c.n + "] into [.., " +
                  c.m + ", " + c.n + "]");
    Operand a_operand;
    if (regs_) {
      if (!a_frags_.count(a->name))
        throw Error("k:026_lower_wgmma: the A operand `" + a->name + "` of the product was not "
                    "filled from a shared slab in the same reduction step");
      a_operand = Operand::value(a->name, {a->index.begin(), a->index.end() - 2});
    } else {
      a_operand = shared_operand(*a, "A");
    }
    const Operand b_operand = shared_operand(*b, "B");
    // The descriptor's transpose (imm-trans) exists for 16-bit types only: a tf32 tile in
    // shared memory must step by one element along K (A's columns, B's rows).
    if (atom_.a_type == DType::TF32) {
      auto unit = [](const Expr& e) { return e.is_const() && e.const_value() == 1; };
      if (!regs_ && !unit(a_operand.index[2]))
        throw Error("k:026_lower_wgmma: ATOM=wgmma_tf32 reads A from " +
                    a_operand.name + " M-major, and wgmma reads tf32 shared operands K-major only "
                    "(the descriptor transposes 16-bit types alone): load A into registers "
                    "(WGMMA_A=regs), transpose it in shared memory after TMA lands it "
                    "(SLAB_A=kinner with STAGE=tma), or give A K-major");
      if (!unit(b_operand.index[1]))
        throw Error("k:026_lower_wgmma: ATOM=wgmma_tf32 reads B from " + b_operand.name +
                    " N-major, and wgmma reads tf32 shared operands K-major only (the descriptor "
                    "transposes 16-bit types alone): give B K-major (B.T); with A K-major, run "
                    "the GEMM swapped with A from registers (SWAP_AB=1,WGMMA_A=regs: B^T "
                    "becomes an A that registers may hold M-major); transpose it in shared "
                    "memory after TMA lands it (SLAB_B=kinner with STAGE=tma); or let the "
                    "threads transpose the slabs while they copy (STAGE=cp_async)");
    }
    Stmt out = Stmt::Atom(id_, fma.dst, {a_operand, b_operand});
    out.dst_index.assign(fma.dst_index.begin(), fma.dst_index.end() - 2);
    accumulators_.insert(fma.dst);
    used_ = true;
    return out;
  }

  // Step 3: one copy of `body` per C value.
  Block per_value(const Block& body, const AtomCells& c) {
    const Expr t = Expr::var("wg_thread"), w = t / 32, g = t % 32 / 4, q = t % 4;
    Block out;
    for (size_t v = 0; v < c_.offset.size(); ++v) {
      Block copy = body;
      walk(copy, [&](Stmt& s) {
        auto cell = [&](std::vector<Expr>& index, const std::string& array) {
          if (array.empty() || !ends_in(index, c.m, c.n)) return;
          index.resize(index.size() - 2);
          index.push_back(Expr(int64_t(v)));
        };
        cell(s.dst_index, s.dst);
        for (auto& a : s.args) cell(a.index, a.name);
      });
      const auto [r0, c0] = c_.offset[v];
      substitute_block(copy, {{c.m, w * c_.row_w + g * c_.row_g + q * c_.row_q + r0},
                              {c.n, w * c_.col_w + g * c_.col_g + q * c_.col_q + c0}});
      suffix_defined_scalars(copy, "_v" + std::to_string(v));
      out.insert(out.end(), copy.begin(), copy.end());
    }
    return out;
  }

  // Step 4: accumulators keep one fragment of N/2 values per atom; the operand arrays
  // and the loops they leave empty go.
  void shrink_arrays(Block& b) {
    const int64_t values = int64_t(c_.offset.size());
    for (size_t i = 0; i < b.size();) {
      Stmt& s = b[i];
      if (s.kind == StmtKind::Alloc && dead_arrays_.count(s.dst)) {
        b.erase(b.begin() + long(i));
        continue;
      }
      if (s.kind == StmtKind::Alloc && a_frags_.count(s.dst)) {
        const int64_t a_values = operand_layout(atom_, "A").values_per_thread;
        if (s.index.size() < 2 || !s.index.back().is_const() || !s.index.end()[-2].is_const() ||
            s.index.end()[-2].const_value() * s.index.back().const_value() != a_values * kThreads)
          throw Error("k:026_lower_wgmma: A operand array `" + s.dst + "` does not end in one "
                      "atom's 64 x K tile");
        s.index.resize(s.index.size() - 2);
        s.index.push_back(Expr(a_values));
      }
      if (s.kind == StmtKind::Alloc && accumulators_.count(s.dst)) {
        if (s.index.size() < 2 || !s.index.back().is_const() || !s.index.end()[-2].is_const() ||
            s.index.end()[-2].const_value() * s.index.back().const_value() != values * kThreads)
          throw Error("k:026_lower_wgmma: accumulator array `" + s.dst + "` does not end in one "
                      "atom's 64 x N tile");
        s.index.resize(s.index.size() - 2);
        s.index.push_back(Expr(values));
      }
      if (s.kind == StmtKind::For || s.kind == StmtKind::If) {
        shrink_arrays(s.body);
        if (s.body.empty()) {
          b.erase(b.begin() + long(i));
          continue;
        }
      }
      ++i;
    }
  }

  static bool issues_wgmma(const Stmt& s, const std::string& id) {
    bool found = false;
    walk(Block{s}, [&](const Stmt& x) { found |= x.kind == StmtKind::Atom && x.atom == id; });
    return found;
  }

  // Step 5, in the outermost reduce loop that issues wgmma.
  void order_async(Block& b) {
    for (Stmt& s : b) {
      if (s.kind != StmtKind::For && s.kind != StmtKind::If) continue;
      if (!issues_wgmma(s, id_)) continue;
      if (s.kind == StmtKind::For && s.loop_kind == LoopKind::Reduce) {
        Block& body = s.body;
        size_t first = body.size(), last = 0;
        for (size_t i = 0; i < body.size(); ++i)
          if (issues_wgmma(body[i], id_)) first = std::min(first, i), last = i;
        body.insert(body.begin() + long(last) + 1, {Stmt::WgmmaCommit(), Stmt::WgmmaWait(0)});
        body.insert(body.begin() + long(first), Stmt::WgmmaFence());
        return;
      }
      order_async(s.body);
      return;
    }
  }

  // Whether `s` writes one of the A fragments (a fill).
  bool fills_fragment(const Stmt& s) const {
    bool found = false;
    walk(Block{s}, [&](const Stmt& x) {
      found |= x.kind != StmtKind::Alloc && !x.dst.empty() && a_frags_.count(x.dst) &&
               !(x.kind == StmtKind::Atom && x.atom == id_);
    });
    return found;
  }

  // Moves the A fragments' allocations out of `b` (at any depth) into `out`.
  void take_fragment_allocs(Block& b, Block& out) const {
    for (size_t i = 0; i < b.size();) {
      if (b[i].kind == StmtKind::Alloc && a_frags_.count(b[i].dst)) {
        out.push_back(b[i]);
        b.erase(b.begin() + long(i));
        continue;
      }
      if (b[i].kind == StmtKind::For || b[i].kind == StmtKind::If) take_fragment_allocs(b[i].body, out);
      ++i;
    }
  }

  // Step 5r, in the outermost reduce loop that issues wgmma (WGMMA_A=regs): the slab
  // loop. wgmma reads its A registers asynchronously, like its shared operands: no
  // instruction may write (or read) them until a wait retires the group that reads them,
  // and the writes that fill them are ordered before the wgmma by wgmma.fence (PTX ISA
  // 9.7.15.5.2 wgmma.mma_async, 9.7.15.6.1 wgmma.fence). So:
  //   alloc frag[E, ..]                       one fragment per atom step of a slab
  //   for k_o (slab):
  //     for k_i in 0..E unroll:               the step loop (absent when E = 1)
  //       wgmma.wait E-1                      the group that read frag[k_i] a slab ago is done
  //       frag[k_i, ..] <- fill (ldmatrix)    issued while step k_i-1's wgmma runs
  //       wgmma.fence
  //       acc <- wgmma(frag[k_i, ..], B_s)
  //       wgmma.commit                        one group per step
  //     wgmma.wait 0                          (k:030: wait E, then release the previous slot)
  // The wait before a fill only holds anything up where the previous slab's group for the
  // same step still runs, which k:030's wait E may leave in flight; the allocation leaves the
  // slab loop so that it does not reset registers a wgmma still reads.
  void order_async_rs(Block& b) {
    for (size_t i = 0; i < b.size(); ++i) {
      Stmt& s = b[i];
      if (s.kind != StmtKind::For && s.kind != StmtKind::If) continue;
      if (!issues_wgmma(s, id_)) continue;
      if (s.kind != StmtKind::For || s.loop_kind != LoopKind::Reduce) {
        order_async_rs(s.body);
        return;
      }
      Block& body = s.body;
      Block allocs;
      take_fragment_allocs(body, allocs);
      size_t last = 0, step_at = body.size();
      for (size_t j = 0; j < body.size(); ++j) {
        if (!issues_wgmma(body[j], id_)) continue;
        last = j;
        if (body[j].kind == StmtKind::For && body[j].loop_kind == LoopKind::Reduce) {
          if (step_at != body.size())
            throw Error("k:026_lower_wgmma: WGMMA_A=regs: the slab loop `" + s.var + "` holds "
                        "two reduce loops of wgmma; one loop over the slab's atom steps expected");
          step_at = j;
        }
      }
      body.insert(body.begin() + long(last) + 1, Stmt::WgmmaWait(0));
      Stmt* step = step_at < body.size() - 1 ? &body[step_at] : nullptr;
      int64_t steps = 1;
      if (step) {
        if (!step->extent.is_const())
          throw Error("k:026_lower_wgmma: WGMMA_A=regs: the atom-step loop `" + step->var +
                      "` has no constant extent (BK / the atom's k); each step needs its own "
                      "fragment registers");
        steps = step->extent.const_value();
        step->unroll = true;  // frag[k_i] is a register array only with k_i constant
      }
      if (step)
        for (Stmt& a : allocs) a.index.insert(a.index.begin(), Expr(steps));
      if (step && slab_fills_)
        for (Stmt& a : allocs) a.index.insert(a.index.begin(), Expr(2));
      if (step) {
        const Expr ki = Expr::var(step->var);
        const Expr parity = Expr::var(s.var) % Expr(2);
        walk(step->body, [&](Stmt& x) {
          if (x.kind != StmtKind::Alloc && a_frags_.count(x.dst)) {
            x.dst_index.insert(x.dst_index.begin(), ki);
            if (slab_fills_) x.dst_index.insert(x.dst_index.begin(), parity);
          }
          for (Operand& o : x.args)
            if (a_frags_.count(o.name)) {
              o.index.insert(o.index.begin(), ki);
              if (slab_fills_) o.index.insert(o.index.begin(), parity);
            }
        });
      }
      if (step && slab_fills_) {
        order_slab(body, step_at);
        // Two copies of the slab per iteration in the CUDA source: NVVM reduces each
        // parity's fragment to SSA values, so with one copy the next slab's fills would
        // write the very PTX registers the previous slab's group (in flight) reads.
        s.unroll_by = 2;
      }
      else
        order_step(step ? step->body : body, steps);
      b.insert(b.begin() + long(i), allocs.begin(), allocs.end());
      return;
    }
  }

  // Step 5r with WGMMA_FILLS=slab, on the slab loop's body whose statement `at` is the
  // atom-step loop: the step loop splits in two, every step's fills first, then one fence
  // and every step's wgmma in one group:
  //   alloc frag[2, E, ..]                    two sets, by slab parity
  //   for k_o (slab):
  //     for k_i in 0..E unroll: frag[k_o % 2, k_i, ..] <- fill
  //     wgmma.fence
  //     for k_i in 0..E unroll: acc <- wgmma(frag[k_o % 2, k_i, ..], B_s)
  //     wgmma.commit                          one group per slab
  //     wgmma.wait 0                          (k:030: wait 1, then release the previous slot)
  // The fills of slab k_o write the set slab k_o - 2 read, whose group the closing wait of
  // slab k_o - 1 retired (it keeps only slab k_o - 1's in flight); so the fills need no
  // wait of their own, and run while slab k_o - 1's wgmmas do.
  void order_slab(Block& body, size_t at) {
    const Stmt step = body[at];
    size_t first = step.body.size();
    for (size_t i = 0; i < step.body.size(); ++i)
      if (issues_wgmma(step.body[i], id_)) {
        first = i;
        break;
      }
    for (size_t i = 0; i < step.body.size(); ++i) {
      const bool fill = fills_fragment(step.body[i]), mma = issues_wgmma(step.body[i], id_);
      if ((i < first && !fill) || (i >= first && fill) || (fill && mma))
        throw Error("k:026_lower_wgmma: WGMMA_FILLS=slab: an atom step must hold its A "
                    "fragments' fills, then its wgmma, and nothing else; found `" +
                    print_block(step.body) + "` (use WGMMA_FILLS=step)");
    }
    if (first == 0 || first == step.body.size())
      throw Error("k:026_lower_wgmma: WGMMA_FILLS=slab: an atom step without fills or without "
                  "a wgmma: `" + print_block(step.body) + "` (use WGMMA_FILLS=step)");
    Stmt fills = step, mmas = step;
    fills.body.assign(step.body.begin(), step.body.begin() + long(first));
    mmas.body.assign(step.body.begin() + long(first), step.body.end());
    body[at] = fills;
    body.insert(body.begin() + long(at) + 1, {Stmt::WgmmaFence(), mmas, Stmt::WgmmaCommit()});
  }

  // Step 5r within one atom step: wait, fills, fence, wgmma, commit.
  void order_step(Block& b, int64_t steps) {
    size_t fill = b.size(), first = b.size(), last = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      if (fills_fragment(b[i])) fill = std::min(fill, i);
      if (issues_wgmma(b[i], id_)) first = std::min(first, i), last = i;
    }
    if (fill == b.size() || first == b.size() || fill > first)
      throw Error("k:026_lower_wgmma: WGMMA_A=regs: an atom step must fill its A fragments "
                  "before its wgmma; found `" + print_block(b) + "`");
    for (size_t i = first; i < b.size(); ++i)
      if (fills_fragment(b[i]))
        throw Error("k:026_lower_wgmma: WGMMA_A=regs: an A fragment is filled after the first "
                    "wgmma of its step: `" + print_block(Block{b[i]}) + "`");
    b.insert(b.begin() + long(last) + 1, Stmt::WgmmaCommit());
    b.insert(b.begin() + long(first), Stmt::WgmmaFence());
    b.insert(b.begin() + long(fill), Stmt::WgmmaWait(int(steps - 1)));
  }

  // Whether `s` (at any depth) reads or writes an accumulator array.
  bool touches_accumulators(const Stmt& s) const {
    bool found = false;
    walk(Block{s}, [&](const Stmt& x) {
      found |= accumulators_.count(x.dst) > 0;
      for (const Operand& o : x.args) found |= accumulators_.count(o.name) > 0;
    });
    return found;
  }

  // The number of accumulator elements of `array` the nest `s` zeroes (each Init 0 times
  // the extents of the register loops around it), or -1 when `s` is not a pure zeroing of
  // accumulators (anything but register loops and `Init acc[..] = 0`).
  int64_t zeroed_elements(const Stmt& s, const std::string& array) const {
    if (s.kind == StmtKind::Init)
      return accumulators_.count(s.dst) && s.imm == 0.0 ? (s.dst == array ? 1 : 0) : -1;
    if (s.kind != StmtKind::For || s.tier != Tier::Register || !s.extent.is_const()) return -1;
    int64_t inner = 0;
    for (const Stmt& x : s.body) {
      const int64_t n = zeroed_elements(x, array);
      if (n < 0) return -1;
      inner += n;
    }
    return inner * s.extent.const_value();
  }

  // Step 6, at the reduce loop step 5 ordered (the outermost that issues wgmma).
  void zero_by_scale_d(Block& b) {
    for (size_t i = 0; i < b.size(); ++i) {
      Stmt& s = b[i];
      if (s.kind != StmtKind::For && s.kind != StmtKind::If) continue;
      if (!issues_wgmma(s, id_)) continue;
      if (s.kind != StmtKind::For || s.loop_kind != LoopKind::Reduce) {
        zero_by_scale_d(s.body);
        return;
      }
      if (!s.extent.is_const() || s.extent.const_value() < 1) return;  // (a)
      // (b): one wgmma statement per accumulator array.
      std::map<std::string, int> writers;
      walk(s.body, [&](const Stmt& x) {
        if (x.kind == StmtKind::Atom && x.atom == id_) ++writers[x.dst];
      });
      for (const auto& [array, count] : writers)
        if (count != 1) return;
      // (c): walking back from the loop, skip what does not touch the accumulators; the
      // zeroing nests come next, and together they cover every element of each array.
      size_t z = i;
      while (z > 0 && !touches_accumulators(b[z - 1])) --z;
      size_t first = z;
      while (first > 0 && zeroed_elements(b[first - 1], "") == 0) --first;
      if (first == z) return;
      std::map<std::string, int64_t> sizes;
      walk(b, [&](const Stmt& x) {
        if (x.kind != StmtKind::Alloc || !accumulators_.count(x.dst)) return;
        int64_t n = 1;
        for (const Expr& e : x.index) n *= e.is_const() ? e.const_value() : -1;
        sizes[x.dst] = n;
      });
      for (const auto& [array, count] : writers) {
        int64_t zeroed = 0;
        for (size_t j = first; j < z; ++j) zeroed += zeroed_elements(b[j], array);
        if (!sizes.count(array) || zeroed != sizes[array]) return;
      }
      set_scale_d(s.body, Expr(0) < Expr::var(s.var));
      b.erase(b.begin() + long(first), b.begin() + long(z));
      return;
    }
  }

  // Each wgmma under `b` accumulates unless every reduce variable down to it is 0:
  // `accumulate` is `0 < k_o || 0 < k_i ..` over those around `b`, an or of one term per
  // loop so that unrolling folds it (k_i = 1: 1; k_i = 0: `0 < k_o`).
  void set_scale_d(Block& b, const Expr& accumulate) const {
    for (Stmt& x : b) {
      if (x.kind == StmtKind::Atom && x.atom == id_) x.scale_d = accumulate;
      if (x.kind == StmtKind::For)
        set_scale_d(x.body, x.loop_kind == LoopKind::Reduce
                                ? Expr::make(Expr::Kind::Or, accumulate, Expr(0) < Expr::var(x.var))
                                : accumulate);
      else if (x.kind == StmtKind::If)
        set_scale_d(x.body, accumulate);
    }
  }

  const AtomDef& atom_;
  const std::string id_;  // the variant: the Atom statements' `atom`
  const bool regs_;       // WGMMA_A=regs: A from register fragments
  const bool scale_d_;    // WGMMA_ZERO=scale_d: step 6
  const bool truncate_;   // TF32_ROUND=none: a tf32 register A keeps its raw f32 bits
  const bool slab_fills_;  // WGMMA_FILLS=slab: step 5r per slab, fragments by slab parity
  const ProgramBase& p_;
  const WarpgroupForm c_;
  KernelOp& k_;
  std::map<std::string, SharedTile> tiles_;
  std::set<std::string> dead_arrays_, accumulators_;
  std::set<std::string> a_frags_;      // WGMMA_A=regs: the A fragment arrays
  std::set<std::string> copies_used_;  // the ldmatrix entries their fills use
  bool used_ = false;
};

}  // namespace

Pass pass_lower_wgmma() {
  return Pass{"k:026_lower_wgmma", Level::Kernel, Level::Kernel,
              "no ATOM loops under warpgroups: each atom is one wgmma.mma_async reading its "
              "A and B tiles from shared memory, its accumulators spread by the C layout",
              {"ATOM", "WGMMA_A", "WGMMA_ZERO", "TF32_ROUND", "WGMMA_FILLS"},
              [](CompileState& s) {
                const AtomDef* a = chosen_mma(s);
                if (!is_wgmma(a)) return;
                const std::string from = s.knobs.get_str("WGMMA_A", "smem");
                if (from != "smem" && from != "regs")
                  throw Error("WGMMA_A=" + from + ": wgmma takes A from shared memory (smem) "
                              "or from registers (regs)");
                s.used_knobs["WGMMA_A"] = from;
                const std::string zero = s.knobs.get_str("WGMMA_ZERO", "scale_d");
                if (zero != "scale_d" && zero != "explicit")
                  throw Error("WGMMA_ZERO=" + zero + ": wgmma kernels zero a tile's "
                              "accumulators through wgmma's scale-d (scale_d) or with a "
                              "zeroing loop (explicit)");
                s.used_knobs["WGMMA_ZERO"] = zero;
                // TF32_ROUND: how a tf32 register A is filled. none (the default) passes
                // the slab's raw f32 bits, whose top 19 the tensor core reads: truncation,
                // what it does to every shared tf32 operand (the shared B, and A in the
                // shared-A kernels), so both forms of a GEMM compute the same products,
                // without a cvt per value in the fills. rna rounds each value (cvt.rna, as
                // mma.sync's fragments): the register operand rounded, the shared one not.
                const std::string round = s.knobs.get_str("TF32_ROUND", "none");
                if (round != "rna" && round != "none")
                  throw Error("TF32_ROUND=" + round + ": a tf32 register A operand is rounded "
                              "to nearest (rna, cvt.rna) or passed as its raw f32 bits, which "
                              "the tensor core truncates (none)");
                const bool tf32_regs = from == "regs" && a->a_type == DType::TF32;
                if (tf32_regs) s.used_knobs["TF32_ROUND"] = round;
                // WGMMA_FILLS: when a register A is filled, per atom step (each its own
                // group) or per slab (one group, fragments double-buffered by slab parity).
                const std::string fills = s.knobs.get_str("WGMMA_FILLS", "step");
                if (fills != "step" && fills != "slab")
                  throw Error("WGMMA_FILLS=" + fills + ": a register A operand is filled per "
                              "atom step (step) or a whole slab at a time (slab)");
                if (from == "regs") s.used_knobs["WGMMA_FILLS"] = fills;
                for (auto& k : s.kernel.kernels)
                  WgmmaLowering(*a, s.kernel, k, from == "regs", zero == "scale_d",
                                tf32_regs && round == "none", fills == "slab")
                      .run();
              }};
}

}  // namespace loom
