// k:040_vectorize — fold runs of consecutive scalar loads into vector loads (VECTORIZE).
//
// `for v in 0..E register: x[.., v] = load T[base + v]` reads E consecutive elements
// with E instructions; one LDS.128/LDG.128 moves four f32 in the time of one. Steps:
//  1. Find register loops whose body is a single unpredicated f32 load, whose offset is
//     `rest + v` and whose destination's last index is `rest' + v` (unit stride in both).
//  2. Pick the widest W in {4, 2} (at most VECTORIZE) dividing E for which the offset at
//     every vector start, `rest + q*W`, is provably a multiple of W (the alignment
//     proof: tensor bases are 128-byte aligned, so element alignment suffices) and a
//     shared tensor's swizzle keeps W-element units intact.
//  3. Rewrite: one load of width W (E == W) or a loop over q in 0..E/W. When no W is
//     provable the loads stay scalar: the fallback the proof exists for.
#include <set>

#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

// `e` == rest + var with `rest` free of var: returns rest.
std::optional<Expr> unit_stride_rest(const Expr& e, const std::string& var) {
  std::vector<Expr> terms = sum_terms(e);
  Expr rest = 0;
  int hits = 0;
  for (const auto& t : terms) {
    if (t.is_var() && t.var_name() == var) ++hits;
    else if (t.uses(var)) return std::nullopt;
    else rest = rest + t;
  }
  if (hits != 1) return std::nullopt;
  return rest;
}

class Vectorizer {
 public:
  Vectorizer(CompileState& s, const KernelProgram& p) : s_(s), p_(p) {
    max_w_ = s.knob("VECTORIZE", 4);
  }

  void run(Block& b) {
    for (auto& st : b) {
      if (st.kind == StmtKind::For || st.kind == StmtKind::If) run(st.body);
      if (st.kind == StmtKind::For && st.tier == Tier::Register) try_loop(st);
    }
    fold_writes(b);
  }

 private:
  void try_loop(Stmt& loop) {
    if (loop.body.size() != 1 || !loop.extent.is_const()) return;
    if (loop.body[0].kind == StmtKind::Write) return try_store_loop(loop);
    Stmt& ld = loop.body[0];
    if (ld.kind != StmtKind::Load || ld.width != 1 || ld.dst_index.empty()) return;
    if (!(ld.pred.is_const() && ld.pred.const_value() == 1)) return;
    const TensorDecl& t = p_.tensor(ld.tensor);
    if (t.dtype == DType::F64) return;
    const std::string& v = loop.var;
    auto rest = unit_stride_rest(ld.index[0], v);
    auto drest = unit_stride_rest(ld.dst_index.back(), v);
    if (!rest || !drest) return;
    for (size_t i = 0; i + 1 < ld.dst_index.size(); ++i)
      if (ld.dst_index[i].uses(v)) return;
    int64_t E = loop.extent.const_value();
    for (int64_t W = std::min<int64_t>(max_w_, 16 / dtype_bytes(t.dtype)); W > 1; W /= 2) {
      if (E % W != 0) continue;
      Expr q = Expr::var(v);
      Expr start = ld.index[0].substitute({{v, q * W}});
      if (!provably_divisible(start, W)) continue;
      if (t.swizzle.bits && (int64_t(1) << t.swizzle.base) % W != 0) continue;
      Stmt vec = ld;
      vec.width = int(W);
      vec.index = {start};
      vec.dst_index.back() = ld.dst_index.back().substitute({{v, q * W}});
      if (E == W) {
        substitute_block(loop.body, {});
        Stmt single = vec;
        Block one = {single};
        substitute_block(one, {{v, Expr(0)}});
        loop = one[0];
      } else {
        loop.extent = E / W;
        loop.body = {vec};
      }
      ++vectorized_;
      return;
    }
  }

