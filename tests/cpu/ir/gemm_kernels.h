// Hand-built Kernel IR GEMMs for the interpreter and verifier tests: the shapes the
// staging and pipelining passes produce, with switches that remove one barrier or wait
// at a time so a test can show that the interpreter catches each missing one.
//
// C[M, N] = A[M, K] @ B[K, N], all f32 and row-major. A block computes a BM x BN tile
// with (BM / TM) * (BN / TN) threads, each owning a TM x TN register tile; the k loop
// steps BK at a time through shared slabs As [BM, BK] and Bs [BK, BN] (a leading
// dimension of 2 when double-buffered).
#pragma once
#include <optional>
#include <stdexcept>
#include <string>

#include "ir/program.h"

namespace loom::test {

enum class Staging { Sync, CpAsync, Pipelined };

struct GemmKernelOptions {
  int bm = 16, bn = 16, bk = 8, tm = 2, tn = 2;
  Staging staging = Staging::Sync;
  bool first_barrier = true;     // between filling the slabs and reading them
  bool trailing_barrier = true;  // between reading the slabs and refilling them
  bool wait = true;              // cp.async.wait before the first barrier
  int wait_keep = -1;            // groups left in flight; -1: 0 (CpAsync) or 1 (Pipelined)
  int vec = 1;                   // cp.async width (elements)
  int64_t pad = 0;               // shared row padding
  Swizzle swizzle;
  int threads() const { return (bm / tm) * (bn / tn); }
};

inline Expr var(const std::string& n) { return Expr::var(n); }

inline TensorDecl tensor_decl(std::string name, std::vector<Expr> shape, TensorRole role,
                              int64_t pad = 0, Swizzle swizzle = {}) {
  TensorDecl t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.role = role;
  t.pad = pad;
  t.swizzle = swizzle;
  return t;
}

// Flat (padded) offset of `index` in shared tensor `t`.
inline Expr shared_offset(const TensorDecl& t, const std::vector<Expr>& index) {
  std::vector<Expr> strides = t.strides();
  Expr off = 0;
  for (size_t d = 0; d < index.size(); ++d) off = off + index[d] * strides[d];
  return off;
}

// The block's threads copy a rows x cols slab of `src` (row length `ld`, rows from
// `row0`, columns from `col0`, bounded by `rows_bound` x `cols_bound`) into `dst`
// (buffer `buf` when double-buffered), `vec` elements per thread and step.
inline Block fill_slab(const GemmKernelOptions& o, const TensorDecl& dst, const std::string& src,
                       int rows, int cols, Expr row0, Expr col0, Expr rows_bound,
                       Expr cols_bound, Expr ld, std::optional<Expr> buf, bool async) {
  const int T = o.threads();
  const int vec = async ? o.vec : 1;
  const std::string s = dst.name;
  if ((rows * cols) % (T * vec) != 0 || cols % vec != 0)
    throw std::logic_error("gemm_kernel: a " + std::to_string(rows) + " x " +
                           std::to_string(cols) + " slab does not split into " +
                           std::to_string(T) + " threads x " + std::to_string(vec) + " elements");
  Expr e = var("e_" + s), row = var("row_" + s), col = var("col_" + s);
  std::vector<Expr> idx = {row, col};
  if (buf) idx.insert(idx.begin(), *buf);
  Expr doff = shared_offset(dst, idx);
  Expr grow = row0 + row, gcol = col0 + col;
  Expr pred = grow < rows_bound && gcol < cols_bound;
  Expr soff = grow * ld + gcol;
  Block body = {Stmt::Let("e_" + s, (var("r_" + s) * T + var("threadIdx.x")) * vec),
                Stmt::Let("row_" + s, e / cols), Stmt::Let("col_" + s, e % cols)};
  if (async) {
    body.push_back(Stmt::AsyncCopy(s, doff, src, soff, vec, pred));
  } else {
    Stmt load = Stmt::Load("x_" + s, src, {soff});
    load.pred = pred;
    body.push_back(load);
    body.push_back(Stmt::Write(s, {doff}, Operand::value("x_" + s)));
  }
  return {Stmt::For("r_" + s, rows * cols / (T * vec), LoopKind::Parallel, "", body)};
}

inline KernelProgram gemm_kernel(const GemmKernelOptions& o) {
  const bool async = o.staging != Staging::Sync;
  const bool two = o.staging == Staging::Pipelined;
  KernelProgram p;
  p.symbols = {"M", "N", "K"};
  const Expr M = var("M"), N = var("N"), K = var("K");
  std::vector<Expr> as_shape = {o.bm, o.bk}, bs_shape = {o.bk, o.bn};
  if (two) {
    as_shape.insert(as_shape.begin(), 2);
    bs_shape.insert(bs_shape.begin(), 2);
  }
  p.tensors = {tensor_decl("A", {M, K}, TensorRole::Input),
               tensor_decl("B", {K, N}, TensorRole::Input),
               tensor_decl("C", {M, N}, TensorRole::Output),
               tensor_decl("As", as_shape, TensorRole::Shared, o.pad, o.swizzle),
               tensor_decl("Bs", bs_shape, TensorRole::Shared, o.pad, o.swizzle)};
  const TensorDecl As = p.tensors[3], Bs = p.tensors[4];

  KernelOp k;
  k.name = "k_gemm";
  k.params = {"A", "B", "C", "M", "N", "K"};
  k.grid[0] = ceil_div(N, o.bn);
  k.grid[1] = ceil_div(M, o.bm);
  k.block_threads = o.threads();
  const Expr m0 = var("m0"), n0 = var("n0"), tm = var("tm"), tn = var("tn");
  const Expr i = var("i"), j = var("j"), kk = var("kk");
  auto reg2 = [&](Block body) {
    return Stmt::For("i", o.tm, LoopKind::Parallel, "m",
                     {Stmt::For("j", o.tn, LoopKind::Parallel, "n", std::move(body),
                                Tier::Register)},
                     Tier::Register);
  };
  auto fills = [&](Expr ko, std::optional<Expr> buf) {
    Block b = fill_slab(o, As, "A", o.bm, o.bk, m0, ko * o.bk, M, K, K, buf, async);
    Block c = fill_slab(o, Bs, "B", o.bk, o.bn, ko * o.bk, n0, K, N, N, buf, async);
    b.insert(b.end(), c.begin(), c.end());
    return b;
  };
  auto compute = [&](std::optional<Expr> buf) {
    auto at = [&](const TensorDecl& t, Expr r, Expr c) {
      std::vector<Expr> idx = {r, c};
      if (buf) idx.insert(idx.begin(), *buf);
      return shared_offset(t, idx);
    };
    Stmt fma = Stmt::Atom("fma_f32", "acc", {Operand::value("a", {i}), Operand::value("b", {j})});
    fma.dst_index = {i, j};
    Stmt la = Stmt::Load("a", "As", {at(As, tm * o.tm + i, kk)});
    la.dst_index = {i};
    Stmt lb = Stmt::Load("b", "Bs", {at(Bs, kk, tn * o.tn + j)});
    lb.dst_index = {j};
    return Stmt::For(
        "kk", o.bk, LoopKind::Reduce, "k",
        {Stmt::For("i", o.tm, LoopKind::Parallel, "m", {la}, Tier::Register),
         Stmt::For("j", o.tn, LoopKind::Parallel, "n", {lb}, Tier::Register), reg2({fma})});
  };
  const int keep = o.wait_keep >= 0 ? o.wait_keep : (two ? 1 : 0);
  const Expr kt = ceil_div(K, o.bk), ko = var("ko");

  Stmt zero = Stmt::Init("acc", 0.0);
  zero.dst_index = {i, j};
  Block body = {Stmt::Let("m0", var("blockIdx.y") * o.bm),
                Stmt::Let("n0", var("blockIdx.x") * o.bn),
                Stmt::Let("tm", var("threadIdx.x") / (o.bn / o.tn)),
                Stmt::Let("tn", var("threadIdx.x") % (o.bn / o.tn)),
                Stmt::Alloc("acc", {o.tm, o.tn}),
                Stmt::Alloc("a", {o.tm}),
                Stmt::Alloc("b", {o.tn}),
                reg2({zero})};
  Block loop;
  if (two) {
    Block prologue = fills(0, Expr(0));
    body.insert(body.end(), prologue.begin(), prologue.end());
    body.push_back(Stmt::AsyncCommit());
    loop.push_back(Stmt::If(ko + 1 < kt, fills(ko + 1, (ko + 1) % 2)));
  } else {
    loop = fills(ko, std::nullopt);
  }
  if (async) {
    loop.push_back(Stmt::AsyncCommit());
    if (o.wait) loop.push_back(Stmt::AsyncWait(keep));
  }
  if (o.first_barrier) loop.push_back(Stmt::Barrier());
  loop.push_back(compute(two ? std::optional<Expr>(ko % 2) : std::nullopt));
  if (o.trailing_barrier) loop.push_back(Stmt::Barrier());
  body.push_back(Stmt::For("ko", kt, LoopKind::Reduce, "k", loop));

  const Expr m = m0 + tm * o.tm + i, n = n0 + tn * o.tn + j;
  body.push_back(reg2({Stmt::If(m < M && n < N,
                                {Stmt::Write("C", {m * N + n}, Operand::value("acc", {i, j}))})}));
  k.body = std::move(body);
  p.kernels.push_back(std::move(k));
  return p;
}

}  // namespace loom::test
