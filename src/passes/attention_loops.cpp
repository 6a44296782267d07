#include "passes/attention_loops.h"

#include <algorithm>
#include <limits>

#include "ir/error.h"

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
  Sq = nq.shape[2].expr();
  Sk = nk.shape[2].expr();
  D = nq.shape[3].expr();
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

Expr AttentionLoops::has_keys(const Expr& i) const {
  if (causal != Causal::BottomRight) return Expr(1);
  if (Sq.is_const() && Sk.is_const()) {
    int64_t lack = Sq.const_value() - Sk.const_value();
    return lack <= 0 ? Expr(1) : Expr(lack) <= i;
  }
  return Sq <= i + Sk;
}

Expr AttentionLoops::empty_row(const Expr& i) const {
  if (causal != Causal::BottomRight) return Expr(0);
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

Block guarded(const Expr& cond, Block body) {
  if (cond.is_const()) return cond.const_value() != 0 ? body : Block{};
  return {Stmt::If(cond, std::move(body))};
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
  TensorDecl scores = temp(p, "attn_scores", {a.B, a.Hq, a.Sq, a.Sk});
  p.tensors.push_back(scores);
  TensorDecl probs = temp(p, "attn_probs", {a.B, a.Hq, a.Sq, a.Sk});
  p.tensors.push_back(probs);
  if (a.lse) {
    if (p.has_tensor(kLseTensor))
      throw Error(std::string("attention: an input is named ") + kLseTensor +
                  ", the name of the log-sum-exp output; rename it");
    p.tensors.push_back(temp(p, kLseTensor, {a.B, a.Hq, a.Sq}, TensorRole::Output));
  }
  const std::vector<Expr> sij = {b, h, i, j};

  Block dot = {
      Stmt::Load("q", a.q, {b, h, i, d}),
      Stmt::Load("k", a.k, {b, hk, j, d}),
      Stmt::Compute("qk", ScalarOp::Mul, {val("q"), val("k")}),
      Stmt::Accum("acc", val("qk")),
  };
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
    row.push_back(Stmt::Write(kLseTensor, {b, h, i}, val("lse_i")));
    empty.push_back(Stmt::Write(kLseTensor, {b, h, i}, Operand::constant(kNegInf)));
  }
  Block cell = guarded(a.has_keys(i), std::move(row));
  Block none = guarded(a.empty_row(i), std::move(empty));
  cell.insert(cell.end(), none.begin(), none.end());
  LoopOp op2{"attention_softmax", {scores.name}, probs.name,
             nest({{"b", a.B}, {"h", a.Hq}, {"i", a.Sq}}, std::move(cell))};

  Block pv = {
      Stmt::Load("p", probs.name, sij),
      Stmt::Load("v", a.v, {b, hk, j, d}),
      Stmt::Compute("pv", ScalarOp::Mul, {val("p"), val("v")}),
      Stmt::Accum("acc", val("pv")),
  };
  Block out = {
      Stmt::Init("acc", 0.0),
      Stmt::For("j", a.Sk, LoopKind::Reduce, "j", std::move(pv)),
      Stmt::Write("out", {b, h, i, d}, val("acc")),
  };
  LoopOp op3{"attention_pv", {probs.name, a.v}, "out",
             nest({{"b", a.B}, {"h", a.Hq}, {"i", a.Sq}, {"d", a.D}}, std::move(out))};
  p.ops.push_back(std::move(op1));
  p.ops.push_back(std::move(op2));
  p.ops.push_back(std::move(op3));
}

}  // namespace loom
