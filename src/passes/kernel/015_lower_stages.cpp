// k:015_lower_stages — `stage` bundles become cooperative copies and barriers.
//
// Steps, for each Stage (its slabs, then its body):
//  1. Each slab's box (prod of extents elements) is split among the block's T threads:
//     `for c in 0..ceil(n/T)`, element e = c*T + threadIdx.x, decomposed with the
//     source's contiguous dimension fastest so a warp reads consecutive global addresses.
//  2. Where the source row and the box allow it (provably 16/8-byte aligned, all-or-
//     nothing bounds), each thread moves a vector of elements: VECTORIZE's alignment
//     proof; otherwise scalar elements — the fallback.
//  3. sync: `v = load src (0 outside)`, `shared[..] = v`. cp_async: `cp.async` with
//     zero fill, then commit and wait for all groups. Rows of 16-bit elements aligned
//     to 2 bytes only (an odd row length), with REALIGN=1: each thread loads the aligned
//     16-byte chunks covering its 8 elements and stores the shifted window as one 16-byte
//     unit (ir/realign.h), through registers like sync (and k:050's register ring).
//  4. A barrier makes the slab visible before the body; a barrier after the body keeps
//     the next iteration's copy from overwriting data still being read.
// With ATOM=wgmma_* the slabs are read by the tensor cores through the async proxy:
// every writing thread fences (fence.proxy.async) before the barrier of step 4.
// tma (sm_90) replaces steps 1-4 (lower_tma below): the copy engine moves each slab as
// one box, so one elected thread issues one TMA load per slab, all completing on the
// ring slot's mbarrier; every thread waits on that barrier's phase instead of a bar.sync.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "ir/error.h"
#include "ir/realign.h"
#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

// The named barrier at which the threads meet after transposing a TMA-staged slab (ids
// 1..3 are the epilogues' of k:053).
constexpr int64_t kTransposeBarrier = 15;

class Lowerer {
 public:
  Lowerer(CompileState& s, KernelProgram& p, KernelOp& k) : s_(s), p_(p), k_(k) {}

  void run() {
    async_proxy_reads_ = s_.knobs.get_str("ATOM", "fma").rfind("wgmma_", 0) == 0;
    realign_ = s_.knobs.get_int("REALIGN", 0);
    if (realign_ != 0 && realign_ != 1)
      throw Error("REALIGN=" + std::to_string(realign_) + ": 0 (2-byte copies for rows of "
                  "an odd number of 16-bit elements) or 1 (realigned 16-byte copies)");
    find_cluster_rank();
    Ranges r = kernel_builtin_ranges(k_);
    std::vector<const Stmt*> loops;
    lower(k_.body, r, loops);
    if (k_.mbarriers > 0) init_mbarriers();
    refresh_params();
  }

  // The copies now name the global tensors the stages read: params are every global
  // tensor the kernel touches (inputs first, in declaration order), then the symbols.
  void refresh_params() {
    std::set<std::string> used;
    walk(k_.body, [&](const Stmt& s) {
      for (const auto* n : {&s.tensor, &s.src})
        if (!n->empty()) used.insert(*n);
    });
    std::vector<std::string> params;
    for (auto role : {TensorRole::Input, TensorRole::Output, TensorRole::Temp})
      for (const auto& t : p_.tensors)
        if (t.role == role && used.count(t.name)) params.push_back(t.name);
    for (const auto& sym : p_.symbols) params.push_back(sym);
    k_.params = params;
  }

 private:
  void lower(Block& b, Ranges r, std::vector<const Stmt*>& loops) {
    for (size_t i = 0; i < b.size(); ++i) {
      Stmt& st = b[i];
      enter_range(r, st);
      if (st.kind == StmtKind::Stage && st.mode == "tma") {
        Block out = lower_tma(st, loops);
        b.erase(b.begin() + long(i));
        b.insert(b.begin() + long(i), out.begin(), out.end());
        i += out.size() - 1;
        continue;
      }
      if (st.kind == StmtKind::Stage) {
        // All slabs' loads first, then all stores: more global loads in flight.
        Block allocs, loads, stores;
        for (const auto& c : st.copies) copy(c, st.mode, r, allocs, loads, stores);
        Block out = allocs;
        out.insert(out.end(), loads.begin(), loads.end());
        out.insert(out.end(), stores.begin(), stores.end());
        if (st.mode == "cp_async") {
          out.push_back(Stmt::AsyncCommit());
          out.push_back(Stmt::AsyncWait(0));
        } else if (st.mode != "sync") {
          throw Error("k:015_lower_stages: unknown STAGE=" + st.mode);
        }
        // wgmma reads the slabs through the async proxy, which sees the threads' shared
        // writes (cp.async's included) only after each writer's fence.proxy.async; the
        // barrier then orders every writer's fence before any wgmma (PTX ISA, "Proxies").
        if (async_proxy_reads_) out.push_back(Stmt::FenceProxyAsync());
        out.push_back(Stmt::Barrier());
        for (auto& s : st.body) out.push_back(s);
        out.push_back(Stmt::Barrier());
        b.erase(b.begin() + long(i));
        b.insert(b.begin() + long(i), out.begin(), out.end());
        i += out.size() - 1;
        continue;
      }
      if (st.kind == StmtKind::For) loops.push_back(&st);
      if (st.kind == StmtKind::For || st.kind == StmtKind::If) lower(st.body, r, loops);
      if (st.kind == StmtKind::For) loops.pop_back();
    }
  }

