#include "passes/attention_loops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/error.h"
#include "ir/f32_constant.h"
#include "passes/attention_wgmma_tiles.h"
#include "passes/families/family.h"
#include "passes/pass.h"

namespace loom {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Block nest(const std::vector<std::pair<std::string, Expr>>& loops, Block body) {
  for (int i = int(loops.size()) - 1; i >= 0; --i)
    body = {Stmt::For(loops[i].first, loops[i].second, LoopKind::Parallel, loops[i].first,
                      std::move(body))};
  return body;
}

Operand val(const std::string& name) { return Operand::value(name); }

TensorDecl temp(const ProgramBase& p, const std::string& base, std::vector<Expr> shape,
                TensorRole role = TensorRole::Temp) {
  TensorDecl t;
  t.name = role == TensorRole::Output ? base : fresh_tensor_name(p, base);
  t.dtype = DType::F32;
  t.shape = std::move(shape);
  t.role = role;
  return t;
}

}  // namespace

AttentionLoops::AttentionLoops(const Graph& g) {
  node = g.attention();
  if (!node) throw Error("internal error: attention lowering on a graph without attention");
  const Node& nq = g.node(node->inputs[0]);
  const Node& nk = g.node(node->inputs[1]);
  q = nq.name;
  k = nk.name;
  v = g.node(node->inputs[2]).name;
  B = nq.shape[0].expr();
  Hq = nq.shape[1].expr();
  Sq = nq.shape[2].expr();  // varlen: replaced below
  Sk = key_cap = nk.shape[2].expr();
  q_cap = Sq;
  if (node->varlen_attention()) {
    varlen = true;
    cu_q = g.node(node->inputs[3]).name;
    cu_k = g.node(node->inputs[4]).name;
    B = Expr(g.node(node->inputs[3]).shape[0].value - 1);
    D = nq.shape[2].expr();
    q_cap = Expr(node->attention.max_seqlen_q);
    key_cap = nk.shape[0].expr();
    Sq = min(max(Expr::var(kQEndVar) - Expr::var(kQStartVar), Expr(0)), q_cap);
    Sk = max(Expr::var(kKvEndVar) - Expr::var(kKvStartVar), Expr(0));
  }
  if (node->paged_attention()) {
    const Node& bt = g.node(node->inputs[3]);
    paged = true;
    page = nk.shape[2].value;
    block_table = bt.name;
    seqlens = g.node(node->inputs[4]).name;
    key_cap = bt.shape[1].expr() * Expr(page);
    Sk = min(max(Expr::var(kKvLenVar), Expr(0)), key_cap);
  }
  D = nq.shape.back().expr();
  auto gr = attention_kv_group(nq.shape[1], nk.shape[1]);
  LOOM_CHECK(gr.has_value(), "the graph verifier checked that Hkv divides Hq");
  group = *gr;
  causal = node->attention.causal;
  scale = node->attention.scale;
  lse = node->attention.lse;
}

// With constant lengths the offset Sk - Sq is folded into one side, so the printed
// masks read `j <= i + 3` rather than `j + 17 <= i + 20`.
Expr AttentionLoops::keeps(const Expr& i, const Expr& j) const {
  switch (causal) {
    case Causal::None: return Expr(1);
    case Causal::TopLeft: return j <= i;
    case Causal::BottomRight:
      if (Sq.is_const() && Sk.is_const()) {
        int64_t off = Sk.const_value() - Sq.const_value();
        return off >= 0 ? j <= i + off : j + (-off) <= i;
      }
      return j + Sq <= i + Sk;
  }
  return Expr(1);
}

Expr AttentionLoops::drops(const Expr& i, const Expr& j) const {
  switch (causal) {
    case Causal::None: return Expr(0);
    case Causal::TopLeft: return i < j;
    case Causal::BottomRight:
      if (Sq.is_const() && Sk.is_const()) {
        int64_t off = Sk.const_value() - Sq.const_value();
        return off >= 0 ? i + off < j : i < j + (-off);
      }
      return i + Sk < j + Sq;
  }
  return Expr(0);
}

// Paged or varlen, a sequence may have no key at all (L[b] = 0, CK[b+1] = CK[b]): then no
// row keeps one, whatever the mask. (A dense Sk is at least 1.)
Expr AttentionLoops::has_keys(const Expr& i) const {
  if (causal != Causal::BottomRight) return paged || varlen ? Expr(1) <= Sk : Expr(1);
  if (Sq.is_const() && Sk.is_const()) {
    int64_t lack = Sq.const_value() - Sk.const_value();
    return lack <= 0 ? Expr(1) : Expr(lack) <= i;
  }
  return Sq <= i + Sk;
}

