// t:040_stage_inputs — stage the slabs of A and B that a block reads per reduction step
// into shared memory (STAGE=sync|cp_async|tma, BK).
//
// Neighbouring threads read overlapping rows of A and columns of B; staging loads each
// BK-deep slab once per block, cooperatively, and the threads read their operands from
// shared memory. Steps, for the contraction's reduce loop `k`:
//  1. Split it: `for k_o in 0..ceil(K/BK)` around `for k_i in 0..BK reduce`, k = k_o*BK + k_i.
//  2. For every load of an input inside it, split each index into a block part (grid
//     variables, k_o) and a local part (thread/register variables, k_i); loads sharing a
//     tensor and block part form one slab whose extent per dimension is the local part's
//     range. The slab is declared as a Shared tensor `<tensor>_s`.
//  3. Wrap the k_i loop in `stage <mode>:` with one copy per slab; the loads now read the
//     shared tensor at their local part. The copy zero-fills outside the source, so the
//     load predicates and any K tail need no guards.
// Layout (SLAB_KOUTER): with 1 the slab keeps the reduction dimension outermost ([BK][BM]
// for A, the transposed-A layout of SIMT kernels: a thread's FM rows are contiguous, one
// vector load in the inner loop); with 0 it keeps the source's storage order. The default
// is 1 for STAGE=sync (the copy passes through registers, any order is free) and 0 for
// cp.async (a transposing cp.async moves one 4-byte element per instruction) and TMA
// (boxes land in storage order; it cannot transpose).
//
// SLAB_A and SLAB_B override that layout for one operand (the slab indexed along m is
// A's, along n B's): kinner keeps the reduction dimension innermost ([BM][BK], [BN][BK],
// K contiguous), kouter outermost. tf32 mma fragments come from ldmatrix only out of a
// K-contiguous slab (its b32 view has no .trans), so SLAB_B=kinner is the article's
// "B transposed into shared memory": a row-major B crosses over with 4-byte cp.async
// copies (one element each), or, with STAGE=sync, with vector global loads and scalar
// shared stores through registers.
//
// With ATOM=mma_* (t:030 left `for k_a` stepping by whole atoms of depth AK, and ATOM
// loops m_e, n_e, k_e inside it) BK must be a multiple of AK: k_a = k_o*(BK/AK) + k_i, so
// k = k_o*BK + k_i*AK + k_e. ATOM variables are local (they index within the slab), and
// the slabs keep storage order by default (SLAB_KOUTER=0: A_s[BM][BK], B_s[BK][BN] for
// untransposed operands), the order the fragment loads of k:025 (and later ldmatrix)
// read. STAGE must be sync or cp_async: the fragments are read from shared slabs.
//
// With ATOM=wgmma_* the slabs are read through matrix descriptors, in the swizzled layout
// t:046 gives them. STAGE=tma fills them with the copy engine (rows whole 16-byte units);
// STAGE=cp_async (or sync) with the block's threads, which write the same layout element
// by element (k:015: cp.async where alignment allows, else loads and shared stores), so
// ragged rows that TMA cannot address still reach wgmma. A slab may then also be
// transposed while it is written (SLAB_A / SLAB_B = kinner): what tf32 needs, since
// wgmma reads 32-bit operands K-major only, so with ATOM=wgmma_tf32 and a thread-filled
// slab kinner is the default for both operands. With STAGE=tma a kinner slab of an M-/N-major
// tf32 operand is asked for explicitly (the tf32 defaults of src/passes/families/wgmma.cpp):
// TMA lands each box in storage order in a staging slab beside it and the block's threads
// transpose it in shared memory (k:015_lower_stages).
#include <algorithm>
#include <set>

#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/mma_choice.h"
#include "passes/passes.h"

namespace loom {
namespace {

struct Split { Expr block = 0, local = 0; };

Split split_index(const Expr& e, const std::set<std::string>& local_vars) {
  std::vector<Expr> terms = sum_terms(e);
  Split s;
  for (const auto& t : terms) {
    std::set<std::string> v;
    t.collect_vars(v);
    bool local = false;
    for (const auto& name : v) local |= local_vars.count(name) != 0;
    (local ? s.local : s.block) = (local ? s.local : s.block) + t;
  }
  return s;
}

struct Slab {
  std::string tensor, shared;
  std::vector<Expr> block;        // per storage dim
  std::vector<int64_t> extent;    // per storage dim
  std::vector<std::string> axis;  // per storage dim
  int k_dim = -1;                 // storage dim holding k_i
};

class Stager {
 public:
  Stager(CompileState& s, TileProgram& p) : s_(s), p_(p) {}

