// l:022_cluster_k — split a contraction's K among the CTAs of a thread-block cluster
// (CLUSTER_K), whose partial sums are then added through distributed shared memory.
//
// Split-K across CTAs (l:020) combines its partials through global memory: a second
// launch or L2 atomics, which at 128x128x16384 cost more than the mainloop (bench/NOTES.md,
// 2026-11-22, the cluster slowdown). The c CTAs of a cluster can instead read each other's shared memory: each
// keeps its f32 partial tile there and sums a 1/c slice of the rows from all c of them.
// As Loop IR that is a split of K into c slices with the combine as a second op, the same
// program l:020's reduce mode makes, so every pass up to the fusion runs it unchanged:
//  1. The contraction op (l:020's split op when SPLITK > 1: its `k` already covers one
//     chunk) gets a new outermost parallel loop `q` over the c slices, axis "cluster_k";
//     `k` covers slice q, `for k in 0..max(min(C, E - q*C), 0)` with E k's old extent and
//     C = ceil(E/c) rounded up to whole BK slabs, and every use of k reads `q*C + k`.
//     Unlike l:020 the count stays c even when K leaves trailing slices empty: the cluster
//     has c CTAs, and an empty slice contributes zeros (ragged K).
//  2. The op writes its accumulator to a Temp `cluster_partial[q, ..out loops]`, f32.
//  3. A new op `clusterk_reduce` sums it over q (a reduce loop) and runs the epilogue and
//     the write the contraction had (the output, or l:020's partial / workspace: SPLITK
//     then combines the clusters' sums as before).
// t:010 puts q on the CLUSTER tier (the rank of a 1-D cluster along x) and stores the
// partial tile by tile; k:057 turns the partial into shared memory and clusterk_reduce
// into the DSMEM reduction at the end of the same kernel. CLUSTER_K=1 changes nothing.
#include <set>

#include "ir/error.h"
#include "passes/loop_rewrite.h"
#include "passes/passes.h"