Expr AttentionLoops::empty_row(const Expr& i) const {
  if (causal != Causal::BottomRight) return paged || varlen ? Sk < Expr(1) : Expr(0);
  if (Sq.is_const() && Sk.is_const()) {
    int64_t lack = Sq.const_value() - Sk.const_value();
    return lack <= 0 ? Expr(0) : i < Expr(lack);
  }
  return i + Sk < Sq;
}

// Row R-1 is the block's last and keeps the most keys: R (top-left) or R + Sk - Sq
// (bottom-right, at least 0; R <= Sq so it never exceeds Sk).
Expr AttentionLoops::keys_for_rows(const Expr& rows_end) const {
  switch (causal) {
    case Causal::None: return Sk;
    case Causal::TopLeft: return min(Sk, rows_end);
    case Causal::BottomRight:
      if (Sq.is_const() && Sk.is_const()) {
        int64_t off = Sk.const_value() - Sq.const_value();
        return off >= 0 ? rows_end + off : max(Expr(-off), rows_end) - (-off);
      }
      return max(Sq, rows_end + Sk) - Sq;
  }
  return Sk;
}

Block AttentionLoops::batch_lets(const Expr& b) const {
  if (varlen)
    return {Stmt::LetLoad(kQStartVar, cu_q, {b}), Stmt::LetLoad(kQEndVar, cu_q, {b + 1}),
            Stmt::LetLoad(kKvStartVar, cu_k, {b}), Stmt::LetLoad(kKvEndVar, cu_k, {b + 1})};
  if (!paged) return {};
  return {Stmt::LetLoad(kKvLenVar, seqlens, {b})};
}

std::vector<Expr> AttentionLoops::q_index(const Expr& b, const Expr& h, const Expr& i,
                                          const Expr& d) const {
  if (varlen) return {Expr::var(kQStartVar) + i, h, d};
  return {b, h, i, d};
}

std::vector<Expr> AttentionLoops::lse_index(const Expr& b, const Expr& h, const Expr& i) const {
  if (varlen) return {Expr::var(kQStartVar) + i, h};
  return {b, h, i};
}

Block AttentionLoops::load_kv(const std::string& dst, const std::string& tensor, const Expr& b,
                              const Expr& hk, const Expr& j, const Expr& d) const {
  if (varlen) return {Stmt::Load(dst, tensor, {Expr::var(kKvStartVar) + j, hk, d})};
  if (!paged) return {Stmt::Load(dst, tensor, {b, hk, j, d})};
  return {Stmt::LetLoad(kKvPageVar, block_table, {b, j / Expr(page)}),
          Stmt::Load(dst, tensor, {Expr::var(kKvPageVar), hk, j % Expr(page), d})};
}

Block guarded(const Expr& cond, Block body) {
  if (cond.is_const()) return cond.const_value() != 0 ? body : Block{};
  return {Stmt::If(cond, std::move(body))};
}

Block finish_row(const AttentionLoops& a, Block row, const Expr& b, const Expr& h,
                 const Expr& i) {
  const Expr d = Expr::var("d");
  Block empty = {Stmt::For("d", a.D, LoopKind::Parallel, "d",
                           {Stmt::Write("out", a.q_index(b, h, i, d), Operand::constant(0.0))})};
  if (a.lse) {
    row.push_back(Stmt::Compute("m_ln", ScalarOp::Mul, {val("m"), Operand::constant(M_LN2)}));
    row.push_back(Stmt::Compute("log_l", ScalarOp::Log, {val("l")}));
    row.push_back(Stmt::Compute("lse_i", ScalarOp::Add, {val("m_ln"), val("log_l")}));
    row.push_back(Stmt::Write(kLseTensor, a.lse_index(b, h, i), val("lse_i")));
    empty.push_back(Stmt::Write(kLseTensor, a.lse_index(b, h, i), Operand::constant(kNegInf)));
  }
  Block cell = guarded(a.has_keys(i), std::move(row));
  Block none = guarded(a.empty_row(i), std::move(empty));
  cell.insert(cell.end(), none.begin(), none.end());
  return cell;
}