  // `for v: T[rest + v] = x[.., c + v]` (an unguarded epilogue store of an accumulator
  // row) becomes vector stores, with the same alignment proof as loads.
  void try_store_loop(Stmt& loop) {
    Stmt& wr = loop.body[0];
    if (wr.width != 1 || wr.args[0].is_imm() || wr.args[0].index.empty()) return;
    const TensorDecl& t = p_.tensor(wr.tensor);
    if (t.dtype == DType::F64 || (wr.atomic_add && !vector_atomics(t))) return;
    const std::string& v = loop.var;
    auto rest = unit_stride_rest(wr.index[0], v);
    auto srest = unit_stride_rest(wr.args[0].index.back(), v);
    if (!rest || !srest) return;
    for (size_t i = 0; i + 1 < wr.args[0].index.size(); ++i)
      if (wr.args[0].index[i].uses(v)) return;
    int64_t E = loop.extent.const_value();
    for (int64_t W = std::min<int64_t>(max_w_, 16 / dtype_bytes(t.dtype)); W > 1; W /= 2) {
      if (E % W != 0) continue;
      Expr q = Expr::var(v);
      Expr start = wr.index[0].substitute({{v, q * W}});
      if (!provably_divisible(start, W)) continue;
      Stmt vec = wr;
      vec.width = int(W);
      vec.index = {start};
      vec.args[0].index.back() = wr.args[0].index.back().substitute({{v, q * W}});
      if (E == W) {
        Block one = {vec};
        substitute_block(one, {{v, Expr(0)}});
        loop = one[0];
      } else {
        loop.extent = E / W;
        loop.body = {vec};
      }
      ++vectorized_;
      return;
    }
  }

  // A run of W writes `T[base + i] = x[.., c + i]` (i = 0..W-1) is one vector store when
  // `base` is provably a multiple of W.
  void fold_writes(Block& b) {
    for (size_t i = 0; i < b.size(); ++i) {
      for (int64_t W = std::min<int64_t>(max_w_, 8); W > 1; W /= 2) {
        if (i + size_t(W) > b.size() || !write_run(b, i, W)) continue;
        Stmt vec = b[i];
        vec.width = int(W);
        b.erase(b.begin() + long(i) + 1, b.begin() + long(i) + long(W));
        b[i] = vec;
        ++vectorized_;
        break;
      }
    }
  }

  bool write_run(const Block& b, size_t i, int64_t W) {
    const Stmt& first = b[i];
    if (first.kind != StmtKind::Write || first.width != 1) return false;
    if (first.args[0].index.empty()) return false;
    const TensorDecl& t = p_.tensor(first.tensor);
    if (first.atomic_add && !vector_atomics(t)) return false;
    if (t.dtype == DType::F64 || W * dtype_bytes(t.dtype) > 16 ||
        !provably_divisible(first.index[0], W))
      return false;
    if (t.swizzle.bits && (int64_t(1) << t.swizzle.base) % W != 0) return false;
    for (int64_t j = 1; j < W; ++j) {
      const Stmt& w = b[i + size_t(j)];
      if (w.kind != StmtKind::Write || w.tensor != first.tensor || w.atomic_add != first.atomic_add ||
          w.args[0].name != first.args[0].name || w.args[0].index.size() != first.args[0].index.size())
        return false;
      Expr want = first.index[0] + j;
      if (!w.index[0].same_as(want)) return false;
      const auto& a = first.args[0].index;
      const auto& c = w.args[0].index;
      for (size_t d = 0; d + 1 < a.size(); ++d)
        if (!a[d].same_as(c[d])) return false;
      if (!c.back().same_as(a.back() + j)) return false;
    }
    return true;
  }

  // sm_90 has vector reductions into global f32 (red.global.add.v2/v4.f32): split-K's
  // atomic combine then issues a quarter of the reductions.
  bool vector_atomics(const TensorDecl& t) const {
    return t.dtype == DType::F32 && t.role != TensorRole::Shared &&
           s_.target.compute_capability() >= 90;
  }

  CompileState& s_;
  const KernelProgram& p_;
  int64_t max_w_ = 4;
  int vectorized_ = 0;
};

}  // namespace

Pass pass_vectorize() {
  return Pass{"k:040_vectorize", Level::Kernel, Level::Kernel,
              "runs of unit-stride loads into register arrays are vector loads wherever "
              "alignment is provable",
              {"VECTORIZE"},
              [](CompileState& s) {
                for (auto& k : s.kernel.kernels) Vectorizer(s, s.kernel).run(k.body);
              }};
}

}  // namespace loom
