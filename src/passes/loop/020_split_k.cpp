// l:020_split_k — split a contraction's reduction across CTAs (SPLITK, SPLITK_MODE).
//
// A skinny GEMM (small M*N, huge K) has too few output tiles to fill the GPU while each
// CTA runs a long K loop. Splitting K into S chunks gives S times the CTAs; the
// partial sums are then combined. For every op of shape `for b.., m, n: acc = 0;
// for k reduce {...}; epilogue; write`, with S = SPLITK > 1:
//  1. Chunk: C = ceil(K/S) rounded up to a whole number of BK slabs (t:040 stages BK-deep
//     slabs and zero-fills only outside the tensor, so a slab must never straddle two
//     chunks; with STAGE=direct nothing is staged and C is not rounded). With a constant
//     K the split count is clamped to ceil(K/C), so no chunk is empty (SPLITK larger
//     than K is clamped, not an error); with a symbolic K it stays S and trailing
//     chunks may be empty at run time.
//  2. Split op: a new outermost parallel loop `s` (a grid tier after t:010, like a batch
//     loop); `k` covers its chunk exactly, `for k in 0..min(C, K - s*C)`, and every use
//     of k reads `s*C + k`, so no guard is needed inside the reduction.
//  3. reduce mode: the split op writes its accumulator to a Temp `partial[S, ..out]`;
//     a second op `splitk_reduce` sums partial over s (a reduce loop) and runs the
//     epilogue the split op no longer has. No atomics, one extra launch.
//     atomic mode: op `zero_fill` clears `out`, and the split op's final write becomes an
//     atomic add. Legal only when the epilogue is linear in the accumulator (none, or
//     scaling by constants) and `out` is f32 (atomicAdd on f32 is what codegen emits).
//     fixup mode: the split op adds its accumulator atomically into an f32 `workspace`
//     [..out] that starts zeroed (TensorDecl::zero_init); op `splitk_fixup` reads each sum,
//     clears the workspace element for the next run, and runs the epilogue and the store.
//     Any epilogue and output type. As Loop IR it is two ops that run one after the other;
//     k:058_splitk_fixup makes them one kernel, where the last CTA of a tile to arrive on
//     a counter runs splitk_fixup's part for that tile (no second launch).
//     partials mode: reduce mode's ops, but the summing op is splitk_fixup, so k:058 fuses
//     it the same way: each split stores its f32 partial tile with plain stores (no
//     atomics), and the CTA that arrives last on the tile's counter sums the S partials
//     and runs the epilogue. The last CTA reads S tiles alone (S * BM * BN * 4 bytes: 88 KB
//     for 11 splits of a 64x32 tile, well under a microsecond from L2), where fixup's
//     atomics contend S ways on every element and a serialized turnstile would pay S - 1
//     flag hand-offs (~1 us each through L2) one after another, since all splits finish
//     their equal mainloops at about the same time.
// SPLITK=1 leaves the program unchanged.
#include <algorithm>
#include <set>

#include "ir/error.h"
#include "passes/loop_rewrite.h"
#include "passes/passes.h"