  // ---- STAGE=tma ---------------------------------------------------------------------
  //  1. The ring slot s = k_o % S (t:050_multibuffer's prefix; 0 with one buffer) owns
  //     mbarrier base + s; its j-th fill is phase j, so iteration k_o waits for parity
  //     (k_o / S) % 2.
  //  2. Thread 0 arrives on the barrier announcing every slab's bytes (expect_tx), then
  //     issues one TMA load per slab: box corner = the slab's source index at box
  //     position 0, box = the slab's extents. Out-of-range elements of the box arrive as
  //     zeros (the tensor map's OOB fill), the zero fill any M, N, K relies on.
  //  3. All threads wait on the barrier's phase, run the body, then a barrier: the slot
  //     is refilled only after every thread has finished reading it.
  Block lower_tma(const Stmt& st, const std::vector<const Stmt*>& loops) {
    require_tma_target();
    // The k_o loop, possibly inside a persistent tile loop (t:027), whose ring count
    // the slot carries.
    bool nested_ok = !loops.empty();
    for (size_t i = 0; i + 1 < loops.size(); ++i) nested_ok &= loops[i]->axis == "persistent";
    if (!nested_ok)
      throw Error("k:015_lower_stages: STAGE=tma needs its stage directly inside one loop (the "
                  "k_o loop whose iteration picks the mbarrier phase); this one is inside " +
                  std::to_string(loops.size()) + " loops: use STAGE=cp_async");
    const Stmt& loop = *loops.back();
    Expr ko = Expr::var(loop.var);
    const StageCopy& first = st.copies.at(0);
    int64_t S = 1;
    Expr slot = 0;
    if (!first.shared_prefix.empty()) {
      const Expr& ring = p_.tensor(first.shared).shape.at(0);
      LOOM_CHECK(ring.is_const(), "ring dimension of " + first.shared + " is not constant");
      S = ring.const_value();
      slot = first.shared_prefix[0];
    }
    for (const StageCopy& c : st.copies)
      if (c.shared_prefix.size() != first.shared_prefix.size() ||
          (!c.shared_prefix.empty() && !c.shared_prefix[0].same_as(slot)))
        throw Error("k:015_lower_stages: STAGE=tma needs every slab of a stage in the same ring "
                    "slot (" + first.shared + " and " + c.shared + " differ)");
    Expr mbar = Expr(int64_t(k_.mbarriers)) + slot;
    k_.mbarriers += int(S);

    Block issue, transposes;
    int64_t total = 0;
    for (const StageCopy& c : st.copies) {
      if (!transposed(c)) {
        for (Stmt& load : tma_copy(c, mbar, total)) issue.push_back(std::move(load));
        continue;
      }
      const StageCopy staged = staging_copy(c);
      for (Stmt& load : tma_copy(staged, mbar, total)) issue.push_back(std::move(load));
      for (Stmt& t : transpose(c, staged)) transposes.push_back(std::move(t));
    }
    issue.insert(issue.begin(), Stmt::MbarArriveExpectTx(mbar, total));

    // The fill count of the ring: slot = count % S (t:050; count = k_o, or with a
    // persistent tile loop t_i * KO + k_o), fill number count / S, its phase parity.
    Expr count = ko;
    if (slot.kind() == Expr::Kind::Mod && slot.rhs().is_const()) count = slot.lhs();
    Block out = {Stmt::If(elected(), issue), Stmt::MbarWait(mbar, count / S % 2)};
    if (!transposes.empty()) {
      // The slot's K-major slab was last read by the wgmmas of fill count - S, which every
      // thread retired (its slab's closing wait) before the meeting of count - S + 1; with
      // S >= 3 a thread has passed that meeting before it writes here. With S = 2 only the
      // ring's mbarrier hand-off orders another warpgroup's retirement before these writes
      // (its release, the producer's wait and refill, this thread's wait on the full
      // barrier): sound in PTX's memory model, but the interpreter orders the threads of
      // one role by barriers alone, so the threads meet once more before writing.
      if (S < 3)
        out.push_back(Stmt::NamedBarrier(Expr(kTransposeBarrier), int(k_.block_threads)));
      // Every writer fences its shared stores for the async proxy (wgmma reads the slab
      // through descriptors), then the block's threads meet: a named barrier, which k:030
      // keeps for the consumer warpgroups (its producer never transposes).
      out.insert(out.end(), transposes.begin(), transposes.end());
      out.push_back(Stmt::FenceProxyAsync());
      out.push_back(Stmt::NamedBarrier(Expr(kTransposeBarrier), int(k_.block_threads)));
    }
    for (const auto& s : st.body) out.push_back(s);
    // In a cluster the next fill of this slot is partly a peer's multicast: every CTA must
    // be done reading it, so the slab ends in a cluster-wide sync (k:030, which clusters
    // require, replaces it with mbarrier hand-offs).
    out.push_back(k_.cluster[0] > 1 ? Stmt::ClusterSync() : Stmt::Barrier());
    return out;
  }

  static Expr elected() {
    return Expr::make(Expr::Kind::Eq, Expr::var("threadIdx.x"), Expr(0));
  }

  // ---- STAGE=tma with a transposed slab ----------------------------------------------
  // A slab stored in another dimension order than its source (t:040's SLAB_A / SLAB_B =
  // kinner of an M-/N-major operand: wgmma reads tf32 shared operands K-major only) is a
  // box TMA cannot write. Each such slab gets a staging slab `<slab>_nm` in the source's
  // order, in the same ring slot (its own ring buffer per slot), filled by TMA with the
  // slot's other boxes; after the slot's full barrier every thread of the block
  // transposes its share into the K-major slab (the layout t:046 gave it, swizzle and
  // chunking applied by TensorDecl::physical), fences for the async proxy and meets the
  // others at named barrier kTransposeBarrier before the wgmma reads it. CUTLASS's sm90
  // route for tf32 MN-major operands (its wgmma transpose collective), in Loom's ring:
  // the K-major slab shares the slot's lifetime, released once the wgmma retired.
  //
  // Thread e (of units = E_a / w * E_b, the block's T threads striding) takes w
  // consecutive elements of the slab's row b (its contiguous dimension a, the source's
  // outer one): w scalar loads from staging rows a..a+w-1 at column b — a warp reads 32
  // consecutive columns of one row, one wavefront — then the w values as one vector store
  // (k:040 folds the run) into the 16-byte unit of row b; the swizzle spreads a quarter
  // warp's 8 rows over 8 distinct units of the banks: no conflicts either way.
  static bool transposed(const StageCopy& c) {
    for (size_t j = 0; j < c.vars.size() && j < c.src_index.size(); ++j)
      if (!c.src_index[j].uses(c.vars[j])) return true;
    return false;
  }

