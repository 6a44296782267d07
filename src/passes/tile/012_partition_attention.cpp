// t:012_partition_attention — attention's online-softmax op becomes the tiers of its
// mma.sync kernel (BLOCK_M, BLOCK_N, WARPS; docs/attention.md).
//
// The loop form of l:005 already has the CTA's structure; this pass names it:
//  1. GRID: query block qb (blockIdx.x), head h (y), batch b (z) — a query block is the
//     unit the causal key bound is computed for, so it is one CTA.
//  2. WARP: w, each warp owning BLOCK_M / WARPS consecutive rows (a multiple of 16: whole
//     m16 atoms, so a row's scores live in one warp's fragments and the row max and sum
//     need only the lanes of a quad, never shared memory).
//  3. REGISTER: the warp's rows r. The loop form's per-row temps become register arrays:
//     `s_row[BLOCK_N]` (the row's S, then P, tile) and `o_row[D]` (the unnormalized O);
//     attn_s / attn_o, which stood in for them in memory, are gone.
// The arithmetic is the loop form's, statement for statement (k:012 maps it onto
// fragments), so this level still runs one row at a time on the CPU interpreter.
// A program without attention is left to t:010.
#include <cmath>
#include <limits>

#include "ir/error.h"
#include "passes/attention_decode.h"
#include "passes/attention_loops.h"
#include "passes/attention_wgmma_tiles.h"
#include "passes/passes.h"

namespace loom {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Operand val(const std::string& name, std::vector<Expr> idx = {}) {
  return Operand::value(name, std::move(idx));
}

Stmt loop(const std::string& var, Expr extent, Block body, LoopKind kind = LoopKind::Parallel,
          Tier tier = Tier::None) {
  return Stmt::For(var, std::move(extent), kind, var, std::move(body), tier);
}

TileOp partition(const AttentionLoops& a, const AttentionTiles& t, const AttentionDecode& dec) {
  const Expr b = Expr::var("b"), hh = Expr::var("h"), qb = Expr::var("qb"), w = Expr::var("w"),
             r = Expr::var("r"), kb = Expr::var("kb"), c = Expr::var("c"), d = Expr::var("d"),
             sp = Expr::var("sp");
  const int64_t RW = t.block_m / t.warps;
  // Packed row pr (GQA_PACK) of head slot hh; key block kb of split sp (SPLIT_KV).
  const Expr pr = qb * t.block_m + w * RW + r, i = dec.query(pr), h = dec.head(hh, pr),
             hk = dec.kv_head(a, hh);
  const Expr j = (dec.split() ? dec.first_block(sp) + kb : kb) * t.block_n + c;
  const Expr key = j < a.Sk && a.keeps(i, j);
  const double log2_scale = a.scale * M_LOG2E;

  Block dot = {Stmt::Load("q", a.q, a.q_index(b, h, i, d))};
  for (Stmt& st : a.load_kv("k", a.k, b, hk, j, d)) dot.push_back(std::move(st));
  dot.push_back(Stmt::Compute("qk", ScalarOp::Mul, {val("q"), val("k")}));
  dot.push_back(Stmt::Accum("qk_acc", val("qk")));
  Stmt s_c = Stmt::Compute("s_row", ScalarOp::Mul, {val("qk_acc"), Operand::constant(log2_scale)});
  s_c.dst_index = {c};
  Block score = guarded(key, {
      Stmt::Init("qk_acc", 0.0),
      loop("d", a.D, std::move(dot), LoopKind::Reduce),
      s_c,
      Stmt::Accum("m_blk", val("s_row", {c}), ScalarOp::Max),
  });
  Stmt p_c = Stmt::Compute("e", ScalarOp::Sub, {val("s_row", {c}), val("m_new")});
  Stmt p_exp = Stmt::Compute("s_row", ScalarOp::Exp2, {val("e")});
  p_exp.dst_index = {c};
  Block prob = guarded(key, {p_c, p_exp, Stmt::Accum("l", val("s_row", {c}))});
  Block pv_body = a.load_kv("v", a.v, b, hk, j, d);
  pv_body.push_back(Stmt::Compute("pv_c", ScalarOp::Mul, {val("s_row", {c}), val("v")}));
  pv_body.push_back(Stmt::Accum("pv", val("pv_c")));
  Block pv = guarded(key, std::move(pv_body));
  Stmt o_scaled = Stmt::Compute("o_row", ScalarOp::Mul, {val("o_row", {d}), val("alpha")});
  o_scaled.dst_index = {d};
  Block rescale = {
      o_scaled,
      Stmt::Init("pv", 0.0),
      loop("c", Expr(t.block_n), std::move(pv), LoopKind::Reduce),
      Stmt::Accum("o_row", val("pv")),
  };
  rescale.back().dst_index = {d};
  Block block = {
      Stmt::Init("m_blk", kNegInf),
      loop("c", Expr(t.block_n), std::move(score), LoopKind::Reduce),
      Stmt::Compute("m_new", ScalarOp::Max, {val("m"), val("m_blk")}),
      Stmt::Compute("m_diff", ScalarOp::Sub, {val("m"), val("m_new")}),
      Stmt::Compute("alpha", ScalarOp::Exp2, {val("m_diff")}),
      Stmt::Accum("m", val("m_blk"), ScalarOp::Max),
      Stmt::Accum("l", val("alpha"), ScalarOp::Mul),
      loop("c", Expr(t.block_n), std::move(prob), LoopKind::Reduce),
      loop("d", a.D, std::move(rescale)),
  };
  const Expr rows_end = dec.queries_of(a, (qb + 1) * t.block_m);
  const Expr key_blocks = ceil_div(a.keys_for_rows(rows_end), Expr(t.block_n));
  Stmt zero = Stmt::Init("o_row", 0.0);
  zero.dst_index = {d};
  Block row = {
      Stmt::Alloc("s_row", {Expr(t.block_n)}),
      Stmt::Alloc("o_row", {a.D}),
      Stmt::Init("m", kNegInf),
      Stmt::Init("l", 0.0),
      loop("d", a.D, {zero}),
      loop("kb", dec.block_count(sp, key_blocks), std::move(block), LoopKind::Reduce),
      Stmt::Compute("inv_l", ScalarOp::Div, {Operand::constant(1.0), val("l")}),
      loop("d", a.D, {Stmt::Compute("y", ScalarOp::Mul, {val("o_row", {d}), val("inv_l")}),
                      dec.split() ? Stmt::Write(dec.part_o, {b, h, i, sp, d}, val("y"))
                                  : Stmt::Write("out", a.q_index(b, h, i, d), val("y"))}),
  };
  Block cell = dec.split() ? finish_split_row(a, dec, std::move(row), b, h, i, sp)
                           : finish_row(a, std::move(row), b, h, i);

  Block rows = {loop("r", Expr(RW), guarded(pr < dec.rows(a), std::move(cell)),
                     LoopKind::Parallel, Tier::Register)};
  Block warps = a.batch_lets(b);  // paged: Sk is the batch's key count
  warps.push_back(loop("w", Expr(t.warps), std::move(rows), LoopKind::Parallel, Tier::Warp));
  Block grid = {loop("h", dec.heads(a), {loop("b", a.B, std::move(warps), LoopKind::Parallel,
                                              Tier::Grid)},
                     LoopKind::Parallel, Tier::Grid)};
  if (dec.split()) grid = {loop("sp", Expr(dec.splits), std::move(grid), LoopKind::Parallel, Tier::Grid)};
  // Varlen: as many query blocks as the longest sequence may have (rows_cap); a block past
  // its own sequence's rows has none (the `pr < rows` guard).
  grid = {loop("qb", ceil_div(dec.rows_cap(a), Expr(t.block_m)), std::move(grid),
               LoopKind::Parallel, Tier::Grid)};
  TileOp op;
  op.name = "attention";
  op.inputs = {a.q, a.k, a.v};
  if (a.paged) {
    op.inputs.push_back(a.block_table);
    op.inputs.push_back(a.seqlens);
  }
  if (a.varlen) {
    op.inputs.push_back(a.cu_q);
    op.inputs.push_back(a.cu_k);
  }
  op.output = dec.split() ? dec.part_o : "out";
  op.body = std::move(grid);
  return op;
}

}  // namespace