namespace loom {
namespace {

std::vector<Expr> var_index(const std::vector<ParallelLoop>& loops) {
  std::vector<Expr> idx;
  for (const auto& l : loops) idx.push_back(Expr::var(l.var));
  return idx;
}

// The output nest and cell of a contraction, or nullopt for an op with no reduction.
struct Contraction {
  std::vector<ParallelLoop> loops;
  Block cell;  // [Init acc, For k reduce, epilogue..., Write]
};

std::optional<Contraction> match(const LoopOp& op) {
  Contraction c;
  const Block* b = &op.body;
  while (b->size() == 1 && (*b)[0].kind == StmtKind::For &&
         (*b)[0].loop_kind == LoopKind::Parallel) {
    c.loops.push_back({(*b)[0].var, (*b)[0].extent, (*b)[0].axis});
    b = &(*b)[0].body;
  }
  bool has_reduce = false;
  walk(op.body, [&](const Stmt& s) {
    has_reduce |= s.kind == StmtKind::For && s.loop_kind == LoopKind::Reduce;
  });
  if (!has_reduce) return std::nullopt;
  const Block& cell = *b;
  if (cell.size() < 3 || cell[0].kind != StmtKind::Init || cell[1].kind != StmtKind::For ||
      cell[1].loop_kind != LoopKind::Reduce || cell.back().kind != StmtKind::Write)
    throw Error("l:020_split_k: op '" + op.name +
                "' is not `acc = 0; for k reduce {...}; epilogue; write` inside its output "
                "loops, so SPLITK cannot split it (use SPLITK=1)");
  c.cell = cell;
  return c;
}

struct Chunks {
  Expr splits;  // extent of s
  Expr size;    // C
  Expr extent;  // k's extent in chunk s
};

Chunks plan(const Expr& K, int64_t S, int64_t granule, const Expr& s) {
  Chunks c;
  if (K.is_const()) {
    int64_t k = K.const_value();
    int64_t size = (std::max<int64_t>(1, (k + S - 1) / S) + granule - 1) / granule * granule;
    c.size = size;
    c.splits = std::max<int64_t>(1, (k + size - 1) / size);
    c.extent = k % size == 0 ? Expr(size) : min(Expr(size), K - s * size);
    return c;
  }
  c.size = ceil_div(ceil_div(K, S), granule) * granule;
  c.splits = S;
  // A chunk that starts past K is empty: max keeps every extent non-negative.
  c.extent = max(min(c.size, K - s * c.size), Expr(0));
  return c;
}

// Atomic mode adds each chunk's value into `out`, so the epilogue must commute with the
// sum: f(a + b) = f(a) + f(b). Scaling by a constant does; anything else (bias, relu,
// a residual) would be applied once per chunk.
void check_atomic_legal(const LoopProgram& p, const LoopOp& op, const Contraction& c) {
  const std::string out = op.output;
  const char* how = "SPLITK_MODE=atomic adds partial sums into `";
  DType dt = p.tensor(out).dtype;
  if (dt != DType::F32)
    throw Error(std::string(how) + out + "`; atomic accumulation needs an f32 output and `" +
                out + "` is " + dtype_name(dt) +
                "; use SPLITK_MODE=reduce (or an f32 output)");
  std::string value = c.cell[0].dst;
  for (size_t i = 2; i + 1 < c.cell.size(); ++i) {
    const Stmt& st = c.cell[i];
    bool linear = false;
    if (st.kind == StmtKind::Compute) {
      const auto& a = st.args;
      auto is_value = [&](size_t j) { return j < a.size() && a[j].name == value; };
      auto is_imm = [&](size_t j) { return j < a.size() && a[j].is_imm(); };
      linear = (st.op == ScalarOp::Neg && is_value(0)) ||
               (st.op == ScalarOp::Mul && ((is_value(0) && is_imm(1)) || (is_imm(0) && is_value(1)))) ||
               (st.op == ScalarOp::Div && is_value(0) && is_imm(1));
      if (!linear)
        throw Error(std::string(how) + out + "`; " + scalar_op_name(st.op) +
                    " after the sum cannot be split (only scaling by a constant commutes "
                    "with it); use SPLITK_MODE=reduce");
      value = st.dst;
    } else if (st.kind != StmtKind::Load) {
      std::string text = print_block(Block{st});
      throw Error(std::string(how) + out + "`; the epilogue statement `" +
                  text.substr(0, text.find('\n')) + "` cannot be split; use SPLITK_MODE=reduce");
    }
  }
  const Stmt& w = c.cell.back();
  if (w.args[0].is_imm() || w.args[0].name != value)
    throw Error(std::string(how) + out + "`; the value written is not the scaled sum; use "
                "SPLITK_MODE=reduce");
}

// Renames value `from` to `to` where the statements read it.
void rename_operands(Block& b, const std::string& from, const std::string& to) {
  walk(b, [&](Stmt& st) {
    for (Operand& o : st.args)
      if (o.name == from) o.name = to;
  });
}

// 3 (fixup): `part` adds its accumulator into workspace[..out]; splitk_fixup takes the sum,
// clears the element and finishes it.
std::vector<LoopOp> fixup_ops(LoopProgram& p, const LoopOp& op, const Contraction& c,
                              std::vector<ParallelLoop> split_loops, Block cell,
                              std::set<std::string>& taken) {
  TensorDecl ws;
  ws.name = fresh_name("workspace", taken);
  ws.dtype = DType::F32;
  ws.role = TensorRole::Temp;
  ws.zero_init = true;
  for (const auto& l : c.loops) ws.shape.push_back(l.extent);
  p.tensors.push_back(ws);
  const std::vector<Expr> idx = var_index(c.loops);
  const std::string acc = c.cell[0].dst;
  cell.push_back(Stmt::Write(ws.name, idx, Operand::value(acc)));
  cell.back().atomic_add = true;
  LoopOp part{op.name, {}, ws.name, parallel_nest(split_loops, std::move(cell))};
  part.inputs = inputs_read(op, part.body);

  const std::string sum = fresh_name(acc + "_sum", taken);
  Block epilogue(c.cell.begin() + 2, c.cell.end());
  rename_operands(epilogue, acc, sum);
  Block fcell = {Stmt::Load(sum, ws.name, idx), Stmt::Write(ws.name, idx, Operand::constant(0.0))};
  fcell.insert(fcell.end(), epilogue.begin(), epilogue.end());
  LoopOp fix{"splitk_fixup", {}, op.output, parallel_nest(c.loops, std::move(fcell))};
  fix.inputs = inputs_read(op, fix.body);
  fix.inputs.insert(fix.inputs.begin(), ws.name);
  return {std::move(part), std::move(fix)};
}

// Steps 2-3 for one op; returns the ops that replace it.
std::vector<LoopOp> split(LoopProgram& p, const LoopOp& op, const Contraction& c,
                          int64_t S, int64_t granule, const std::string& mode) {
  const bool atomic = mode == "atomic";
  std::set<std::string> taken = loop_program_names(p);
  const std::string s_var = fresh_name("s", taken);
  const Stmt& red = c.cell[1];
  Chunks ch = plan(red.extent, S, granule, Expr::var(s_var));
  if (ch.splits.is_const() && ch.splits.const_value() == 1) return {op};  // K fits one chunk

  // 2: the split reduction.
  Block kbody = red.body;
  substitute_block(kbody, {{red.var, Expr::var(s_var) * ch.size + Expr::var(red.var)}});
  Block cell = {c.cell[0], Stmt::For(red.var, ch.extent, LoopKind::Reduce, red.axis, kbody)};
  std::vector<ParallelLoop> split_loops = c.loops;
  split_loops.insert(split_loops.begin(), ParallelLoop{s_var, ch.splits, "s"});
  const std::string acc = c.cell[0].dst;

  if (mode == "fixup") return fixup_ops(p, op, c, split_loops, std::move(cell), taken);
  std::vector<LoopOp> out;
  if (atomic) {
    LoopOp zero;
    zero.name = "zero_fill";
    zero.output = op.output;
    // At the cell's own write index: after l:015 (SWAP_AB) it is out[n, m], not the loops'.
    zero.body = parallel_nest(c.loops, {Stmt::Write(op.output, c.cell.back().index,
                                                    Operand::constant(0.0))});
    cell.insert(cell.end(), c.cell.begin() + 2, c.cell.end());
    cell.back().atomic_add = true;
    LoopOp part{op.name, {}, op.output, parallel_nest(split_loops, std::move(cell))};
    part.inputs = inputs_read(op, part.body);
    out.push_back(std::move(zero));
    out.push_back(std::move(part));
    return out;
  }

  // 3 (reduce): partial[s, ..out] is f32, the accumulator type, so the sum of the
  // partials rounds only where the unsplit sum did, in the final write.
  TensorDecl partial;
  partial.name = fresh_name("partial", taken);
  partial.dtype = DType::F32;
  partial.role = TensorRole::Temp;
  partial.shape = {ch.splits};
  for (const auto& l : c.loops) partial.shape.push_back(l.extent);
  p.tensors.push_back(partial);
  std::vector<Expr> pidx = var_index(split_loops);
  cell.push_back(Stmt::Write(partial.name, pidx, Operand::value(acc)));
  LoopOp part{op.name, {}, partial.name, parallel_nest(split_loops, std::move(cell))};
  part.inputs = inputs_read(op, part.body);

  const std::string v = fresh_name(acc + "_s", taken);
  Block sum = {Stmt::Load(v, partial.name, pidx), Stmt::Accum(acc, Operand::value(v))};
  Block rcell = {c.cell[0], Stmt::For(s_var, ch.splits, LoopKind::Reduce, "s", std::move(sum))};
  rcell.insert(rcell.end(), c.cell.begin() + 2, c.cell.end());
  LoopOp reduce{mode == "partials" ? "splitk_fixup" : "splitk_reduce", {}, op.output,
                parallel_nest(c.loops, std::move(rcell))};
  reduce.inputs = inputs_read(op, reduce.body);
  reduce.inputs.insert(reduce.inputs.begin(), partial.name);
  out.push_back(std::move(part));
  out.push_back(std::move(reduce));
  return out;
}

// The rounding granule of a chunk: one staged slab (t:040's BK, whose default is 16).
int64_t chunk_granule(const CompileState& s) {
  if (s.knobs.get_str("STAGE", "sync") == "direct") return 1;
  return s.knobs.get_int("BK", 16);
}

}  // namespace

Pass pass_split_k() {
  return Pass{"l:020_split_k", Level::Loop, Level::Loop,
              "with SPLITK > 1 every contraction reduces one chunk of K per `s`; its partial "
              "sums are combined by splitk_reduce (reduce), atomically after zero_fill "
              "(atomic), atomically into a zeroed workspace that splitk_fixup finishes "
              "(fixup), or by splitk_fixup summing the partial tiles (partials)",
              {"SPLITK", "SPLITK_MODE"},
              [](CompileState& s) {
                // Attention has no contraction to split: SPLITK and SPLITK_MODE do not apply
                // and are not recorded (the knob list shows what applied); SPLITK given is
                // refused below.
                if (s.graph.attention() && !s.knobs.has("SPLITK")) return;
                int64_t S = s.knob("SPLITK", 1);
                std::string mode = s.knobs.get_str("SPLITK_MODE", "reduce");
                s.used_knobs["SPLITK_MODE"] = mode;
                if (S == 1) return;
                if (mode != "reduce" && mode != "atomic" && mode != "fixup" && mode != "partials")
                  throw Error("SPLITK_MODE=" + mode + ": the split-K combines are reduce (a "
                              "second kernel sums the partials), atomic (f32 adds into the "
                              "output), fixup (one kernel: the last CTA of a tile finishes the "
                              "atomic sums) and partials (one kernel: the last CTA of a tile "
                              "sums the partial tiles)");
                bool atomic = mode == "atomic";
                std::vector<LoopOp> ops;
                bool any = false;
                for (const auto& op : s.loop.ops) {
                  auto c = match(op);
                  if (!c) {
                    ops.push_back(op);
                    continue;
                  }
                  any = true;
                  if (atomic) check_atomic_legal(s.loop, op, *c);
                  auto repl = split(s.loop, op, *c, S, chunk_granule(s), mode);
                  ops.insert(ops.end(), repl.begin(), repl.end());
                }
                if (!any)
                  throw Error("SPLITK=" + std::to_string(S) +
                              " splits a reduction, and this program has none (matmul, bmm, "
                              "linear have one); use SPLITK=1");
                s.loop.ops = std::move(ops);
              }};
}

}  // namespace loom