  StageCopy staging_copy(const StageCopy& c) {
    const size_t rank = c.vars.size(), np = c.shared_prefix.size();
    if (!async_proxy_reads_ || rank != 2)
      throw Error("k:015_lower_stages: slab " + c.shared + " of " + c.src + " is stored "
                  "transposed (SLAB_A / SLAB_B = kinner) under STAGE=tma; the transposing TMA "
                  "stage is built for 2-D wgmma operand slabs (ATOM=wgmma_*, one GEMM): use "
                  "STAGE=cp_async, or leave SLAB_A / SLAB_B unset");
    if (k_.block_threads % 32 != 0)
      throw Error("k:015_lower_stages: the transposing TMA stage of " + c.shared + " meets at a "
                  "named barrier of whole warps; the block has " +
                  std::to_string(k_.block_threads) + " threads");
    StageCopy st;
    st.shared = c.shared + "_nm";
    st.src = c.src;
    st.shared_prefix = c.shared_prefix;
    st.src_index.resize(rank);
    st.vars.resize(rank);
    st.extents.resize(rank);
    // Source dimension d is the one whose index names the slab's variable j.
    for (size_t j = 0; j < rank; ++j) {
      size_t d = rank;
      for (size_t dd = 0; dd < rank; ++dd)
        if (c.src_index[dd].uses(c.vars[j])) d = dd;
      if (d == rank)
        throw Error("k:015_lower_stages: slab " + c.shared + "'s variable " + c.vars[j] +
                    " indexes no dimension of " + c.src);
      st.vars[d] = c.vars[j];
      st.extents[d] = c.extents[j];
    }
    st.src_index = c.src_index;
    const TensorDecl slab = p_.tensor(c.shared);
    if (p_.has_tensor(st.shared))
      throw Error("k:015_lower_stages: tensor " + st.shared + " exists already; the transposing "
                  "TMA stage names its staging slab so");
    TensorDecl t;
    t.name = st.shared;
    t.dtype = slab.dtype;
    t.role = TensorRole::Shared;
    t.overlay = slab.overlay;
    for (size_t i = 0; i < np; ++i) t.shape.push_back(slab.shape[i]);
    for (const Expr& e : st.extents) t.shape.push_back(e);
    p_.tensors.push_back(t);  // no swizzle: TMA writes it dense, rows of the source's order
    return st;
  }

  Block transpose(const StageCopy& c, const StageCopy& staged) {
    const TensorDecl& slab = p_.tensor(c.shared);
    const TensorDecl& stg = p_.tensor(staged.shared);
    // Staging [.., E_a, E_b] (source order), slab [.., E_b, E_a].
    const int64_t Ea = staged.extents[0].const_value(), Eb = staged.extents[1].const_value();
    int64_t w = std::min<int64_t>(s_.knobs.get_int("VECTORIZE", 4), 4);
    while (w > 1 && Ea % w != 0) w /= 2;
    if (w < 1) w = 1;
    const int64_t T = k_.block_threads, units = Ea / w * Eb, per_thread = (units + T - 1) / T;
    const std::string cv = c.shared + "_tc", ev = c.shared + "_te", vv = c.shared + "_tv",
                      reg = c.shared + "_tr";
    const Expr e = Expr::var(ev), b = e % Eb, a = e / Eb * w + Expr::var(vv);
    std::vector<Expr> at_stg = staged.shared_prefix, at_slab = c.shared_prefix;
    at_stg.push_back(a);
    at_stg.push_back(b);
    at_slab.push_back(b);
    at_slab.push_back(a);
    const Expr src_off = flat(stg, at_stg), dst_off = flat(slab, at_slab);
    const Expr slot = Expr::var(cv);
    Stmt ld = Stmt::Load(reg, staged.shared, {src_off});
    ld.dst_index = {slot, Expr::var(vv)};
    const Stmt wr = Stmt::Write(c.shared, {dst_off}, Operand::value(reg, {slot, Expr::var(vv)}));
    auto loop = [&](const std::string& axis, const Stmt& move) {
      Block inner = {Stmt::For(vv, Expr(w), LoopKind::Parallel, axis, {move}, Tier::Register)};
      if (units % T != 0) inner = {Stmt::If(e < units, inner)};
      inner.insert(inner.begin(), Stmt::Let(ev, Expr::var(cv) * T + Expr::var("threadIdx.x")));
      return Stmt::For(cv, Expr(per_thread), LoopKind::Parallel, axis, inner, Tier::Register);
    };
    // All loads, then all stores: the loads of every pass are in flight together.
    return {Stmt::Alloc(reg, {Expr(per_thread), Expr(w)}), loop("transpose.load", ld),
            loop("transpose.store", wr)};
  }

  // The copy engine (cp.async.bulk.tensor, mbarrier complete_tx) exists from sm_90 on.
  void require_tma_target() const {
    if (s_.target.compute_capability() < 90)
      throw Error("STAGE=tma needs sm_90 or newer (the TMA copy engine); the target is " +
                  s_.target.arch +
                  ": use STAGE=cp_async");
  }

  // A cluster kernel's rank Lets (k:010): `let m_cta = blockIdx.x % CM` for a 1-D cluster,
  // or the digits of a 2-D one, `let m_cta = blockIdx.x % C / CN`, `let n_cta = blockIdx.x
  // % CN`: each a (var, stride, extent) of rank = sum of var * stride.
  void find_cluster_rank() {
    const int64_t C = k_.cluster[0];
    if (C <= 1) return;
    auto is_rank_mod = [&](const Expr& e) {
      return e.kind() == Expr::Kind::Mod && e.lhs().is_var() &&
             e.lhs().var_name() == "blockIdx.x" && e.rhs().is_const() &&
             C % e.rhs().const_value() == 0;
    };
    int64_t covered = 1;
    for (const Stmt& s : k_.body) {
      if (s.kind != StmtKind::Let) continue;
      const Expr& v = s.value;
      if (is_rank_mod(v)) {
        digits_.push_back({s.var, 1, v.rhs().const_value()});
      } else if (v.kind() == Expr::Kind::FloorDiv && is_rank_mod(v.lhs()) && v.rhs().is_const() &&
                 v.lhs().rhs().const_value() % v.rhs().const_value() == 0) {
        const int64_t d = v.rhs().const_value();
        digits_.push_back({s.var, d, v.lhs().rhs().const_value() / d});
      } else {
        continue;
      }
      covered *= digits_.back().extent;
    }
    if (digits_.empty() || covered != C)
      throw Error("k:015_lower_stages: cluster kernel " + k_.name + " has no rank Lets covering "
                  "its " + std::to_string(C) + " CTAs");
  }