std::string fresh_tensor_name(const ProgramBase& p, const std::string& base) {
  auto taken = [&](const std::string& n) {
    return p.has_tensor(n) ||
           std::find(p.symbols.begin(), p.symbols.end(), n) != p.symbols.end();
  };
  std::string name = base;
  for (int i = 1; taken(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

// 1. attention_scores: S = scale * Q Kᵀ where the mask keeps the key (a contraction over
//    d; masked entries are never written, and never read).
// 2. attention_softmax: per row, m = max_j S, l = Σ_j exp(S - m), P = exp(S - m) / l over
//    the kept keys, 0 elsewhere; LSE = m + log(l). A row that keeps no key gets P = 0
//    and LSE = -inf.
// 3. attention_pv: O = P V (a contraction over j), written to `out`.
void lower_attention(const AttentionLoops& a, LoopProgram& p) {
  Expr b = Expr::var("b"), h = Expr::var("h"), i = Expr::var("i"), j = Expr::var("j"),
       d = Expr::var("d");
  Expr hk = a.kv_head(h);
  TensorDecl scores = temp(p, "attn_scores", {a.B, a.Hq, a.q_cap, a.key_cap});
  p.tensors.push_back(scores);
  TensorDecl probs = temp(p, "attn_probs", {a.B, a.Hq, a.q_cap, a.key_cap});
  p.tensors.push_back(probs);
  if (a.lse) {
    if (p.has_tensor(kLseTensor))
      throw Error(std::string("attention: an input is named ") + kLseTensor +
                  ", the name of the log-sum-exp output; rename it");
    // Varlen: [Tq, Hq] (the rows of O's [Tq, Hq, D]).
    p.tensors.push_back(temp(p, kLseTensor,
                             a.varlen ? std::vector<Expr>{p.tensor(a.q).shape[0], a.Hq}
                                      : std::vector<Expr>{a.B, a.Hq, a.Sq},
                             TensorRole::Output));
  }
  const std::vector<Expr> sij = {b, h, i, j};

  Block dot = {Stmt::Load("q", a.q, a.q_index(b, h, i, d))};
  for (Stmt& st : a.load_kv("k", a.k, b, hk, j, d)) dot.push_back(std::move(st));
  dot.push_back(Stmt::Compute("qk", ScalarOp::Mul, {val("q"), val("k")}));
  dot.push_back(Stmt::Accum("acc", val("qk")));
  Block score = {
      Stmt::Init("acc", 0.0),
      Stmt::For("d", a.D, LoopKind::Reduce, "d", std::move(dot)),
      Stmt::Compute("s", ScalarOp::Mul, {val("acc"), Operand::constant(a.scale)}),
      Stmt::Write(scores.name, sij, val("s")),
  };
  LoopOp op1{"attention_scores", {a.q, a.k}, scores.name,
             nest({{"b", a.B}, {"h", a.Hq}, {"i", a.Sq}, {"j", a.Sk}},
                  guarded(a.keeps(i, j), std::move(score)))};

  Block row_max = guarded(a.keeps(i, j), {Stmt::Load("s", scores.name, sij),
                                          Stmt::Accum("m", val("s"), ScalarOp::Max)});
  Block row_sum = guarded(a.keeps(i, j), {
      Stmt::Load("s", scores.name, sij),
      Stmt::Compute("e", ScalarOp::Sub, {val("s"), val("m")}),
      Stmt::Compute("p", ScalarOp::Exp, {val("e")}),
      Stmt::Accum("l", val("p")),
      Stmt::Write(probs.name, sij, val("p")),
  });
  Block normalize = guarded(a.keeps(i, j), {
      Stmt::Load("p", probs.name, sij),
      Stmt::Compute("pn", ScalarOp::Div, {val("p"), val("l")}),
      Stmt::Write(probs.name, sij, val("pn")),
  });
  Block dropped = guarded(a.drops(i, j), {Stmt::Write(probs.name, sij, Operand::constant(0.0))});
  normalize.insert(normalize.end(), dropped.begin(), dropped.end());
  Block row = {
      Stmt::Init("m", kNegInf),
      Stmt::For("j", a.Sk, LoopKind::Reduce, "j", std::move(row_max)),
      Stmt::Init("l", 0.0),
      Stmt::For("j", a.Sk, LoopKind::Reduce, "j", std::move(row_sum)),
      Stmt::For("j", a.Sk, LoopKind::Parallel, "j", std::move(normalize)),
  };
  Block empty = {Stmt::For("j", a.Sk, LoopKind::Parallel, "j",
                           {Stmt::Write(probs.name, sij, Operand::constant(0.0))})};
  if (a.lse) {
    row.push_back(Stmt::Compute("log_l", ScalarOp::Log, {val("l")}));
    row.push_back(Stmt::Compute("lse_i", ScalarOp::Add, {val("m"), val("log_l")}));
    row.push_back(Stmt::Write(kLseTensor, a.lse_index(b, h, i), val("lse_i")));
    empty.push_back(Stmt::Write(kLseTensor, a.lse_index(b, h, i), Operand::constant(kNegInf)));
  }
  Block cell = guarded(a.has_keys(i), std::move(row));
  Block none = guarded(a.empty_row(i), std::move(empty));
  cell.insert(cell.end(), none.begin(), none.end());
  LoopOp op2{"attention_softmax", {scores.name}, probs.name,
             nest({{"b", a.B}, {"h", a.Hq}, {"i", a.Sq}}, std::move(cell))};

  Block pv = {Stmt::Load("p", probs.name, sij)};
  for (Stmt& st : a.load_kv("v", a.v, b, hk, j, d)) pv.push_back(std::move(st));
  pv.push_back(Stmt::Compute("pv", ScalarOp::Mul, {val("p"), val("v")}));
  pv.push_back(Stmt::Accum("acc", val("pv")));
  Block out = {
      Stmt::Init("acc", 0.0),
      Stmt::For("j", a.Sk, LoopKind::Reduce, "j", std::move(pv)),
      Stmt::Write("out", a.q_index(b, h, i, d), val("acc")),
  };
  LoopOp op3{"attention_pv", {probs.name, a.v}, "out",
             nest({{"b", a.B}, {"h", a.Hq}, {"i", a.Sq}, {"d", a.D}}, std::move(out))};
  for (LoopOp* op : {&op1, &op2, &op3}) {  // paged: each op's b loop binds Sk first
    if (a.paged) {
      if (op != &op2) op->inputs.push_back(a.block_table);
      op->inputs.push_back(a.seqlens);
    }
    if (a.varlen) {
      op->inputs.push_back(a.cu_q);
      op->inputs.push_back(a.cu_k);
    }
    Block lets = a.batch_lets(b);
    Block& body = op->body.front().body;
    body.insert(body.begin(), lets.begin(), lets.end());
  }
  p.ops.push_back(std::move(op1));
  p.ops.push_back(std::move(op2));
  p.ops.push_back(std::move(op3));
}

// D = 256 keeps 128 registers of O and 64 of Q per thread: 64 keys per block would add 32
// more and pass the 255 a thread has; 16 keys leave room (254 used, no spill, sm_90a).
int64_t default_block_n(const AttentionLoops& a) {
  return a.D.is_const() && a.D.const_value() > 128 ? 16 : 64;
}

// Registers: per thread and m16 atom of rows, O holds D/2 f32 (D/8 tiles of 4), S/P
// BLOCK_N/2, Q's A fragments D/4 (D/16 k-steps of 4 .b32; one k-step's 4 with
// Q_IN_REGS=0); plus 40 + 8 per row atom for addresses (the swizzle's included), the
// row statistics, the K/V fragments in flight and the loop — calibrated with NVRTC 13.0
// for sm_90a: D = 256 with BLOCK_N = 32 (estimate 256) spilled 60 B and BLOCK_N = 16
// (248) did not; two row atoms at D = 128, Q_IN_REGS=0, spilled 140 B with BLOCK_N = 64
// (256) and not with 32 (224; 255 used). Past 255 ptxas spills, which on this kernel
// means local-memory traffic inside the key loop.
AttentionTiles attention_tiles(CompileState& s, const AttentionLoops& a) {
  AttentionTiles t;
  // The wgmma kernel's own knobs mean nothing here: refused rather than ignored, as
  // attention_wgmma_tiles() refuses this kernel's. Which knobs those are comes from the two
  // families' declarations (src/passes/families/): the wgmma family's reads that this
  // family does not read. Why this kernel was chosen decides the fix.
  static const KernelFamily* const wgmma = find_family("attention_wgmma");
  static const KernelFamily* const mma_sync = find_family("attention_mma_sync");
  LOOM_CHECK(wgmma && mma_sync, "the attention families are registered");
  for (const KnobUse& use : wgmma->reads) {
    const std::string& k = use.name;
    if (mma_sync->reads_knob(k) || !s.knobs.has(k)) continue;
    const bool sm90a = s.target.arch == "sm_90a";
    const bool d_fits = a.D.is_const() && attention_wgmma_head_dim(a.D.const_value());
    const std::string why = s.knobs.has("ATTN_MMA")
                                ? "ATTN_MMA=" + s.knobs.get_str("ATTN_MMA", "") + " asks for it"
                            : !sm90a ? "the only attention kernel for " + s.target.arch
                                     : "the default for D = " + a.D.str();
    throw Error(k + " is a knob of attention's wgmma kernel (k:013), and this one "
                "is the mma.sync kernel (k:012; " + why + "): drop " + k +
                (sm90a && d_fits ? ", or use ATTN_MMA=wgmma"
                                 : ", or use ATTN_MMA=wgmma on an sm_90a target with D a "
                                   "multiple of 8 up to 256"));
  }
  t.block_m = s.knob("BLOCK_M", default_block_m(s, a));
  t.block_n = s.knob("BLOCK_N", default_block_n(s, a, t.block_m));
  t.warps = s.knob("WARPS", std::max<int64_t>(1, std::min<int64_t>(8, t.block_m / 16)));
  t.kv_stages = s.knob("KV_STAGES", default_kv_stages(s, a));
  t.q_in_regs = s.knob("Q_IN_REGS", 1) != 0;
  t.interleave_loads = s.knob("INTERLEAVE_LOADS", 1) != 0;
  t.frag_buffers = s.knob("FRAG_BUFFERS", 1);
  // STAGE_OUTPUT defaults to 0: the fragments' 4-byte stores fill each 32-byte sector in
  // two instructions that L2 merges, and the staged copy costs ~40 instructions per
  // 16-byte chunk (codegen's 16-bit loads and stores go through f32), ~300 per thread
  // and CTA (sm_90a SASS, D = 128) against 690 per key block: a wash at 1k+ keys, a small
  // loss at 512. The H100 A/B decides (docs/attention.md).
  t.stage_output = s.knob("STAGE_OUTPUT", 0) != 0;
  const std::string softmax = s.knobs.get_str("SOFTMAX", "exp2");
  s.used_knobs["SOFTMAX"] = softmax;
  t.softmax_exp2 = softmax == "exp2";
  if (!t.interleave_loads && t.frag_buffers == 2)
    throw Error("FRAG_BUFFERS=2 with INTERLEAVE_LOADS=0: the whole block's K/V fragments are "
                "already in registers before the mmas, so there is no next k-step to load "
                "under them; use INTERLEAVE_LOADS=1 or FRAG_BUFFERS=1");
  if (!a.D.is_const())
    throw Error("attention's GPU kernel needs a numeric head dim D (the O and Q fragments "
                "are register arrays sized by it); D is " + a.D.str());
  t.head_dim = a.D.const_value();
  // ZERO_INIT defaults to mma, except where the kernel sits at 255 registers — above
  // D = 128, and with Q re-read per k-step (Q_IN_REGS=0, two row atoms) — where the peeled
  // first k-step tipped ptxas into spills and the Init loop did not (sm_90a: D = 256 with
  // BLOCK_N = 16, 40 B; D = 128, Q_IN_REGS=0,BLOCK_M=128,WARPS=4,BLOCK_N=32, 24-40 B).
  const bool tight = t.head_dim > 128 || !t.q_in_regs;
  const std::string zero = s.knobs.get_str("ZERO_INIT", tight ? "init" : "mma");
  s.used_knobs["ZERO_INIT"] = zero;
  t.zero_init_mma = zero == "mma";
  if (t.head_dim > 256)
    throw Error("attention's mma.sync kernel takes head dims that are multiples of 16 up to "
                "256 (m16n8k16 k-steps over D, O's fragments in registers); D = " +
                std::to_string(t.head_dim) + ": no attention kernel of Loom takes it (the "
                "wgmma kernel stops at 256 too); use a head dim of at most 256");
  if (t.head_dim % 16 != 0) {
    const std::string scale = shortest_text(a.scale);
    const int64_t padded = (t.head_dim + 15) / 16 * 16;
    throw Error("attention's mma.sync kernel takes head dims that are multiples of 16 up to "
                "256 (m16n8k16 k-steps over D); D = " + std::to_string(t.head_dim) +
                (attention_wgmma_head_dim(t.head_dim)
                     ? ": on sm_90a the wgmma kernel takes it (ATTN_MMA=wgmma, the default "
                       "there); here pad"
                     : ": pad") +
                " the head dim to " + std::to_string(padded) + " with zero columns in Q, K "
                "and V (Q K^T is unchanged; O's extra columns are zero) and keep this "
                "attention's scale with scale=" + scale);
  }
  if (t.warps < 1 || t.warps > 16)
    throw Error("WARPS=" + std::to_string(t.warps) + ": a CTA has 1 to 16 warps here");
  if (t.block_m % (16 * t.warps) != 0)
    throw Error("BLOCK_M=" + std::to_string(t.block_m) + " must be a multiple of 16*WARPS = " +
                std::to_string(16 * t.warps) + " (each warp owns whole m16 atoms of rows)");
  if (t.block_n % 16 != 0)
    throw Error("BLOCK_N=" + std::to_string(t.block_n) + " must be a multiple of 16 (P's "
                "m16n8 tiles pair up into the k16 A fragments of O += P V)");
  // cp.async rings: at most 4 (the waits count 2S - 3 groups; deeper was never built).
  // TMA rings (KV_COPY=tma): each slot its own mbarrier, up to 8.
  const bool tma_ring = s.knobs.get_str("KV_COPY", "cp_async") == "tma";
  if (t.kv_stages < 1 || t.kv_stages > (tma_ring ? 8 : 4))
    throw Error("KV_STAGES=" + std::to_string(t.kv_stages) + ": attention's mma.sync kernel "
                "buffers K and V once (1: loaded at each key block) or in a ring of 2 to 4 "
                "(the next KV_STAGES-1 blocks' loads issued eagerly, under this block's "
                "math), up to 8 with KV_COPY=tma; use 1 to 4" +
                std::string(tma_ring ? " (8 with KV_COPY=tma)" : ", or KV_COPY=tma for 5 to 8"));
  t.row_atoms = t.block_m / (16 * t.warps);
  t.smem_bytes = (t.block_m + 2 * t.kv_stages * t.block_n) * t.head_dim * 2;
  if (t.smem_bytes > s.target.smem_per_block)
    throw Error("BLOCK_M=" + std::to_string(t.block_m) + ",BLOCK_N=" +
                std::to_string(t.block_n) + ",KV_STAGES=" + std::to_string(t.kv_stages) +
                " with D=" + std::to_string(t.head_dim) + " needs " +
                std::to_string(t.smem_bytes) + " B of shared memory (Q + K + V blocks); " +
                s.target.arch + " allows " + std::to_string(s.target.smem_per_block) +
                " B per block");
  t.fragment_regs =
      t.row_atoms * (t.head_dim / 2 + t.block_n / 2 + (t.q_in_regs ? t.head_dim / 4 : 4));
  // INTERLEAVE_LOADS=0 and FRAG_BUFFERS=2 add nothing here: in the unrolled key loop
  // ptxas schedules the ldmatrix where it likes, whatever order the IR gives. Measured
  // (NVRTC 13.0, sm_90a, D = 128, 64x64 blocks): 232 registers by default, 236 with the
  // whole K and V blocks' fragments loaded first (estimate +128), 232 with FRAG_BUFFERS=2.
  // The exception is FRAG_BUFFERS=2 with Q_IN_REGS=0, where Q's fragments are double
  // buffered too and ptxas keeps K's next set across the Q reloads: two m16 atoms at
  // D = 128 with BLOCK_N = 32 (255 registers without it) spilled 20 B (sm_90a, causal).
  if (t.frag_buffers == 2 && !t.q_in_regs) t.fragment_regs += 8 * t.row_atoms + t.block_n / 2;
  const int64_t overhead = 40 + 8 * t.row_atoms;
  if (t.fragment_regs + overhead > s.target.regs_per_thread)
    throw Error("BLOCK_M=" + std::to_string(t.block_m) + ",BLOCK_N=" +
                std::to_string(t.block_n) + ",WARPS=" + std::to_string(t.warps) + " with D=" +
                std::to_string(t.head_dim) + " keeps ~" + std::to_string(t.fragment_regs) +
                " registers of fragments per thread (O, S/P, Q) plus ~" + std::to_string(overhead) +
                " more; a thread has " +
                std::to_string(s.target.regs_per_thread) +
                ": use more WARPS per BLOCK_M, a smaller BLOCK_N or Q_IN_REGS=0");
  return t;
}

}  // namespace loom
