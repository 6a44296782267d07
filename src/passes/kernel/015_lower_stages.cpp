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
//     zero fill, then commit and wait for all groups.
//  4. A barrier makes the slab visible before the body; a barrier after the body keeps
//     the next iteration's copy from overwriting data still being read.
#include <set>

#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

class Lowerer {
 public:
  Lowerer(CompileState& s, KernelProgram& p, KernelOp& k) : s_(s), p_(p), k_(k) {}

  void run() {
    Ranges r = kernel_builtin_ranges(k_);
    lower(k_.body, r);
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
  void lower(Block& b, Ranges r) {
    for (size_t i = 0; i < b.size(); ++i) {
      Stmt& st = b[i];
      enter_range(r, st);
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
          throw Error("k:015_lower_stages: STAGE=" + st.mode + " is not lowered yet");
        }
        out.push_back(Stmt::Barrier());
        for (auto& s : st.body) out.push_back(s);
        out.push_back(Stmt::Barrier());
        b.erase(b.begin() + long(i));
        b.insert(b.begin() + long(i), out.begin(), out.end());
        i += out.size() - 1;
        continue;
      }
      if (st.kind == StmtKind::For || st.kind == StmtKind::If) lower(st.body, r);
    }
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

    if (mode == "cp_async") {
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
};

}  // namespace

Pass pass_lower_stages() {
  return Pass{"k:015_lower_stages", Level::Kernel, Level::Kernel,
              "no Stage bundles: slabs move by cooperative (vector) copies or cp.async, "
              "fenced by barriers; shared memory fits the block",
              {"VECTORIZE"},
              [](CompileState& s) {
                for (auto& k : s.kernel.kernels) {
                  Lowerer(s, s.kernel, k).run();
                  int64_t bytes = shared_layout(s.kernel, k).total_bytes;
                  if (bytes > s.target.smem_per_block)
                    throw Error("shared memory: kernel " + k.name + " needs " +
                                std::to_string(bytes) + " B (knobs " + s.knobs.str() +
                                "); this GPU allows " + std::to_string(s.target.smem_per_block) +
                                " B per block — lower BM, BN, BK or STAGES");
                }
              }};
}

}  // namespace loom