  // The CTAs of the cluster that agree with this one on every rank digit `src_index`
  // uses (they read the same slab): their count, this CTA's place among them, and the
  // mask of their ranks (for a 2-D cluster an expression of the used digits: A's row
  // of CTAs, B's column; Eq terms because the IR has no shifts).
  struct Sharers {
    int64_t count = 1;
    Expr place = 0, mask = 0;
  };
  Sharers sharers(const std::vector<Expr>& src_index) const {
    Sharers sh;
    std::vector<const ClusterDigit*> used, free;
    for (const ClusterDigit& d : digits_) {
      bool u = false;
      for (const Expr& e : src_index) u |= e.uses(d.var);
      (u ? used : free).push_back(&d);
    }
    // place: the free digits as one mixed-radix number, in rank order (the smaller
    // stride faster).
    int64_t radix = 1;
    std::vector<const ClusterDigit*> by_stride = free;
    std::sort(by_stride.begin(), by_stride.end(),
              [](const ClusterDigit* a, const ClusterDigit* b) { return a->stride < b->stride; });
    for (const ClusterDigit* d : by_stride) {
      sh.place = sh.place + Expr::var(d->var) * radix;
      radix *= d->extent;
    }
    sh.count = radix;
    // The ranks whose used digits are 0: every value of the free digits.
    int64_t base = 0;
    const int64_t C = k_.cluster[0];
    for (int64_t r = 0; r < C; ++r) {
      bool zero = true;
      for (const ClusterDigit* d : used) zero &= r / d->stride % d->extent == 0;
      if (zero) base |= int64_t(1) << r;
    }
    if (used.empty()) {
      sh.mask = base;
      return sh;
    }
    // Shifted by this CTA's used digits: one term per combination of their values.
    std::vector<int64_t> val(used.size(), 0);
    for (;;) {
      int64_t shift = 0;
      Expr when = 1;
      for (size_t i = 0; i < used.size(); ++i) {
        shift += val[i] * used[i]->stride;
        Expr eq = Expr::make(Expr::Kind::Eq, Expr::var(used[i]->var), Expr(val[i]));
        when = i == 0 ? eq : (when && eq);
      }
      sh.mask = sh.mask + when * (base << shift);
      size_t i = 0;
      while (i < used.size() && ++val[i] == used[i]->extent) val[i++] = 0;
      if (i == used.size()) break;
    }
    return sh;
  }

