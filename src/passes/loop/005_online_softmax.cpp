// l:005_online_softmax — attention's three ops become one tiled online-softmax op
// (BLOCK_M, BLOCK_N).
//
// l:000 lowers attention as the textbook does: S = scale·Q Kᵀ for the whole row, then
// P = softmax(S), then O = P V — S and P are Sq x Sk each, which is what a GPU kernel
// must never write to memory. The online softmax (Milakov & Gimelshein; FlashAttention)
// walks the keys in blocks of BLOCK_N and keeps per query row a running max m, a running
// sum l and an unnormalized output O; a block whose max raises m rescales l and O by
// exp(m_old - m_new) first, so the result is exact after the last block. Steps:
//  1. Query rows in blocks of BLOCK_M (`qb`, then row `r` of the block; rows past Sq are
//     guarded). A GPU CTA owns one query block, so the block is the unit the causal
//     bound is computed for.
//  2. Key blocks `kb` up to ceil(keys_for_rows / BLOCK_N): with a causal mask the blocks
//     entirely above the query block's diagonal are never visited, and keys masked
//     inside a visited block (the diagonal block, the ragged last one) are excluded by
//     index guards.
//  3. Per block: S tile = Q Kᵀ · scale·log2(e) into `attn_s` (the row's BLOCK_N scores:
//     registers on the GPU), m_blk its max; m_new = max(m, m_blk), alpha =
//     exp2(m - m_new); l and O are rescaled by alpha; P = exp2(S - m_new) overwrites
//     the tile (as P overwrites S in the mma fragments); l += Σ P; O += P V. Scores
//     are in log2 units, so the softmax is exp2, one instruction on the GPU.
//  4. O / l to `out`; LSE = m·ln(2) + log(l) to `lse`. A row that keeps no key (the
//     first Sq - Sk rows of a bottom-right mask) never enters the key loop: it writes 0
//     and -inf directly, so no -inf - -inf is ever formed.
//  5. Decode (attention_decode.h): GQA_PACK makes the rows of head slot h the Sq x group
//     rows of KV head h's query heads; SPLIT_KV cuts the key blocks into S runs (loop `sp`)
//     whose rows write a normalized partial O and LSE to a workspace, and a second op,
//     attention_combine, weights them by exp(LSE_s - max LSE).
// A program with no attention op is left unchanged.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/error.h"
#include "passes/attention_decode.h"
#include "passes/attention_loops.h"
#include "passes/passes.h"

