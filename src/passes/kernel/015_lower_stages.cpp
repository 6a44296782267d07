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
        Block out;
        for (const auto& c : st.copies) copy(c, st.mode, r, out);
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

  void copy(const StageCopy& c, const std::string& mode, const Ranges& r, Block& out) {
    const TensorDecl& src = p_.tensor(c.src);
    const TensorDecl& dst = p_.tensor(c.shared);
    size_t rank = c.vars.size();
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
    s_.used_knobs["VECTORIZE"] = std::to_string(w);

    int64_t T = k_.block_threads;
    int64_t units = n / w;  // vectors to move
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
    std::vector<Expr> src_idx, dst_idx;
    for (const auto& x : c.src_index) src_idx.push_back(x.substitute(coord));
    for (size_t j = 0; j < rank; ++j) dst_idx.push_back(coord[c.vars[j]]);
    Expr src_off = flat(src, src_idx), dst_off = flat(dst, dst_idx);

    Ranges inner = r;
    inner[cv] = {0, (units + T - 1) / T - 1};
    Block body;
    body.push_back(Stmt::Let(ev, Expr::var(cv) * T + Expr::var("threadIdx.x")));
    inner[ev] = {0, units - 1};  // the `e < units` guard below bounds it
    Expr inb(1);
    for (size_t d = 0; d < src_idx.size(); ++d)
      if (!provably_less(src_idx[d], src.shape[d], inner)) inb = inb && (src_idx[d] < src.shape[d]);

    Block move;
    if (mode == "cp_async") {
      move.push_back(Stmt::AsyncCopy(c.shared, dst_off, c.src, src_off, w, inb));
    } else {
      std::string v = c.shared + "_v";
      if (w == 1) {
        Stmt ld = Stmt::Load(v, c.src, {src_off});
        ld.pred = inb;
        move.push_back(ld);
        move.push_back(Stmt::Write(c.shared, {dst_off}, Operand::value(v)));
      } else {
        move.push_back(Stmt::Alloc(v, {Expr(w)}));
        for (int i = 0; i < w; ++i) {  // a predicated vector load is w predicated scalars
          if (!(inb.is_const() && inb.const_value() == 1)) break;
          if (i == 0) {
            Stmt ld = Stmt::Load(v, c.src, {src_off});
            ld.dst_index = {Expr(0)};
            ld.width = w;
            move.push_back(ld);
          }
        }
        if (!(inb.is_const() && inb.const_value() == 1)) {
          for (int i = 0; i < w; ++i) {
            Stmt ld = Stmt::Load(v, c.src, {src_off + i});
            ld.dst_index = {Expr(i)};
            ld.pred = inb;
            move.push_back(ld);
          }
        }
        // Stores: contiguous in shared memory only if the fast dim is the last one.
        Expr step = dst.strides()[fast];
        for (int i = 0; i < w; ++i)
          move.push_back(Stmt::Write(c.shared, {dst_off + step * i}, Operand::value(v, {Expr(i)})));
      }
    }
    if (units % T != 0) move = {Stmt::If(e < units, move)};
    body.insert(body.end(), move.begin(), move.end());
    out.push_back(Stmt::For(cv, Expr((units + T - 1) / T), LoopKind::Parallel, "copy", body));
  }

  // Elements per thread-copy: 16 bytes when every condition holds, else narrower.
  int vector_width(const StageCopy& c, const TensorDecl& src, const TensorDecl& dst, size_t fast,
                   bool fast_is_contiguous, int64_t fast_extent, const std::string& mode) {
    int64_t want = s_.knobs.get_int("VECTORIZE", 4);
    int bytes = dtype_bytes(src.dtype);
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
        ok &= fast == c.vars.size() - 1;
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