  // One slab as one TMA box: checks what the copy engine and the tensor map require,
  // declares the descriptor, returns the load; adds the box's bytes to `total`. A slab
  // whose rows are stored in chunks (TensorDecl::row_chunk: rows wider than the swizzle
  // span) is one box per chunk, each a column strip one span wide, side by side.
  Block tma_copy(const StageCopy& c, const Expr& mbar, int64_t& total) {
    const TensorDecl& src = p_.tensor(c.src);
    const TensorDecl& dst = p_.tensor(c.shared);
    const size_t rank = c.vars.size(), np = c.shared_prefix.size();
    const int64_t eb = dtype_bytes(src.dtype);
    const std::string what = c.src + " (slab " + c.shared + ")";
    if (rank != src.shape.size() || rank > 5)
      throw Error("k:015_lower_stages: STAGE=tma copies a box over every dimension of the "
                  "source (at most 5); the slab " + c.shared + " covers " +
                  std::to_string(rank) + " of " + c.src + "'s " +
                  std::to_string(src.shape.size()) + ": use STAGE=cp_async");
    // TMA writes the box densely, in the source's dimension order: box variable j must
    // be source dimension j, entering its index as `corner + var`.
    std::vector<Expr> corner;
    std::vector<int64_t> ext(rank);
    std::map<std::string, Expr> zero;
    for (const auto& v : c.vars) zero[v] = Expr(0);
    for (size_t j = 0; j < rank; ++j) {
      std::vector<Expr> terms = sum_terms(c.src_index[j]);
      int uses = 0;
      bool plain = false;
      for (const Expr& t : terms)
        for (size_t v = 0; v < rank; ++v)
          if (t.uses(c.vars[v])) {
            ++uses;
            plain = v == j && t.is_var();
          }
      if (uses != 1 || !plain)
        throw Error("k:015_lower_stages: STAGE=tma needs slab " + c.shared + " to be a box of " +
                    c.src + " in its storage order; its index " + c.src_index[j].str() +
                    " is not `corner + " + c.vars[j] + "`: use STAGE=cp_async");
      corner.push_back(c.src_index[j].substitute(zero));
      if (!c.extents[j].is_const()) throw Error("k:015_lower_stages: symbolic slab extent");
      ext[j] = c.extents[j].const_value();
      const Expr& dim = dst.shape[np + j];
      if (!dim.is_const() || dim.const_value() != ext[j])
        throw Error("k:015_lower_stages: STAGE=tma writes dense boxes; " + c.shared +
                    " has dimension " + dim.str() + " for a box extent of " +
                    std::to_string(ext[j]));
    }
    if (dst.pad != 0)
      throw Error("PAD_SMEM=" + std::to_string(dst.pad) + " with STAGE=tma: TMA writes dense "
                  "boxes and cannot pad rows; use SWIZZLE=128B (or another STAGE) instead");
    // cuTensorMapEncodeTiled: every global stride but the innermost element's is a
    // multiple of 16 bytes; with dense rows that is the row itself, for a view its pitches.
    const Expr& row = src.shape.back();
    if (!src.pitched() && row.is_const() && row.const_value() * eb % 16 != 0 && src.shape.size() > 1)
      throw Error("STAGE=tma needs rows of " + c.src + " to be a multiple of 16 bytes; " + c.src +
                  "'s rows are " + std::to_string(row.const_value() * eb) +
                  " B: use STAGE=cp_async");
    const std::vector<Expr> src_strides = src.strides();
    for (size_t d = 0; src.pitched() && d + 1 < src_strides.size(); ++d)
      if (src_strides[d].is_const() && src_strides[d].const_value() * eb % 16 != 0)
        throw Error("STAGE=tma needs the strides of " + c.src + " to be multiples of 16 bytes; its " +
                    (d + 2 == src_strides.size() ? std::string("row pitch")
                                                 : "stride of dimension " + std::to_string(d)) +
                    " is " + std::to_string(src_strides[d].const_value() * eb) +
                    " B: use STAGE=cp_async (or a buffer whose rows are whole 16-byte units)");
    const int64_t chunk = dst.row_chunk > 0 ? dst.row_chunk : ext[rank - 1];
    if (ext[rank - 1] % chunk != 0)
      throw Error("k:015_lower_stages: " + c.shared + "'s rows of " +
                  std::to_string(ext[rank - 1]) + " are not whole chunks of " +
                  std::to_string(chunk));
    const int64_t chunks = ext[rank - 1] / chunk;
    ext[rank - 1] = chunk;
    int64_t inner = ext[rank - 1] * eb;
    if (inner % 16 != 0)
      throw Error("STAGE=tma needs the inner box dimension of " + what +
                  " to be a multiple of 16 bytes; it is " + std::to_string(ext[rank - 1]) +
                  " x " + dtype_name(src.dtype) + " = " + std::to_string(inner) +
                  " B: widen the tile along " + c.src + "'s last dimension (BK or BN) or use "
                  "STAGE=cp_async");
    for (size_t j = 0; j < rank; ++j)
      if (ext[j] > 256)
        throw Error("STAGE=tma boxes have at most 256 elements per dimension; " + what +
                    " needs " + std::to_string(ext[j]) + " along dimension " +
                    std::to_string(j) + ": lower BM, BN or BK");
    int swizzle = 0;
    if (dst.swizzle.bits > 0) {
      swizzle = 16 << dst.swizzle.bits;
      int log_eb = eb == 4 ? 2 : eb == 2 ? 1 : eb == 8 ? 3 : 0;
      if (dst.swizzle.base != 4 - log_eb || dst.swizzle.shift != 3)
        throw Error("k:015_lower_stages: " + c.shared + "'s swizzle is not a TMA pattern");
      if (inner != swizzle)
        throw Error("STAGE=tma with a " + std::to_string(swizzle) + "B swizzle needs the inner "
                    "box dimension of " + what + " to span it exactly; it is " +
                    std::to_string(inner) + " B: use SWIZZLE=" +
                    (inner >= 128 ? std::string("128B") : std::to_string(inner) + "B") +
                    " or SWIZZLE=none");
    }
    int64_t elems = 1;
    for (int64_t e : ext) elems *= e;
    // The copy engine writes 128-byte aligned boxes; a swizzled box also starts on the
    // swizzle's repeat (8 rows of its span), or its XOR pattern would be shifted.
    int64_t align = swizzle ? 8 * swizzle : 128;
    if (np > 0 && elems * eb % align != 0)
      throw Error("STAGE=tma with STAGES>1: each ring buffer of " + c.shared + " holds " +
                  std::to_string(elems * eb) + " B, not a multiple of " +
                  std::to_string(align) + " B, so the next box would start misaligned for "
                  "the copy engine: use a tile whose slab is a multiple of " +
                  std::to_string(align) + " B");

    total += chunks * elems * eb;  // what lands in this CTA, from its loads or its peers'
    // In a cluster, a slab several CTAs share (its source index does not name a rank
    // digit: B under CLUSTER_M, A under CLUSTER_N) is split among them: each loads 1/C of
    // it and multicasts that part to every sharer, so each CTA's L2 reads of it drop by C.
    // The split takes whole chunks when the slab has C or more, else whole rows.
    const Sharers sh = sharers(c.src_index);
    const int64_t C = sh.count;
    const bool shared_by_cluster = C > 1;
    int64_t split_chunks = 1, split_rows = 1;
    if (shared_by_cluster) {
      if (chunks % C == 0) split_chunks = C;
      else if (rank >= 2 && ext[rank - 2] % C == 0 && (ext[rank - 2] / C) % 8 == 0) split_rows = C;
      else
        throw Error("a cluster of " + std::to_string(k_.cluster[0]) + " CTAs shares slab " +
                    c.shared + " among " + std::to_string(C) + " of them (CLUSTER_M, "
                    "CLUSTER_N), but its " + std::to_string(chunks) + " chunks of " +
                    std::to_string(ext[rank - 2]) + " rows do not split into " +
                    std::to_string(C) + " parts of whole chunks or 8-row groups: choose BM, "
                    "BN (or BK) so they do, or a smaller cluster");
    }
    if (split_rows > 1) {
      ext[rank - 2] /= split_rows;
      elems /= split_rows;
    }

    TmaDescriptor d;
    d.name = c.shared + "_tmap";
    d.tensor = c.src;
    d.shared = c.shared;
    for (size_t j = rank; j-- > 0;) d.box.push_back(ext[j]);
    d.swizzle_bytes = swizzle;
    k_.tma.push_back(d);

    Expr origin = 0;
    auto strides = dst.strides();
    for (size_t i = 0; i < np; ++i) origin = origin + c.shared_prefix[i] * strides[i];
    const Expr r = shared_by_cluster ? sh.place : Expr(0);
    const Expr all = shared_by_cluster ? sh.mask : Expr(0);
    if (split_rows > 1) {
      // Rank r's rows r*R/C.. of the slab, in every chunk: a slab of several chunks (BN=192:
      // three 64-column strips) is split by rows within each strip, one box per strip.
      const Expr row0 = r * ext[rank - 2];
      Block loads;
      for (int64_t j = 0; j < chunks; ++j) {
        std::vector<Expr> at = corner;
        at[rank - 2] = at[rank - 2] + row0;
        at[rank - 1] = at[rank - 1] + Expr(j * chunk);
        Stmt load = Stmt::TmaLoad(c.shared, origin + row0 * strides[np + rank - 2] + Expr(j * chunk),
                                  c.src, at, d.name, mbar, elems * eb);
        load.multicast = all;
        loads.push_back(load);
      }
      return loads;
    }
    // Chunk j: the strip of columns j*chunk.. of every row, at logical offset origin +
    // j*chunk (TensorDecl::physical places it after the j earlier strips); in a cluster,
    // rank r issues chunks r*chunks/C ...
    Block loads;
    const int64_t mine = chunks / split_chunks;
    for (int64_t jj = 0; jj < mine; ++jj) {
      const Expr j = r * mine + Expr(jj);
      std::vector<Expr> at = corner;
      at[rank - 1] = at[rank - 1] + j * chunk;
      Stmt load = Stmt::TmaLoad(c.shared, origin + j * chunk, c.src, at, d.name, mbar, elems * eb);
      load.multicast = all;
      loads.push_back(load);
    }
    return loads;
  }