Pass pass_partition_attention() {
  return Pass{"t:012_partition_attention", Level::Loop, Level::Tile,
              "attention is one CTA per (query block, head, batch), WARPS warps of "
              "BLOCK_M/WARPS rows each (a multiple of 16); S/P and O are register arrays; "
              "SPLIT_KV: a grid tier per split and the combine's tile op",
              {"BLOCK_M", "BLOCK_N", "WARPS"},
              [](CompileState& s) {
                if (!s.graph.attention()) return;
                AttentionLoops a(s.graph);
                // ATTN_MMA=wgmma: the partition of k:013's kernel (64 rows per warpgroup).
                const AttentionTiles t = attention_uses_wgmma(s) ? attention_wgmma_partition(s, a)
                                                                 : attention_tiles(s, a);
                TileProgram tp;
                static_cast<ProgramBase&>(tp) = s.loop;
                // The loop form's stand-ins for registers are registers now.
                std::erase_if(tp.tensors, [](const TensorDecl& d) {
                  return d.role == TensorRole::Temp &&
                         (d.name.rfind("attn_s", 0) == 0 || d.name.rfind("attn_o", 0) == 0);
                });
                // SPLIT_KV, GQA_PACK: the values l:005 built the loop form with.
                const AttentionDecode dec =
                    attention_decode(s, a, t.block_m, t.block_n, &s.loop);
                if (attention_uses_wgmma(s) && (dec.split() || dec.pack > 1))
                  throw Error("internal error: the wgmma kernel got a split or packed form");
                tp.ops.push_back(partition(a, t, dec));
                if (dec.split()) {
                  TileOp combine;
                  combine.name = kCombineOp;
                  combine.inputs = {dec.part_o, dec.part_lse};
                  if (a.paged) combine.inputs.push_back(a.seqlens);
                  combine.output = "out";
                  combine.body = attention_combine_body(a, dec, true);
                  tp.ops.push_back(std::move(combine));
                }
                s.tile = std::move(tp);
                s.level = Level::Tile;
              }};
}

}  // namespace loom