  void run(TileOp& op) {
    mode_ = s_.knobs.get_str("STAGE", "sync");
    s_.used_knobs["STAGE"] = mode_;
    mma_ = chosen_mma(s_);
    if (is_wgmma(mma_) && mode_ == "direct")
      throw Error("ATOM=" + s_.knobs.get_str("ATOM", "fma") + " with STAGE=direct: wgmma reads "
                  "its operands from shared slabs through matrix descriptors; use STAGE=tma "
                  "(operand rows whole 16-byte units) or STAGE=cp_async (any rows)");
    if (mma_ && !is_wgmma(mma_) && mode_ != "sync" && mode_ != "cp_async")
      throw Error("ATOM=" + s_.knobs.get_str("ATOM", "fma") + " with STAGE=" + mode_ +
                  ": mma fragments are read from shared slabs filled by STAGE=sync or "
                  "STAGE=cp_async (tma is not built for mma yet); set one of those");
    if (mode_ == "direct") return;
    tf32_wgmma_ = is_wgmma(mma_) && mma_->k == 8;  // m64nNk8: the tf32 wgmma atoms
    k_outer_ = s_.knob("SLAB_KOUTER", mode_ == "sync" && !mma_ ? 1 : 0) != 0;
    if (k_outer_ && mode_ == "tma")
      throw Error("SLAB_KOUTER=1 with STAGE=tma: the copy engine writes boxes in the source's "
                  "storage order and cannot transpose a slab; use SLAB_KOUTER=0 or "
                  "STAGE=cp_async");
    for (const char* name : {"SLAB_A", "SLAB_B"})
      if (s_.knobs.has(name)) s_.used_knobs[name] = s_.knobs.get_str(name, "");
    Ranges ranges;
    std::set<std::string> locals;
    visit(op.body, ranges, locals);
  }

 private:
  using Ranges = std::map<std::string, Expr::Range>;

  void visit(Block& b, Ranges& ranges, std::set<std::string>& locals) {
    for (auto& st : b) {
      if (st.kind != StmtKind::For) {
        if (st.kind == StmtKind::If) visit(st.body, ranges, locals);
        continue;
      }
      if (st.loop_kind == LoopKind::Reduce && st.tier == Tier::None && !done_) {
        stage(st, ranges, locals);
        done_ = true;
        continue;
      }
      auto r = st.extent.bounds(ranges);
      if (r) ranges[st.var] = {0, r->hi - 1};
      bool local = st.tier == Tier::Warpgroup || st.tier == Tier::Warp || st.tier == Tier::Thread ||
                   st.tier == Tier::Register || st.tier == Tier::Atom;
      if (local) locals.insert(st.var);
      visit(st.body, ranges, locals);
      ranges.erase(st.var);
      locals.erase(st.var);
    }
  }