  // One thread initializes every barrier for one arrival per phase (its own
  // arrive.expect_tx); the fence publishes the inits to the copy engine, the barrier to
  // the other threads, before anyone waits.
  void init_mbarriers() {
    Block init;
    for (int i = 0; i < k_.mbarriers; ++i) init.push_back(Stmt::MbarInit(Expr(i), 1));
    init.push_back(Stmt::FenceMbarInit());
    size_t at = 0;
    while (at < k_.body.size() && k_.body[at].kind == StmtKind::Let) ++at;
    // In a cluster the peers' multicasts and arrivals may reach this CTA's barriers as
    // soon as they run: a cluster-wide sync publishes the inits to them first.
    Block setup = {Stmt::If(elected(), init),
                   k_.cluster[0] > 1 ? Stmt::ClusterSync() : Stmt::Barrier()};
    k_.body.insert(k_.body.begin() + long(at), setup.begin(), setup.end());
  }

  // Emits one slab's copy: sync as a register-array load loop and a store loop (split so
  // that k:050_pipeline can move the loads ahead of the compute), cp.async as one loop.
  // Copy loops are REGISTER-tier: unrolled, so the staging array stays in registers.
  void copy(const StageCopy& c, const std::string& mode, const Ranges& r, Block& allocs,
            Block& loads, Block& stores) {
    const TensorDecl& src = p_.tensor(c.src);
    const TensorDecl& dst = p_.tensor(c.shared);
    size_t rank = c.vars.size(), np = c.shared_prefix.size();
    // Which copy var feeds which source dim; the one feeding the source's last
    // (contiguous) dimension is fastest.
    std::vector<int> src_dim_of(rank, -1);
    for (size_t j = 0; j < rank; ++j)
      for (size_t d = 0; d < c.src_index.size(); ++d)
        if (c.src_index[d].uses(c.vars[j])) src_dim_of[j] = int(d);
    std::vector<size_t> order;  // fastest first
    for (int d = int(c.src_index.size()) - 1; d >= 0; --d)
      for (size_t j = 0; j < rank; ++j)
        if (src_dim_of[j] == d) order.push_back(j);
    if (order.size() != rank) throw Error("k:015_lower_stages: copy " + c.shared + " is not a box");

    int64_t n = 1;
    std::vector<int64_t> ext(rank);
    for (size_t j = 0; j < rank; ++j) {
      if (!c.extents[j].is_const()) throw Error("k:015_lower_stages: symbolic slab extent");
      ext[j] = c.extents[j].const_value();
      n *= ext[j];
    }
    size_t fast = order[0];
    int src_last = int(c.src_index.size()) - 1;
    int w = vector_width(c, src, dst, fast, src_dim_of[fast] == src_last, ext[fast], mode);

    int64_t T = k_.block_threads;
    int64_t units = n / w;  // vectors to move
    int64_t per_thread = (units + T - 1) / T;
    std::string cv = c.shared + "_c", ev = c.shared + "_e";
    Expr e = Expr::var(ev);
    // Decompose the vector index: fastest dim counts vectors of w elements.
    std::map<std::string, Expr> coord;
    Expr rest = e;
    for (size_t oi = 0; oi < order.size(); ++oi) {
      size_t j = order[oi];
      int64_t extent = oi == 0 ? ext[j] / w : ext[j];
      Expr v = oi + 1 == order.size() ? rest : rest % extent;
      coord[c.vars[j]] = oi == 0 ? v * w : v;
      rest = rest / extent;
    }
    std::vector<Expr> src_idx, dst_idx = c.shared_prefix;
    for (const auto& x : c.src_index) src_idx.push_back(x.substitute(coord));
    for (size_t j = 0; j < rank; ++j) dst_idx.push_back(coord[c.vars[j]]);
    Expr src_off = flat(src, src_idx), dst_off = flat(dst, dst_idx);

    Ranges inner = r;
    inner[cv] = {0, per_thread - 1};
    inner[ev] = {0, units - 1};  // the `e < units` guard below bounds it
    Expr inb(1);
    for (size_t d = 0; d < src_idx.size(); ++d)
      if (!provably_less(src_idx[d], src.shape[d], inner)) inb = inb && (src_idx[d] < src.shape[d]);
    bool all_in = inb.is_const() && inb.const_value() == 1;

    Stmt let_e = Stmt::Let(ev, Expr::var(cv) * T + Expr::var("threadIdx.x"));
    auto loop = [&](const std::string& axis, Block move) {
      if (units % T != 0) move = {Stmt::If(e < units, move)};
      move.insert(move.begin(), let_e);
      return Stmt::For(cv, Expr(per_thread), LoopKind::Parallel, axis, move, Tier::Register);
    };

    // Rows of 16-bit elements that start only 2-byte aligned: with REALIGN=1 each thread
    // loads the two aligned 16-byte chunks covering its 8 elements and stores the shifted
    // window as one 16-byte unit (ir/realign.h), instead of 8 loads and stores of 2 bytes.
    if (w == 1 && realign_copy(c, src, dst, fast, order, ext, T, r, allocs, loads, stores))
      return;
    // cp.async moves 4, 8 or 16 bytes; a slab whose alignment allows only narrower
    // elements (bf16 rows of odd length) goes through registers instead — correct, and
    // the pipeline pass then leaves that loop unpipelined rather than mixing transports.
    if (mode == "cp_async" && w * dtype_bytes(src.dtype) >= 4) {
      loads.push_back(loop("copy.async", {Stmt::AsyncCopy(c.shared, dst_off, c.src, src_off, w, inb)}));
      return;
    }
    // sync: global -> registers (one vector load when the bounds are uniform), then
    // registers -> shared (contiguous in shared memory only along its last dimension).
    std::string v = c.shared + "_v";
    allocs.push_back(Stmt::Alloc(v, {Expr(per_thread), Expr(w)}));
    Expr slot = Expr::var(cv);
    Block ld;
    if (all_in) {
      Stmt l = Stmt::Load(v, c.src, {src_off});
      l.dst_index = {slot, Expr(0)};
      l.width = w;
      ld.push_back(l);
    } else {
      for (int i = 0; i < w; ++i) {
        Stmt l = Stmt::Load(v, c.src, {src_off + i});
        l.dst_index = {slot, Expr(i)};
        l.pred = inb;
        ld.push_back(l);
      }
    }
    Block st;
    Expr step = dst.strides()[np + fast];
    for (int i = 0; i < w; ++i)
      st.push_back(Stmt::Write(c.shared, {dst_off + step * i}, Operand::value(v, {slot, Expr(i)})));
    loads.push_back(loop("copy.load", ld));
    stores.push_back(loop("copy.store", st));
  }

