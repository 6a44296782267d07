// k:010_bind_hardware — Tile IR -> Kernel IR: GRID and THREAD loops become launch
// geometry, and multi-dimensional accesses become flat offsets.
//
// Steps:
//  1. The outer GRID loops map to blockIdx: the n tile to x (2^31-1 blocks allowed), the
//     m tile to y, a batch loop to z; each loop becomes `let var = blockIdx.?`.
//  2. The THREAD loops below them (constant extents) map to one threadIdx.x, the last
//     loop fastest: `let m_t = threadIdx.x / TN`, `let n_t = threadIdx.x % TN`.
//  3. Every Load/Write index becomes the row-major offset of the tensor's storage.
//  4. Params: the tensors the kernel touches (inputs, then the output), then symbols.
#include <set>

#include "ir/error.h"
#include "passes/passes.h"

namespace loom {
namespace {

void flatten_accesses(Block& b, const ProgramBase& p) {
  walk(b, [&](Stmt& s) {
    if (s.kind != StmtKind::Load && s.kind != StmtKind::Write) return;
    auto strides = p.tensor(s.tensor).strides();
    Expr off = 0;
    for (size_t i = 0; i < s.index.size(); ++i) off = off + s.index[i] * strides[i];
    s.index = {off};
  });
}

KernelOp bind(const TileOp& op, const ProgramBase& p, size_t which, size_t count) {
  KernelOp k;
  k.name = "k_" + op.name + (count > 1 ? "_" + std::to_string(which) : "");

  // 1: grid loops, outermost first.
  std::vector<const Stmt*> grid, threads;
  const Block* b = &op.body;
  while (b->size() == 1 && (*b)[0].kind == StmtKind::For && (*b)[0].tier == Tier::Grid) {
    grid.push_back(&(*b)[0]);
    b = &(*b)[0].body;
  }
  while (b->size() == 1 && (*b)[0].kind == StmtKind::For && (*b)[0].tier == Tier::Thread) {
    threads.push_back(&(*b)[0]);
    b = &(*b)[0].body;
  }
  if (grid.size() < 2 || grid.size() > 3)
    throw Error("k:010_bind_hardware: kernel '" + k.name + "' has " +
                std::to_string(grid.size()) +
                " grid loops; Loom maps (batch,) m, n tiles onto blockIdx.z/y/x");
  Block body;
  static const char* builtin[3] = {"blockIdx.x", "blockIdx.y", "blockIdx.z"};
  for (size_t i = 0; i < grid.size(); ++i) {
    size_t dim = grid.size() - 1 - i;  // innermost grid loop (n tile) -> x
    k.grid[dim] = grid[i]->extent;
    body.push_back(Stmt::Let(grid[i]->var, Expr::var(builtin[dim])));
  }

  // 2: thread loops.
  int64_t total = 1;
  std::vector<int64_t> ext;
  for (const Stmt* t : threads) {
    if (!t->extent.is_const())
      throw Error("k:010_bind_hardware: thread loop " + t->var + " has a symbolic extent");
    ext.push_back(t->extent.const_value());
    total *= ext.back();
  }
  Expr tid = Expr::var("threadIdx.x");
  int64_t inner = 1;
  std::vector<Stmt> lets;
  for (int i = int(threads.size()) - 1; i >= 0; --i) {
    Expr v = tid / inner;
    if (i > 0) v = v % ext[i];
    lets.insert(lets.begin(), Stmt::Let(threads[i]->var, v));
    inner *= ext[i];
  }
  body.insert(body.end(), lets.begin(), lets.end());
  k.block_threads = int(total);

  Block rest = *b;
  flatten_accesses(rest, p);
  body.insert(body.end(), rest.begin(), rest.end());
  k.body = std::move(body);

  // 4: params.
  std::set<std::string> used;
  walk(k.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::Load || s.kind == StmtKind::Write) used.insert(s.tensor);
  });
  for (const auto& in : op.inputs)
    if (used.count(in)) k.params.push_back(in);
  k.params.push_back(op.output);
  for (const auto& sym : p.symbols) k.params.push_back(sym);
  return k;
}

}  // namespace

Pass pass_bind_hardware() {
  return Pass{"k:010_bind_hardware", Level::Tile, Level::Kernel,
              "no GRID/THREAD loops: blockIdx/threadIdx lets and launch geometry; flat "
              "offsets",
              {},
              [](CompileState& s) {
                KernelProgram kp;
                static_cast<ProgramBase&>(kp) = s.tile;
                for (size_t i = 0; i < s.tile.ops.size(); ++i)
                  kp.kernels.push_back(bind(s.tile.ops[i], s.tile, i, s.tile.ops.size()));
                s.kernel = std::move(kp);
                s.level = Level::Kernel;
              }};
}

}  // namespace loom