namespace loom {
namespace {

// An upper bound of the reduce loop's extent that is an Expr of the problem sizes: the
// extent itself, or l:020's chunk size C when the extent is its min(C, K - s*C) (wrapped
// in max(.., 0) for a symbolic K).
Expr extent_bound(const Expr& e) {
  Expr x = e;
  if (x.kind() == Expr::Kind::Max) x = x.lhs();
  if (x.kind() == Expr::Kind::Min) return x.lhs();
  return e;
}

std::vector<LoopOp> split(LoopProgram& p, const LoopOp& op, int64_t c, int64_t granule) {
  std::vector<ParallelLoop> loops;
  const Block* b = &op.body;
  while (b->size() == 1 && (*b)[0].kind == StmtKind::For && (*b)[0].loop_kind == LoopKind::Parallel) {
    loops.push_back({(*b)[0].var, (*b)[0].extent, (*b)[0].axis});
    b = &(*b)[0].body;
  }
  const Block& cell = *b;
  if (loops.size() < 2 || cell.size() < 3 || cell[0].kind != StmtKind::Init ||
      cell[1].kind != StmtKind::For || cell[1].loop_kind != LoopKind::Reduce ||
      cell.back().kind != StmtKind::Write)
    throw Error("l:022_cluster_k: op '" + op.name + "' is not `acc = 0; for k reduce {...}; "
                "epilogue; write` inside its output loops, so CLUSTER_K cannot split it "
                "(use CLUSTER_K=1)");
  std::set<std::string> taken = loop_program_names(p);
  const std::string q = fresh_name("q", taken);
  const Stmt& red = cell[1];

  // 1: slice q of the reduction.
  const Expr bound = extent_bound(red.extent);
  Expr C = ceil_div(ceil_div(bound, c), granule) * granule;
  Expr extent = max(min(C, red.extent - Expr::var(q) * C), Expr(0));
  if (C.is_const() && red.extent.is_const() && red.extent.const_value() == c * C.const_value())
    extent = C;
  Block kbody = red.body;
  substitute_block(kbody, {{red.var, Expr::var(q) * C + Expr::var(red.var)}});
  Block part_cell = {cell[0], Stmt::For(red.var, extent, LoopKind::Reduce, red.axis, kbody)};

  // 2: the partial, f32 like the accumulator, so the slices' sum rounds only where the
  // unsplit sum did.
  TensorDecl partial;
  partial.name = fresh_name("cluster_partial", taken);
  partial.dtype = DType::F32;
  partial.role = TensorRole::Temp;
  partial.shape = {Expr(c)};
  std::vector<Expr> idx = {Expr::var(q)};
  for (const auto& l : loops) {
    partial.shape.push_back(l.extent);
    idx.push_back(Expr::var(l.var));
  }
  p.tensors.push_back(partial);
  const std::string acc = cell[0].dst;
  part_cell.push_back(Stmt::Write(partial.name, idx, Operand::value(acc)));
  std::vector<ParallelLoop> split_loops = loops;
  split_loops.insert(split_loops.begin(), ParallelLoop{q, Expr(c), "cluster_k"});
  LoopOp part{op.name, {}, partial.name, parallel_nest(split_loops, std::move(part_cell))};
  part.inputs = inputs_read(op, part.body);

  // 3: the combine, with the contraction's epilogue and write.
  const std::string peer = fresh_name("peer", taken), v = fresh_name(acc + "_q", taken);
  std::vector<Expr> pidx = idx;
  pidx[0] = Expr::var(peer);
  Block sum = {Stmt::Load(v, partial.name, pidx), Stmt::Accum(acc, Operand::value(v))};
  Block rcell = {cell[0], Stmt::For(peer, Expr(c), LoopKind::Reduce, "cluster_k", std::move(sum))};
  rcell.insert(rcell.end(), cell.begin() + 2, cell.end());
  LoopOp reduce{"clusterk_reduce", {}, op.output, parallel_nest(loops, std::move(rcell))};
  reduce.inputs = inputs_read(op, reduce.body);
  reduce.inputs.insert(reduce.inputs.begin(), partial.name);
  return {std::move(part), std::move(reduce)};
}

}  // namespace

Pass pass_cluster_k() {
  return Pass{"l:022_cluster_k", Level::Loop, Level::Loop,
              "with CLUSTER_K = c > 1 the contraction reduces one of c slices of K per `q` "
              "(the CTAs of a cluster) into cluster_partial, which clusterk_reduce sums "
              "before the epilogue",
              {"CLUSTER_K"},
              [](CompileState& s) {
                // Attention has no contraction to split across a cluster: the knob does not
                // apply and is not recorded (the knob list shows what applied); CLUSTER_K > 1
                // given is refused below (attention is no `acc = 0; for k reduce` op).
                if (s.graph.attention() && !s.knobs.has("CLUSTER_K")) return;
                const int64_t c = s.knob("CLUSTER_K", 1);
                if (c == 1) return;
                if (c < 2 || c > 8)
                  throw Error("CLUSTER_K=" + std::to_string(c) + ": a cluster holds 2 to 8 CTAs "
                              "(8 is sm_90's portable cluster size limit)");
                const std::string mode = s.knobs.get_str("SPLITK_MODE", "reduce");
                if (s.knobs.get_int("SPLITK", 1) > 1 && (mode == "fixup" || mode == "partials"))
                  throw Error("CLUSTER_K=" + std::to_string(c) + " with SPLITK_MODE=" + mode +
                              ": the "
                              "fixup's last-arriving CTA does not compose with the cluster's "
                              "reduction yet; use SPLITK_MODE=reduce (or atomic, f32 output)");
                const int64_t granule =
                    s.knobs.get_str("STAGE", "sync") == "direct" ? 1 : s.knobs.get_int("BK", 16);
                std::vector<LoopOp> ops;
                bool done = false;
                for (const auto& op : s.loop.ops) {
                  // The contraction: the op with a reduction that no combine op made.
                  bool reduces = false;
                  walk(op.body, [&](const Stmt& st) {
                    reduces |= st.kind == StmtKind::For && st.loop_kind == LoopKind::Reduce;
                  });
                  if (done || !reduces || op.name == "splitk_reduce" || op.name == "splitk_fixup") {
                    ops.push_back(op);
                    continue;
                  }
                  auto repl = split(s.loop, op, c, granule);
                  ops.insert(ops.end(), repl.begin(), repl.end());
                  done = true;
                }
                if (!done)
                  throw Error("CLUSTER_K=" + std::to_string(c) + " splits a reduction among the "
                              "CTAs of a cluster, and this program has none (matmul, bmm, linear "
                              "have one); use CLUSTER_K=1");
                s.loop.ops = std::move(ops);
              }};
}

}  // namespace loom