  void stage(Stmt& red, Ranges ranges, std::set<std::string> locals) {
    // The reduce loop steps by `step` elements of k: 1, or an mma atom's depth AK.
    const int64_t step = mma_ ? mma_->k : 1;
    int64_t K_known = -1;
    if (auto kr = red.extent.bounds(ranges); kr && kr->lo == kr->hi) K_known = kr->hi * step;
    int64_t BK = s_.knob("BK", mma_ ? std::min<int64_t>(2 * step, K_known > 0 ? K_known : 2 * step)
                                    : K_known > 0 ? std::min<int64_t>(16, K_known) : 16);
    if (BK % step != 0)
      throw Error("BK=" + std::to_string(BK) + " is not a multiple of the depth " +
                  std::to_string(step) + " of " + mma_->id + " (ATOM=" +
                  s_.knobs.get_str("ATOM", "fma") + "): a slab holds whole atoms; use BK=" +
                  std::to_string((BK + step - 1) / step * step));
    // The step loop is `k` (SIMT) or `k_a` (mma); the slab loops are named after the axis.
    const std::string k = mma_ ? red.axis : red.var, ko = k + "_o", ki = k + "_i";
    Block body = red.body;
    substitute_block(body, {{red.var, Expr::var(ko) * (BK / step) + Expr::var(ki)}});
    if (mma_)  // k = k_a*AK + k_e became (k_o*(BK/AK) + k_i)*AK + k_e: one term per variable
      walk(body, [](Stmt& st) {
        if (st.kind == StmtKind::Load)
          for (auto& e : st.index) e = distribute_constants(e);
      });
    ranges[ki] = {0, BK / step - 1};
    locals.insert(ki);

    // Register and atom loops inside the reduction body are local too.
    walk(body, [&](const Stmt& st) {
      if (st.kind == StmtKind::For && (st.tier == Tier::Register || st.tier == Tier::Atom)) {
        locals.insert(st.var);
        if (auto r = st.extent.bounds(ranges)) ranges[st.var] = {0, r->hi - 1};
      }
    });

    std::vector<Slab> slabs;
    walk(body, [&](Stmt& st) {
      if (st.kind != StmtKind::Load || !p_.has_tensor(st.tensor)) return;
      const TensorDecl& t = p_.tensor(st.tensor);
      if (t.role != TensorRole::Input) return;
      bool uses_k = false;
      for (const auto& e : st.index) uses_k |= e.uses(ki);
      if (!uses_k) return;
      Slab sl;
      sl.tensor = st.tensor;
      std::vector<Expr> local;
      for (size_t d = 0; d < st.index.size(); ++d) {
        Split sp = split_index(st.index[d], locals);
        auto r = sp.local.bounds(ranges);
        if (!r || r->lo < 0)
          throw Error("t:040_stage_inputs: cannot bound the local part `" + sp.local.str() +
                      "` of " + st.tensor + "'s index; set STAGE=direct");
        sl.block.push_back(sp.block);
        sl.extent.push_back(r->hi + 1);
        local.push_back(sp.local);
        if (sp.local.uses(ki)) sl.k_dim = int(d);
        std::set<std::string> v;
        sp.local.collect_vars(v);
        sl.axis.push_back(sp.local.uses(ki) ? k : axis_of(v));
      }
      // Dims without a local variable (batch dims: one entry per box) are all `x`; their
      // box variables need names of their own (x, x1, ..: rank 4's two batch dims).
      for (size_t d = 0; d < sl.axis.size(); ++d)
        for (int i = 1; std::count(sl.axis.begin(), sl.axis.begin() + long(d), sl.axis[d]) > 0; ++i)
          sl.axis[d] = axis_of({}) + std::to_string(i);
      Slab* same = nullptr;
      for (auto& o : slabs)
        if (o.tensor == sl.tensor && o.block.size() == sl.block.size()) {
          bool eq = true;
          for (size_t d = 0; d < sl.block.size(); ++d) eq &= o.block[d].same_as(sl.block[d]);
          if (eq) same = &o;
        }
      if (same) {
        for (size_t d = 0; d < sl.extent.size(); ++d)
          same->extent[d] = std::max(same->extent[d], sl.extent[d]);
      } else {
        sl.shared = unique_name(sl.tensor + "_s", slabs);
        slabs.push_back(sl);
        same = &slabs.back();
      }
      // Rewrite the load to read the shared slab at its local position.
      st.index = order(local, *same);
      st.tensor = same->shared;
      st.pred = Expr(1);
    });
    if (slabs.empty()) return;

    std::vector<StageCopy> copies;
    for (const auto& sl : slabs) {
      std::vector<int> dims = dim_order(sl);
      // A tf32 wgmma slab made K-major (kinner) from an M-/N-major operand is TMA-staged in
      // storage order and transposed by the threads (k:015's transposing stage); 16-bit
      // wgmma reads either majorness through its descriptors and needs none.
      const bool transposing = tf32_wgmma_ && sl.k_dim >= 0 && dims.back() == sl.k_dim;
      if (mode_ == "tma" && !transposing)
        for (size_t d = 0; d < dims.size(); ++d)
          if (dims[d] != int(d)) {
            const std::string knob = operand_knob(sl);
            throw Error(knob + "=" + s_.knobs.get_str(knob, "") + " with STAGE=tma: the copy "
                        "engine writes boxes in " + sl.tensor + "'s storage order and cannot "
                        "transpose its slab; leave " + knob + " unset or use STAGE=cp_async");
          }
      TensorDecl sh;
      sh.name = sl.shared;
      sh.dtype = p_.tensor(sl.tensor).dtype;
      sh.role = TensorRole::Shared;
      StageCopy c;
      c.shared = sl.shared;
      c.src = sl.tensor;
      c.src_index.resize(sl.block.size());
      for (int d : dims) {
        sh.shape.push_back(sl.extent[size_t(d)]);
        std::string v = sl.axis[size_t(d)] + "_c";
        c.vars.push_back(v);
        c.extents.push_back(sl.extent[size_t(d)]);
        c.src_index[size_t(d)] = sl.block[size_t(d)] + Expr::var(v);
      }
      p_.tensors.push_back(sh);
      copies.push_back(c);
    }
    Stmt inner = Stmt::For(ki, Expr(BK / step), LoopKind::Reduce, k, body);
    Stmt stage = Stmt::Stage(mode_, copies, {inner});
    red = Stmt::For(ko, ceil_div(red.extent, BK / step), LoopKind::Reduce, k, {stage});
  }