namespace loom {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Operand val(const std::string& name) { return Operand::value(name); }

Stmt loop(const std::string& var, Expr extent, Block body, LoopKind kind = LoopKind::Parallel) {
  return Stmt::For(var, std::move(extent), kind, var, std::move(body));
}

LoopOp online_softmax(const AttentionLoops& a, const AttentionDecode& dec, LoopProgram& p,
                      int64_t BM, int64_t BN) {
  const Expr b = Expr::var("b"), hh = Expr::var("h"), qb = Expr::var("qb"), r = Expr::var("r"),
             kb = Expr::var("kb"), c = Expr::var("c"), d = Expr::var("d"), sp = Expr::var("sp");
  // Packed row pr of head slot hh (GQA_PACK: query pr / group of head hh·group + pr % group;
  // else query pr of head hh); key block kb of split sp is block sp·split_blocks + kb.
  const Expr pr = qb * BM + r, i = dec.query(pr), h = dec.head(hh, pr), hk = dec.kv_head(a, hh);
  const Expr j = (dec.split() ? dec.first_block(sp) + kb : kb) * BN + c;

  TensorDecl tile;  // [B, Hq, Sq, BLOCK_N]: each row's S, then P, tile
  tile.name = fresh_tensor_name(p, "attn_s");
  tile.dtype = DType::F32;
  tile.shape = {a.B, a.Hq, a.q_cap, Expr(BN)};
  tile.role = TensorRole::Temp;
  p.tensors.push_back(tile);
  TensorDecl acc = tile;  // [B, Hq, Sq, D]: the unnormalized O
  acc.name = fresh_tensor_name(p, "attn_o");
  acc.shape = {a.B, a.Hq, a.q_cap, a.D};
  p.tensors.push_back(acc);
  const std::vector<Expr> tij = {b, h, i, c}, oid = {b, h, i, d};
  const Expr key = j < a.Sk && a.keeps(i, j);

  // 3. The block's scores and their max.
  Block dot = {Stmt::Load("q", a.q, a.q_index(b, h, i, d))};
  for (Stmt& st : a.load_kv("k", a.k, b, hk, j, d)) dot.push_back(std::move(st));
  dot.push_back(Stmt::Compute("qk", ScalarOp::Mul, {val("q"), val("k")}));
  dot.push_back(Stmt::Accum("qk_acc", val("qk")));
  Block score = guarded(key, {
      Stmt::Init("qk_acc", 0.0),
      loop("d", a.D, std::move(dot), LoopKind::Reduce),
      Stmt::Compute("s", ScalarOp::Mul, {val("qk_acc"), Operand::constant(a.scale * M_LOG2E)}),
      Stmt::Write(tile.name, tij, val("s")),
      Stmt::Accum("m_blk", val("s"), ScalarOp::Max),
  });
  Block prob = guarded(key, {
      Stmt::Load("s", tile.name, tij),
      Stmt::Compute("e", ScalarOp::Sub, {val("s"), val("m_new")}),
      Stmt::Compute("p", ScalarOp::Exp2, {val("e")}),
      Stmt::Write(tile.name, tij, val("p")),
      Stmt::Accum("l", val("p")),
  });
  Block pv_body = {Stmt::Load("p", tile.name, tij)};
  for (Stmt& st : a.load_kv("v", a.v, b, hk, j, d)) pv_body.push_back(std::move(st));
  pv_body.push_back(Stmt::Compute("pv_c", ScalarOp::Mul, {val("p"), val("v")}));
  pv_body.push_back(Stmt::Accum("pv", val("pv_c")));
  Block pv = guarded(key, std::move(pv_body));
  Block rescale = {
      Stmt::Load("o", acc.name, oid),
      Stmt::Compute("o_scaled", ScalarOp::Mul, {val("o"), val("alpha")}),
      Stmt::Init("pv", 0.0),
      loop("c", Expr(BN), std::move(pv), LoopKind::Reduce),
      Stmt::Compute("o_new", ScalarOp::Add, {val("o_scaled"), val("pv")}),
      Stmt::Write(acc.name, oid, val("o_new")),
  };
  Block block = {
      Stmt::Init("m_blk", kNegInf),
      loop("c", Expr(BN), std::move(score), LoopKind::Reduce),
      Stmt::Compute("m_new", ScalarOp::Max, {val("m"), val("m_blk")}),
      Stmt::Compute("m_diff", ScalarOp::Sub, {val("m"), val("m_new")}),
      Stmt::Compute("alpha", ScalarOp::Exp2, {val("m_diff")}),
      Stmt::Accum("m", val("m_blk"), ScalarOp::Max),
      Stmt::Accum("l", val("alpha"), ScalarOp::Mul),
      loop("c", Expr(BN), std::move(prob), LoopKind::Reduce),
      loop("d", a.D, std::move(rescale)),
  };

  // 2. The key blocks this query block needs (of its split).
  const Expr rows_end = dec.queries_of(a, (qb + 1) * BM);
  const Expr key_blocks = ceil_div(a.keys_for_rows(rows_end), Expr(BN));
  // 4. Normalize and write: O and LSE, or with splits the row's partial O and LSE.
  const std::string o_dst = dec.split() ? dec.part_o : "out";
  const std::vector<Expr> o_at =
      dec.split() ? std::vector<Expr>{b, h, i, sp, d} : a.q_index(b, h, i, d);
  Block finish = {
      Stmt::Load("o", acc.name, oid),
      Stmt::Compute("y", ScalarOp::Div, {val("o"), val("l")}),
      Stmt::Write(o_dst, o_at, val("y")),
  };
  Block row = {
      Stmt::Init("m", kNegInf),
      Stmt::Init("l", 0.0),
      loop("d", a.D, {Stmt::Write(acc.name, oid, Operand::constant(0.0))}),
      loop("kb", dec.block_count(sp, key_blocks), std::move(block), LoopKind::Reduce),
      loop("d", a.D, std::move(finish)),
  };
  Block cell = dec.split() ? finish_split_row(a, dec, std::move(row), b, h, i, sp)
                           : finish_row(a, std::move(row), b, h, i);

  // 1. Query blocks (and their splits) and their rows.
  Block rows = {loop("r", Expr(BM), guarded(pr < dec.rows(a), std::move(cell)))};
  if (dec.split()) rows = {loop("sp", Expr(dec.splits), std::move(rows))};
  LoopOp op;
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
  Block batch = a.batch_lets(b);  // paged: Sk is the batch's key count
  batch.push_back(loop("h", dec.heads(a), {loop("qb", ceil_div(dec.rows(a), Expr(BM)), rows)}));
  op.body = {loop("b", a.B, std::move(batch))};
  return op;
}

bool is_unfused_attention(const LoopOp& op) {
  return op.name == "attention_scores" || op.name == "attention_softmax" ||
         op.name == "attention_pv";
}

}  // namespace

Pass pass_online_softmax() {
  return Pass{"l:005_online_softmax", Level::Loop, Level::Loop,
              "attention is one op over query blocks of BLOCK_M rows and key blocks of "
              "BLOCK_N: running max and sum, O rescaled by exp2(m_old - m_new), no Sq x Sk "
              "temp; causal key blocks past the query block's diagonal are not visited; "
              "GQA_PACK: a KV head's query heads are one row set; SPLIT_KV: each query "
              "block's key blocks split S ways into partial O/LSE, then attention_combine",
              {"BLOCK_M", "BLOCK_N", "SPLIT_KV", "GQA_PACK"},
              [](CompileState& s) {
                if (!s.graph.attention()) return;
                AttentionLoops a(s.graph);
                const int64_t BM = s.knob("BLOCK_M", default_block_m(s, a));
                const int64_t BN = s.knob("BLOCK_N", default_block_n(s, a, BM));
                AttentionDecode dec = attention_decode(s, a, BM, BN);
                LoopProgram& p = s.loop;
                std::vector<std::string> temps;
                for (const LoopOp& op : p.ops)
                  if (is_unfused_attention(op) && op.output != "out") temps.push_back(op.output);
                std::erase_if(p.ops, is_unfused_attention);
                std::erase_if(p.tensors, [&](const TensorDecl& t) {
                  return std::find(temps.begin(), temps.end(), t.name) != temps.end();
                });
                if (dec.split()) declare_split_workspace(a, dec, p);
                p.ops.push_back(online_softmax(a, dec, p, BM, BN));
                if (dec.split()) {
                  LoopOp combine;
                  combine.name = kCombineOp;
                  combine.inputs = {dec.part_o, dec.part_lse};
                  if (a.paged) combine.inputs.push_back(a.seqlens);
                  combine.output = "out";
                  combine.body = attention_combine_body(a, dec, false);
                  p.ops.push_back(std::move(combine));
                }
              }};
}

}  // namespace loom