  // The realigned copy of slab `c` (REALIGN=1), or false where it does not apply: 16-bit
  // elements whose box runs along the source's contiguous dimension (`corner + var`, 8
  // consecutive elements of one row per thread) and lands as whole 16-byte units of the
  // shared tensor (its last dimension, strides and swizzle units multiples of 8). The
  // element count wanted is 8 inside the source, fewer at the row's end (the next row's
  // elements are not this row's), 0 past another dimension's end: zero-filled.
  bool realign_copy(const StageCopy& c, const TensorDecl& src, const TensorDecl& dst, size_t fast,
                    const std::vector<size_t>& order, const std::vector<int64_t>& ext, int64_t T,
                    const Ranges& r, Block& allocs, Block& loads, Block& stores) {
    if (dtype_bytes(src.dtype) != 2 || dtype_bytes(dst.dtype) != 2) return false;
    s_.used_knobs["REALIGN"] = std::to_string(realign_);
    // 16-byte accesses: VECTORIZE (the widest access asked for) must allow them.
    if (realign_ != 1 || s_.knobs.get_int("VECTORIZE", 4) < 8) return false;
    constexpr int w = 8;  // 16-bit elements per 16-byte chunk
    const size_t rank = c.vars.size();
    if (fast != rank - 1 || ext[fast] % w != 0) return false;
    // The fast variable enters only the source's last index, as a plain `+ var`.
    for (size_t d = 0; d + 1 < c.src_index.size(); ++d)
      if (c.src_index[d].uses(c.vars[fast])) return false;
    int uses = 0;
    bool plain = false;
    for (const Expr& t : sum_terms(c.src_index.back()))
      if (t.uses(c.vars[fast])) ++uses, plain = t.is_var();
    if (uses != 1 || !plain) return false;
    // The destination: 8 elements of one 16-byte unit, rows and ring slots whole units.
    const auto ds = dst.strides();
    for (size_t d = 0; d + 1 < ds.size(); ++d)
      if (!provably_divisible(ds[d], w)) return false;
    if (dst.swizzle.bits != 0 && dst.swizzle.base < 3) return false;
    if (dst.row_chunk > 0 && dst.row_chunk % w != 0) return false;

    // Thread e's vector: the decomposition of copy() with the fast dimension counting
    // vectors of 8.
    const int64_t n = std::accumulate(ext.begin(), ext.end(), int64_t(1), std::multiplies<>());
    const int64_t units = n / w;
    const int64_t per_thread = (units + T - 1) / T;
    const std::string cv = c.shared + "_c", ev = c.shared + "_e";
    const Expr e = Expr::var(ev);
    std::map<std::string, Expr> coord;
    Expr rest = e;
    for (size_t oi = 0; oi < order.size(); ++oi) {
      const size_t j = order[oi];
      const int64_t extent = oi == 0 ? ext[j] / w : ext[j];
      const Expr v = oi + 1 == order.size() ? rest : rest % extent;
      coord[c.vars[j]] = oi == 0 ? v * w : v;
      rest = rest / extent;
    }
    std::vector<Expr> src_idx, dst_idx = c.shared_prefix;
    for (const auto& x : c.src_index) src_idx.push_back(x.substitute(coord));
    for (size_t j = 0; j < rank; ++j) dst_idx.push_back(coord[c.vars[j]]);
    const Expr g = flat(src, src_idx), d = flat(dst, dst_idx);

    Ranges inner = r;
    inner[cv] = {0, per_thread - 1};
    inner[ev] = {0, units - 1};
    const Expr& col = src_idx.back();
    const Expr& row_len = src.shape.back();
    Expr valid = w;
    if (!provably_less(col + (w - 1), row_len, inner))
      valid = Expr::make(Expr::Kind::Min,
                         Expr::make(Expr::Kind::Max, row_len - col, Expr(0)), Expr(w));
    for (size_t k = 0; k + 1 < src_idx.size(); ++k)
      if (!provably_less(src_idx[k], src.shape[k], inner)) valid = (src_idx[k] < src.shape[k]) * valid;

    const std::string v = c.shared + "_v";
    allocs.push_back(Stmt::Alloc(v, {Expr(per_thread), Expr(2 * w)}));
    const Expr slot = Expr::var(cv);
    Stmt let_e = Stmt::Let(ev, Expr::var(cv) * T + Expr::var("threadIdx.x"));
    auto realign_loop = [&](const std::string& axis, Block move) {
      if (units % T != 0) move = {Stmt::If(e < units, move)};
      move.insert(move.begin(), let_e);
      return Stmt::For(cv, Expr(per_thread), LoopKind::Parallel, axis, move, Tier::Register);
    };
    loads.push_back(realign_loop("copy.load", {ChunkLoad(v, {slot}, c.src, g, w, valid)}));
    stores.push_back(realign_loop("copy.store", {RealignedStore(c.shared, d, v, {slot}, g, w, valid)}));
    return true;
  }