  // The operand knob of a slab: SLAB_A for the one indexed along m, SLAB_B along n.
  static std::string operand_knob(const Slab& sl) {
    for (const std::string& a : sl.axis)
      if (a == "m") return "SLAB_A";
    for (const std::string& a : sl.axis)
      if (a == "n") return "SLAB_B";
    return "";
  }

  // Shared dimension order: the reduction dimension outermost (SLAB_KOUTER, or the
  // operand's SLAB_A/SLAB_B=kouter), innermost (kinner), or where storage has it.
  std::vector<int> dim_order(const Slab& sl) const {
    const std::string knob = operand_knob(sl);
    std::string choice = knob.empty() ? "" : s_.knobs.get_str(knob, "");
    // wgmma reads 32-bit operands K-major only (its descriptors transpose 16-bit types
    // alone): slabs the threads write are transposed on the way unless a knob says
    // otherwise. TMA lands boxes in storage order, so there the operand must be K-major.
    if (choice.empty() && !knob.empty() && tf32_wgmma_ && mode_ != "tma") choice = "kinner";
    std::vector<int> dims;
    for (int d = 0; d < int(sl.block.size()); ++d)
      if (d != sl.k_dim || sl.k_dim < 0) dims.push_back(d);
    if (sl.k_dim < 0) return dims;
    if (choice == "kinner") dims.push_back(sl.k_dim);
    else if (choice == "kouter" || (choice.empty() && k_outer_)) dims.insert(dims.begin(), sl.k_dim);
    else dims.insert(dims.begin() + sl.k_dim, sl.k_dim);
    return dims;
  }

  std::vector<Expr> order(const std::vector<Expr>& per_dim, const Slab& sl) const {
    std::vector<Expr> out;
    for (int d : dim_order(sl)) out.push_back(per_dim[size_t(d)]);
    return out;
  }

  std::string axis_of(const std::set<std::string>& vars) const {
    for (const auto& v : vars) {
      auto us = v.find('_');
      if (us != std::string::npos) return v.substr(0, us);
    }
    return vars.empty() ? "x" : *vars.begin();
  }

  // A name no tensor and no slab of this nest has yet: one tensor read as both operands
  // (matmul(A, A.T)) has a slab per operand, declared only after the nest is walked.
  std::string unique_name(const std::string& base, const std::vector<Slab>& slabs) const {
    const auto taken = [&](const std::string& n) {
      if (p_.has_tensor(n)) return true;
      for (const Slab& o : slabs)
        if (o.shared == n) return true;
      return false;
    };
    std::string n = base;
    for (int i = 1; taken(n); ++i) n = base + std::to_string(i);
    return n;
  }

  CompileState& s_;
  TileProgram& p_;
  std::string mode_;
  const AtomDef* mma_ = nullptr;
  bool k_outer_ = true;
  bool done_ = false;
  bool tf32_wgmma_ = false;  // ATOM=wgmma_tf32: K-major slabs by default (dim_order)
};

}  // namespace

Pass pass_stage_inputs() {
  return Pass{"t:040_stage_inputs", Level::Tile, Level::Tile,
              "the contraction's operands are read from shared slabs filled once per BK "
              "step by `stage` bundles (unless STAGE=direct)",
              {"STAGE", "BK", "SLAB_KOUTER", "SLAB_A", "SLAB_B", "ATOM"},
              [](CompileState& s) {
                for (auto& op : s.tile.ops) Stager(s, s.tile).run(op);
              }};
}

}  // namespace loom
