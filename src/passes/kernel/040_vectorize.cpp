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
// A register loop that loads a scalar and folds it into an accumulator,
// `for v: x = load T[rest + v]; acc[.., c + v] <- op(acc[.., c + v], x)` (a split-K
// reduction summing partial tiles), is first split in two: `alloc x_v[E]`, a loop of the
// loads into x_v (the form above) and a loop of the accumulations from x_v[v]. The
// reduction of 11 partial 64x32 tiles then issues 44 LDG.128 per thread instead of 176
// scalar loads, which ptxas kept ~30 in flight at a time (2026-11-23).
#include <set>

#include "ir/same.h"
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
    merge_equal_guards(b);
    for (size_t i = 0; i < b.size(); ++i) {
      if (b[i].kind == StmtKind::For && b[i].tier == Tier::Register && split_accumulation(b, i))
        i += 1;  // b[i] is now the alloc, b[i + 1] the load loop, b[i + 2] the accumulations
      Stmt& st = b[i];
      if (st.kind == StmtKind::For || st.kind == StmtKind::If || st.kind == StmtKind::Specialize)
        run(st.body);
      if (st.kind == StmtKind::For && st.tier == Tier::Register) try_loop(st);
    }
    fold_writes(b);
  }

 private:
  // b[i] = `for v (register, constant E): x = load T[rest + v]; acc[.., c + v] <- op(acc[..,
  // c + v], x)` with x used nowhere else, the load unpredicated and unit-stride in v:
  // replaced by `alloc x_v[E]; for v: x_v[v] = load T[rest + v]; for v: acc[..] <- op(acc[..],
  // x_v[v])`, whose first loop try_loop widens. Returns whether it rewrote.
  bool split_accumulation(Block& b, size_t i) {
    const Stmt& loop = b[i];
    if (loop.body.size() != 2 || !loop.extent.is_const()) return false;
    const Stmt& ld = loop.body[0];
    const Stmt& acc = loop.body[1];
    if (ld.kind != StmtKind::Load || ld.remote || ld.width != 1 || !ld.dst_index.empty() ||
        ld.index.size() != 1 || !(ld.pred.is_const() && ld.pred.const_value() == 1))
      return false;
    if (acc.kind != StmtKind::Accum || acc.args.size() != 1 || acc.args[0].name != ld.dst ||
        !acc.args[0].index.empty() || acc.dst_index.empty())
      return false;
    if (!unit_stride_rest(ld.index[0], loop.var) || !unit_stride_rest(acc.dst_index.back(), loop.var))
      return false;
    const TensorDecl& t = p_.tensor(ld.tensor);
    if (t.dtype == DType::F64) return false;
    // A fresh name per split: sibling loops of one block may load into the same scalar.
    const std::string xv = ld.dst + "_v" + (splits_ ? std::to_string(splits_ + 1) : "");
    ++splits_;
    const Expr v = Expr::var(loop.var);
    Stmt loads = loop, folds = loop;
    loads.body = {ld};
    loads.body[0].dst = xv;
    loads.body[0].dst_index = {v};
    folds.body = {acc};
    folds.body[0].args[0] = Operand::value(xv, {v});
    Stmt alloc = Stmt::Alloc(xv, {loop.extent});
    b[i] = std::move(folds);
    b.insert(b.begin() + long(i), std::move(loads));
    b.insert(b.begin() + long(i), std::move(alloc));
    return true;
  }

  void try_loop(Stmt& loop) {
    if (loop.body.size() != 1 || !loop.extent.is_const()) return;
    Stmt& a = loop.body[0];
    if ((a.kind != StmtKind::Load && a.kind != StmtKind::Write) || a.width != 1) return;
    const TensorDecl& t = p_.tensor(a.tensor);
    if (t.dtype == DType::F64) return;
    if (a.kind == StmtKind::Load) {
      // `for v: x[.., c + v] = load T[rest + v]`, unpredicated.
      if (a.dst_index.empty() || !(a.pred.is_const() && a.pred.const_value() == 1)) return;
      widen(loop, t, [](Stmt& s) -> std::vector<Expr>& { return s.dst_index; });
    } else if (a.kind == StmtKind::Write) {
      // `for v: T[rest + v] = x[.., c + v]` (an unguarded epilogue store of an
      // accumulator row; atomic ones only where the target has vector reductions).
      if (a.args[0].is_imm() || a.args[0].index.empty()) return;
      if (a.atomic_add && !vector_atomics(t)) return;
      widen(loop, t, [](Stmt& s) -> std::vector<Expr>& { return s.args[0].index; });
    }
  }

  // The loop's one access reads or writes T[rest + v] against the register element
  // `reg_index` names, whose last index is c + v: it becomes accesses of W elements for
  // the widest W <= VECTORIZE (16 bytes at most) that divides the trip count, whose start
  // is provably a multiple of W (the alignment proof) and that a swizzle keeps whole.
  template <class RegIndex>
  void widen(Stmt& loop, const TensorDecl& t, RegIndex reg_index) {
    Stmt& a = loop.body[0];
    const std::string v = loop.var;
    const std::vector<Expr> ri = reg_index(a);
    if (!unit_stride_rest(a.index[0], v) || !unit_stride_rest(ri.back(), v)) return;
    for (size_t i = 0; i + 1 < ri.size(); ++i)
      if (ri[i].uses(v)) return;
    int64_t E = loop.extent.const_value();
    for (int64_t W = std::min<int64_t>(max_w_, 16 / dtype_bytes(t.dtype)); W > 1; W /= 2) {
      if (E % W != 0) continue;
      Expr q = Expr::var(v);
      Expr start = a.index[0].substitute({{v, q * W}});
      if (!provably_divisible(start, W)) continue;
      if (t.swizzle.bits && (int64_t(1) << t.swizzle.base) % W != 0) continue;
      Stmt vec = a;
      vec.width = int(W);
      vec.index = {start};
      reg_index(vec).back() = ri.back().substitute({{v, q * W}});
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

  // `if c: W1` `if c: W2` .. (the same condition, every body nothing but writes) is
  // `if c: W1; W2; ..`: a writes' guard is an expression of loop variables, Lets and sizes,
  // which no write changes. k:026 guards each element of a wgmma accumulator's store by
  // its own row and column: with a run-time M the two elements of a row pair share the
  // guard `row < M` but sat in two Ifs, so fold_writes saw no run and the epilogue stored
  // 2-byte scalars where a bound M stores pairs (H100, 128 x 4096 x 4096 bf16, one row of
  // 128 x 64 tiles: 22.1 us against the bound M's 19.3; bench/NOTES.md, run-time N and K,
  // and small run-time M).
  void merge_equal_guards(Block& b) {
    auto only_writes = [](const Stmt& s) {
      if (s.kind != StmtKind::If || s.body.empty()) return false;
      for (const Stmt& w : s.body)
        if (w.kind != StmtKind::Write) return false;
      return true;
    };
    for (size_t i = 0; i + 1 < b.size();) {
      if (only_writes(b[i]) && only_writes(b[i + 1])) {
        Stmt x = b[i], y = b[i + 1];
        x.body.clear();
        y.body.clear();
        if (same_block({x}, {y})) {
          b[i].body.insert(b[i].body.end(), b[i + 1].body.begin(), b[i + 1].body.end());
          b.erase(b.begin() + long(i) + 1);
          continue;
        }
      }
      ++i;
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
      if (constant_difference(first.index[0], w.index[0]) != j) return false;
      const auto& a = first.args[0].index;
      const auto& c = w.args[0].index;
      for (size_t d = 0; d + 1 < a.size(); ++d)
        if (!a[d].same_as(c[d])) return false;
      if (constant_difference(a.back(), c.back()) != j) return false;
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
  int splits_ = 0;  // split_accumulation rewrites so far (for fresh names)
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