  // Elements per thread-copy: 16 bytes when every condition holds, else narrower.
  int vector_width(const StageCopy& c, const TensorDecl& src, const TensorDecl& dst, size_t fast,
                   bool fast_is_contiguous, int64_t fast_extent, const std::string& mode) {
    int64_t want = s_.knobs.get_int("VECTORIZE", 4);
    int bytes = dtype_bytes(src.dtype);
    s_.used_knobs["VECTORIZE"] = std::to_string(want);
    for (int64_t w = std::min<int64_t>(want, 16 / bytes); w > 1; w /= 2) {
      if (!fast_is_contiguous || fast_extent % w != 0) continue;
      // Source: every non-last stride and the last index's block part divisible by w,
      // and the last dimension a multiple of w (bounds are all-or-nothing per vector).
      auto strides = src.strides();
      bool ok = src.shape.back().is_const() && src.shape.back().const_value() % w == 0;
      for (size_t d = 0; d + 1 < strides.size(); ++d) ok &= provably_divisible(strides[d], w);
      Expr last = c.src_index.back().substitute({{c.vars[fast], Expr(0)}});
      ok &= provably_divisible(last, w);
      // Destination: cp.async writes w contiguous elements, so the fast dim must be the
      // shared tensor's last with a row stride divisible by w.
      if (mode == "cp_async") {
        ok &= fast == c.vars.size() - 1;  // the box's last dim is the shared tensor's last
        auto ds = dst.strides();
        for (size_t d = 0; d + 1 < ds.size(); ++d) ok &= provably_divisible(ds[d], w);
        ok &= dst.swizzle.bits == 0 || dst.swizzle.base >= 2;  // swizzle keeps 16 B units
      }
      if (ok) return int(w);
    }
    return 1;
  }

  Expr flat(const TensorDecl& t, const std::vector<Expr>& idx) {
    auto strides = t.strides();
    Expr off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off = off + idx[d] * strides[d];
    return off;
  }

  CompileState& s_;
  KernelProgram& p_;
  KernelOp& k_;
  // A digit of a cluster kernel's rank: rank = sum of var * stride, var < extent.
  struct ClusterDigit {
    std::string var;
    int64_t stride, extent;
  };
  std::vector<ClusterDigit> digits_;
  bool async_proxy_reads_ = false;  // wgmma (ATOM=wgmma_*) reads the staged slabs
  int64_t realign_ = 0;             // REALIGN: realigned 16-byte copies of odd 16-bit rows
};

// A swizzled slab wgmma reads must start on its pattern's repeat (8 rows of its span):
// the descriptors XOR absolute address bits, Loom's layout tensor-relative offsets. TMA
// destinations are checked below; this covers slabs the threads fill (no tensor map).
void check_wgmma_slab_alignment(const KernelProgram& p, const SharedLayout& l) {
  for (const auto& [name, off] : l.offset_bytes) {
    const TensorDecl& t = p.tensor(name);
    if (t.swizzle.bits == 0) continue;
    const int64_t repeat = 8 * (int64_t(16) << t.swizzle.bits);
    if (off % repeat != 0)
      throw Error("shared tensor " + name + " starts at byte " + std::to_string(off) +
                  " of shared memory, not a multiple of the " + std::to_string(repeat) +
                  " B its swizzle repeats over, which wgmma's descriptors assume (the tensors "
                  "before it are not a multiple of that size): change BM, BN or BK, or SWIZZLE");
  }
}

// The dynamic buffer starts 1024-byte aligned (codegen asks for it when a kernel has
// tensor maps); each TMA destination must start on its swizzle's repeat as well.
void check_tma_alignment(const KernelProgram& p, const KernelOp& k, const SharedLayout& l) {
  for (const TmaDescriptor& d : k.tma) {
    int64_t align = d.swizzle_bytes ? 8 * d.swizzle_bytes : 128;
    int64_t off = l.offset_bytes.at(d.shared);
    if (off % align != 0)
      throw Error("STAGE=tma: shared tensor " + d.shared + " starts at byte " +
                  std::to_string(off) + " of shared memory, not a multiple of the " +
                  std::to_string(align) + " B its TMA boxes need (the tensors before it are " +
                  "not a multiple of that size): change BM, BN or BK, or SWIZZLE");
  }
}

}  // namespace

Pass pass_lower_stages() {
  return Pass{"k:015_lower_stages", Level::Kernel, Level::Kernel,
              "no Stage bundles: slabs move by cooperative (vector) copies or cp.async, "
              "fenced by barriers, or by TMA boxes completing on mbarriers; shared memory "
              "fits the block",
              {"VECTORIZE", "REALIGN"},
              [](CompileState& s) {
                for (auto& k : s.kernel.kernels) {
                  Lowerer(s, s.kernel, k).run();
                  SharedLayout layout = shared_layout(s.kernel, k);
                  check_tma_alignment(s.kernel, k, layout);
                  if (s.knobs.get_str("ATOM", "fma").rfind("wgmma_", 0) == 0)
                    check_wgmma_slab_alignment(s.kernel, layout);
                  int64_t bytes = kernel_smem_bytes(layout, k);
                  if (bytes > s.target.smem_per_block)
                    throw Error("shared memory: kernel " + k.name + " needs " +
                                std::to_string(bytes) + " B (knobs " + s.knobs.str() +
                                "); this GPU allows " + std::to_string(s.target.smem_per_block) +
                                " B per block (" +
                                std::to_string(s.target.smem_per_block / 1024) +
                                " KB) — lower BM, BN, BK or STAGES");
                }
              }};
}

}  // namespace loom
