#include "passes/attention_decode.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/error.h"
#include "passes/kernel_builders.h"
#include "passes/pass.h"

namespace loom {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
using kernel_builders::flat;
using kernel_builders::val;

int64_t cdiv(int64_t x, int64_t y) { return (x + y - 1) / y; }

// A size's value when it is a number.
std::optional<int64_t> known(const Expr& e) {
  if (e.is_const()) return e.const_value();
  return std::nullopt;
}

// The combine weights one split: w = exp(lse_s - m), loaded from the workspace.
Block weight(const AttentionDecode& d, const std::vector<Expr>& at) {
  return {Stmt::Load("x", d.part_lse, at), Stmt::Compute("x_m", ScalarOp::Sub, {val("x"), val("m")}),
          Stmt::Compute("w", ScalarOp::Exp, {val("x_m")})};
}

}  // namespace

Expr AttentionDecode::rows(const AttentionLoops& a) const {
  return pack == 1 ? a.Sq : a.Sq * pack;
}
Expr AttentionDecode::rows_cap(const AttentionLoops& a) const {
  return pack == 1 ? a.q_cap : a.q_cap * pack;
}
Expr AttentionDecode::heads(const AttentionLoops& a) const {
  if (pack == 1) return a.Hq;
  return a.Hq.is_const() ? Expr(a.Hq.const_value() / pack) : a.Hq / pack;
}
Expr AttentionDecode::query(const Expr& p) const { return pack == 1 ? p : p / pack; }
Expr AttentionDecode::head(const Expr& hh, const Expr& p) const {
  return pack == 1 ? hh : hh * pack + p % pack;
}
Expr AttentionDecode::kv_head(const AttentionLoops& a, const Expr& hh) const {
  return pack == 1 ? a.kv_head(hh) : hh;
}
Expr AttentionDecode::queries_of(const AttentionLoops& a, const Expr& rows_end) const {
  return pack == 1 ? min(a.Sq, rows_end) : min(a.Sq, ceil_div(rows_end, Expr(pack)));
}
Expr AttentionDecode::block_count(const Expr& sp, const Expr& blocks) const {
  if (!split()) return blocks;
  return max(Expr(0), min(split_blocks, blocks - first_block(sp)));
}
// Row i keeps keys [0, keys_for_rows(i + 1)) (every mask keeps a prefix); the split's
// keys start at sp · split_blocks · BLOCK_N.
Expr AttentionDecode::has_keys(const AttentionLoops& a, const Expr& i, const Expr& sp) const {
  if (!split()) return a.has_keys(i);
  const Expr start = first_block(sp) * block_n;
  if (a.causal == Causal::None) {
    // Constant Sk: the clamped split count leaves no split past Sk.
    if (a.Sk.is_const()) return Expr(1);
    return start < a.Sk;
  }
  return start < a.keys_for_rows(i + 1);
}
Expr AttentionDecode::split_empty(const AttentionLoops& a, const Expr& i, const Expr& sp) const {
  if (!split()) return a.empty_row(i);
  const Expr start = first_block(sp) * block_n;
  if (a.causal == Causal::None) {
    if (a.Sk.is_const()) return Expr(0);
    return a.Sk <= start;
  }
  return a.keys_for_rows(i + 1) <= start;
}

bool attention_is_decode(const AttentionLoops& a) {
  return a.Sq.is_const() && a.Sq.const_value() <= kDecodeRows;
}

namespace {
// Whether the wgmma kernel was asked for by name: the decode knobs default off then
// (k:013 has no split or packed rows), and refuse to be set.
bool wgmma_asked(const CompileState& s) {
  return s.knobs.has("ATTN_MMA") && s.knobs.get_str("ATTN_MMA", "") == "wgmma";
}
// STAGE_OUTPUT=1 copies O out as one head's contiguous rows: the decode forms default off.
bool staged_output(const CompileState& s) { return s.knobs.get_int("STAGE_OUTPUT", 0) != 0; }
// The warps sharing a decode CTA's rows: WARPS, or one per 16 rows of the block, at most 8
// (t:012's default).
int64_t row_warps_of(const CompileState& s, int64_t block_m) {
  return s.knobs.has("WARPS") ? std::max<int64_t>(1, s.knobs.get_int("WARPS", 1))
                              : std::clamp<int64_t>(block_m / 16, 1, 8);
}
int64_t default_pack(const CompileState& s, const AttentionLoops& a) {
  if (!attention_is_decode(a) || wgmma_asked(s) || staged_output(s) || !a.group.is_const())
    return 0;
  return a.group.const_value() > 1 ? 1 : 0;
}
}  // namespace

bool attention_wants_mma_sync(const CompileState& s) {
  if (!s.graph.attention()) return false;
  // Paged KV prefill (Sq > 64) and varlen prefill run on the wgmma kernel too (k:013 reads
  // pages and packed rows through its tensor maps); paged decode keeps the split-KV kernel,
  // and varlen whose longest sequence is a decode's (max_seqlen_q <= 64) the mma.sync kernel's
  // 64-row blocks, not 128-192 rows mostly past every sequence.
  const AttentionLoops a(s.graph);
  return attention_is_decode(a) || (a.varlen && a.q_cap.const_value() <= kDecodeRows) ||
         s.knobs.get_int("SPLIT_KV", 1) > 1 || s.knobs.get_int("GQA_PACK", 0) != 0;
}

int64_t default_block_m(CompileState& s, const AttentionLoops& a) {
  if (!attention_is_decode(a) || wgmma_asked(s)) return 64;
  const int64_t pack = s.knobs.has("GQA_PACK") ? (s.knobs.get_int("GQA_PACK", 0) != 0)
                                               : default_pack(s, a);
  const int64_t group = pack && a.group.is_const() ? a.group.const_value() : 1;
  const int64_t rows = a.Sq.const_value() * group;
  // Above D = 128 a thread's O and Q fragments take ~200 registers: a one-warp CTA, which
  // copies all of Q and K/V alone, spilled 124-192 B at D = 256 (NVRTC 13.0); four warps
  // of 16 rows (the prefill tile) share the copies and do not.
  if (a.D.is_const() && a.D.const_value() > 128) return 64;
  return std::min<int64_t>(64, std::max<int64_t>(16, cdiv(rows, 16) * 16));
}

int64_t default_block_n(CompileState& s, const AttentionLoops& a, int64_t block_m) {
  const int64_t base = default_block_n(a);
  if (!attention_is_decode(a) || wgmma_asked(s) || !a.D.is_const()) return base;
  const int64_t warps = row_warps_of(s, block_m);
  const int64_t cap = std::max<int64_t>(16, 16 * 8 * 32 * warps / a.D.const_value() / 16 * 16);
  return std::min(base, cap);
}

int64_t default_kv_stages(CompileState& s, const AttentionLoops& a) {
  if (!attention_is_decode(a) || wgmma_asked(s)) return 2;
  return kDecodeKvStages;
}

AttentionDecode attention_decode(CompileState& s, const AttentionLoops& a, int64_t block_m,
                                 int64_t block_n, const ProgramBase* p) {
  AttentionDecode d;
  d.block_n = block_n;
  const bool pack = s.knob("GQA_PACK", default_pack(s, a)) != 0;
  if (pack) {
    if (!a.group.is_const())
      throw Error("GQA_PACK=1 packs the Hq/Hkv query heads of a KV head into a CTA's rows "
                  "and needs that ratio as a number; it is " + a.group.str() +
                  ": use GQA_PACK=0 or numeric head counts");
    d.pack = a.group.const_value();
  }
  // The default split: 1 unless decode with numeric B, heads and Sk. Then enough splits
  // that the grid fills about one wave of resident CTAs (SMs x the CTAs per SM the
  // shared memory allows) — decode is bound by the bytes of K and V, and what keeps
  // DRAM busy is enough copies in flight on every SM — and at most one split per key
  // block. Splits of one block are not too short: a one-warp CTA takes ~0.6 µs per
  // 32-key block of math, so a split's blocks are a chain, and within one wave shorter
  // chains won on the H100 (B = 1, Hkv = 8, 1k keys: 8 splits of 4 blocks 11.6 µs, 16 of
  // 2 10.4, 32 of 1 9.2; SDPA's best 11.9). Past one wave more splits lost (B = 8: 8
  // splits 19.6 µs, 16 and 32 20.6), which the wave cap below keeps.
  constexpr int64_t kMinSplitBlocks = 1;
  int64_t def = 1;
  // Paged, the split count is sized by the table's capacity (maxp·page keys): the grid is
  // fixed at compile time, each sequence's own length divides among the splits at run time.
  // A run-time Sk (one kernel for every cache length: a serving loop, torch.compile's
  // dynamic shapes) is split the same way, sized for long caches: the wave's worth of
  // splits, each taking ceil(blocks / splits) at run time; at a short length the splits
  // past the last block hold no key (LSE = -inf, skipped by the combine). Unsplit, B = 1
  // with 8 KV heads ran 8 CTAs on 132 SMs whatever the length.
  const auto B = known(a.B), Hq = known(a.Hq), Sk = known(a.key_cap), D = known(a.D);
  const bool sized = attention_is_decode(a) && !wgmma_asked(s) && !staged_output(s) && B &&
                     Hq && D && (Sk || !a.varlen);
  const int64_t ctas =
      sized ? *B * (*Hq / d.pack) * cdiv(a.Sq.const_value() * d.pack, block_m) : 1;
  const int64_t stages =
      std::max<int64_t>(1, s.knobs.get_int("KV_STAGES", default_kv_stages(s, a)));
  // One wave of CTAs of `w` K/V rings each: SMs x the CTAs per SM the shared memory allows.
  // An SM's shared memory is the block's opt-in maximum plus the 1 KB the hardware reserves
  // per block (sm_90: 232448 + 1024 = 233472 B; sm_80: 166912 + 1024 = 167936 B).
  const int64_t smem_per_sm = s.target.smem_per_block + 1024;
  auto wave_of = [&](int64_t w) {
    const int64_t smem = decode_cta_smem(block_m, block_n, sized ? *D : 0, stages, w);
    return int64_t(s.target.sm_count) * std::clamp<int64_t>(smem_per_sm / smem, 1, 8);
  };
  // SPLIT_WARPS: the CTA's shared memory grows by a K/V ring per group, so the wave below
  // holds fewer CTAs (the split count and the warps are chosen together). Its default: the
  // most groups (up to kDecodeSplitWarps) whose wave still gives each row set
  // kDecodeSplitWarpsMinSplits splits and whose CTA fits the block's shared memory and
  // 1024 threads; where the row sets alone fill the wave, one group. Part of the split
  // default: an explicit SPLIT_KV keeps one group unless SPLIT_WARPS is set too.
  // Measured on sm_90 only (H200, bench/NOTES.md): elsewhere one group by default. And
  // only where the one-group split has splits of 2 or more blocks: at one block per split
  // the groups shorten no chain (B = 1, Hkv = 8, 1k keys: 10.5 µs at W = 4 against 10.0).
  int64_t warps_default = 1;
  const bool long_splits =
      !Sk || cdiv(cdiv(*Sk, block_n), std::clamp<int64_t>(wave_of(1) / ctas, 1, 128)) >= 2;
  if (sized && !s.knobs.has("SPLIT_KV") && s.target.compute_capability() >= 90 && long_splits) {
    for (int64_t w = kDecodeSplitWarps; w > 1; w /= 2) {
      const int64_t row_warps = row_warps_of(s, block_m);
      // At most 128 threads: a CTA of 4 row warps (D = 256's 64 rows) times 4 groups is
      // 512 threads at 128 registers each, and spilled 1.4 KB (NVRTC 13.0).
      const bool fits =
          decode_cta_smem(block_m, block_n, *D, stages, w) <= s.target.smem_per_block &&
          32 * row_warps * w <= 128;
      if (fits && wave_of(w) / ctas >= kDecodeSplitWarpsMinSplits) {
        warps_default = w;
        break;
      }
    }
  }
  const int64_t warps_asked = s.knobs.get_int("SPLIT_WARPS", warps_default);
  if (sized) {
    const int64_t wave = wave_of(warps_asked);
    // At most a block per warp group: SPLIT_WARPS=W's groups walk every W-th block of a
    // split, so a split of fewer than W blocks leaves groups idle (1k keys, W = 4: 8 splits
    // of 4 blocks, a block per warp, not 16 of 2 with half the warps idle).
    const int64_t per_split = kMinSplitBlocks * std::max<int64_t>(1, warps_asked);
    const int64_t most = Sk ? std::max<int64_t>(1, cdiv(*Sk, block_n) / per_split) : 128;
    // At most one wave: rounding the split count up put a second, nearly empty wave
    // behind the first (B = 1, Hkv = 32: 32 row sets x 25 splits = 800 CTAs for 792
    // slots; B = 8, Hkv = 8: 64 x 13 = 832), the whole kernel's time again for its few
    // CTAs. Rounded down, every split runs in the first wave.
    def = std::clamp<int64_t>(wave / ctas, 1, std::min<int64_t>(most, 128));
  }
  d.splits = s.knob("SPLIT_KV", def);
  if (d.splits < 1)
    throw Error("SPLIT_KV=" + std::to_string(d.splits) + ": the key blocks of a query block "
                "are split over 1 (no split) or more CTAs");
  if ((d.splits > 1 || pack) && wgmma_asked(s))
    throw Error(std::string(d.splits > 1 ? "SPLIT_KV" : "GQA_PACK") +
                " is built for attention's mma.sync kernel (k:012), and ATTN_MMA=wgmma asks "
                "for the wgmma kernel: use ATTN_MMA=mma_sync, or drop " +
                (d.splits > 1 ? "SPLIT_KV" : "GQA_PACK"));
  if (a.varlen && d.splits > 1)
    throw Error("SPLIT_KV=" + std::to_string(d.splits) + " with packed sequences (cu_seqlens_q=): "
                "the split form of varlen is not built; use SPLIT_KV=1");
  const Expr key_blocks = ceil_div(a.Sk, Expr(block_n));
  if (Sk) {
    // No split starts past the last key block (SPLIT_KV above the block count is clamped).
    const int64_t nkb = cdiv(*Sk, block_n);
    const int64_t per = cdiv(nkb, std::min(d.splits, std::max<int64_t>(1, nkb)));
    d.splits = std::max<int64_t>(1, cdiv(nkb, per));
    // Paged: sequence b's ceil(kv_len / BLOCK_N) blocks spread over all the splits (a
    // split past them writes LSE = -inf, which the combine skips).
    d.split_blocks = a.paged ? ceil_div(key_blocks, Expr(d.splits)) : Expr(per);
  } else {
    d.split_blocks = ceil_div(key_blocks, Expr(d.splits));
  }
  s.used_knobs["SPLIT_KV"] = std::to_string(d.splits);  // as clamped
  // Recorded where it applies (decode shapes, or set): the prefill kernels' knobs unchanged.
  d.split_warps = attention_is_decode(a) || s.knobs.has("SPLIT_WARPS")
                      ? s.knob("SPLIT_WARPS", warps_default)
                      : 1;
  if (d.split_warps != 1 && d.split_warps != 2 && d.split_warps != 4 && d.split_warps != 8)
    throw Error("SPLIT_WARPS=" + std::to_string(d.split_warps) + ": the warps that share a "
                "CTA's rows, each walking every W-th key block, are 1, 2, 4 or 8");
  if (d.split_warps > 1) {
    if (wgmma_asked(s))
      throw Error("SPLIT_WARPS is built for attention's mma.sync kernel (k:012), and "
                  "ATTN_MMA=wgmma asks for the wgmma kernel: use ATTN_MMA=mma_sync, or drop "
                  "SPLIT_WARPS");
    if (staged_output(s))
      throw Error("SPLIT_WARPS=" + std::to_string(d.split_warps) + " meets the warps' (m, l, O) "
                  "in shared memory over the staging of STAGE_OUTPUT=1: use STAGE_OUTPUT=0, or "
                  "SPLIT_WARPS=1");
  }
  if (d.split()) {
    // COMBINE's default: the last CTA from kDecodeLastCtaWarps groups on, where it folds
    // its row set in one pass (a thread per row and 4 columns: rows x D/4 items over the
    // CTA's threads) and, paged, over fewer than kPagedLastCtaMaxSplits splits.
    const int64_t row_warps = row_warps_of(s, block_m);
    const Expr rows = d.rows(a);
    const int64_t live = rows.is_const() ? std::min(block_m, rows.const_value()) : block_m;
    const int64_t items = live * (D && *D % 4 == 0 ? *D / 4 : D.value_or(block_m));
    const bool one_pass = items <= 32 * row_warps * d.split_warps;
    const bool last_cta = d.split_warps >= kDecodeLastCtaWarps && one_pass &&
                          !(a.paged && d.splits >= kPagedLastCtaMaxSplits);
    const std::string mode = s.knobs.get_str("COMBINE", last_cta ? "last_cta" : "kernel");
    s.used_knobs["COMBINE"] = mode;
    if (mode != "kernel" && mode != "last_cta")
      throw Error("COMBINE=" + mode + ": split-KV's partials are combined by a second kernel "
                  "(kernel) or by the split kernel's CTA that finishes a row set last "
                  "(last_cta)");
    d.combine_last_cta = mode == "last_cta";
  }
  if (p && d.split()) {
    for (const TensorDecl& t : p->tensors) {
      if (t.role != TensorRole::Temp) continue;
      if (d.part_o.empty() && t.name.rfind("attn_part_o", 0) == 0) d.part_o = t.name;
      if (d.part_lse.empty() && t.name.rfind("attn_part_lse", 0) == 0) d.part_lse = t.name;
    }
    LOOM_CHECK(!d.part_o.empty() && !d.part_lse.empty(), "l:005 declares the split workspace");
  }
  return d;
}

int64_t decode_cta_smem(int64_t block_m, int64_t block_n, int64_t head_dim, int64_t stages,
                        int64_t split_warps) {
  return (block_m + 2 * stages * block_n * std::max<int64_t>(1, split_warps)) * head_dim * 2 +
         1024;
}

void declare_split_workspace(const AttentionLoops& a, AttentionDecode& d, ProgramBase& p) {
  TensorDecl o;
  o.name = fresh_tensor_name(p, "attn_part_o");
  o.dtype = DType::F32;
  o.shape = {a.B, a.Hq, a.Sq, Expr(d.splits), a.D};
  o.role = TensorRole::Temp;
  p.tensors.push_back(o);
  TensorDecl l = o;
  l.name = fresh_tensor_name(p, "attn_part_lse");
  l.shape = {a.B, a.Hq, a.Sq, Expr(d.splits)};
  p.tensors.push_back(l);
  d.part_o = o.name;
  d.part_lse = l.name;
}

Block finish_split_row(const AttentionLoops& a, const AttentionDecode& d, Block row,
                       const Expr& b, const Expr& h, const Expr& i, const Expr& sp) {
  const Expr dd = Expr::var("d");
  row.push_back(Stmt::Compute("m_ln", ScalarOp::Mul, {val("m"), Operand::constant(M_LN2)}));
  row.push_back(Stmt::Compute("log_l", ScalarOp::Log, {val("l")}));
  row.push_back(Stmt::Compute("lse_i", ScalarOp::Add, {val("m_ln"), val("log_l")}));
  row.push_back(Stmt::Write(d.part_lse, {b, h, i, sp}, val("lse_i")));
  Block empty = {Stmt::For("d", a.D, LoopKind::Parallel, "d",
                           {Stmt::Write(d.part_o, {b, h, i, sp, dd}, Operand::constant(0.0))}),
                 Stmt::Write(d.part_lse, {b, h, i, sp}, Operand::constant(kNegInf))};
  Block cell = guarded(d.has_keys(a, i, sp), std::move(row));
  Block none = guarded(d.split_empty(a, i, sp), std::move(empty));
  cell.insert(cell.end(), none.begin(), none.end());
  return cell;
}

// 1. m = max over the splits holding keys of the row of their LSE (finite: split 0 holds
//    key 0, which every row with keys keeps).
// 2. Per d: Σ w_s O_s[d] and Σ w_s, w_s = exp(LSE_s - m); out = the ratio.
// 3. LSE = m + log Σ w_s. A row with no key: O = 0, LSE = -inf.
Block attention_combine_body(const AttentionLoops& a, const AttentionDecode& d, bool tiled) {
  const Expr b = Expr::var("b"), h = Expr::var("h"), i = Expr::var("i"), sp = Expr::var("sp"),
             dd = Expr::var("d");
  const Tier grid = tiled ? Tier::Grid : Tier::None;
  const std::vector<Expr> at = {b, h, i, sp};
  const Expr holds = d.has_keys(a, i, sp);
  Block max_of = guarded(holds, {Stmt::Load("x", d.part_lse, at),
                                 Stmt::Accum("m", val("x"), ScalarOp::Max)});
  Block sum_of = guarded(holds, weight(d, at));
  if (!sum_of.empty()) {
    Block& in = sum_of.back().kind == StmtKind::If ? sum_of.back().body : sum_of;
    in.push_back(Stmt::Accum("l", val("w")));
  }
  Block term = weight(d, at);
  term.push_back(Stmt::Load("o", d.part_o, {b, h, i, sp, dd}));
  term.push_back(Stmt::Compute("wo", ScalarOp::Mul, {val("w"), val("o")}));
  term.push_back(Stmt::Accum("acc", val("wo")));
  Block per_d = {
      Stmt::Init("acc", 0.0),
      Stmt::For("sp", Expr(d.splits), LoopKind::Reduce, "sp", guarded(holds, std::move(term))),
      Stmt::Compute("y", ScalarOp::Div, {val("acc"), val("l")}),
      Stmt::Write("out", {b, h, i, dd}, val("y")),
  };
  Block row = {
      Stmt::Init("m", kNegInf),
      Stmt::For("sp", Expr(d.splits), LoopKind::Reduce, "sp", std::move(max_of)),
      Stmt::Init("l", 0.0),
      Stmt::For("sp", Expr(d.splits), LoopKind::Reduce, "sp", std::move(sum_of)),
      Stmt::For("d", a.D, LoopKind::Parallel, "d", std::move(per_d),
                tiled ? Tier::Thread : Tier::None),
  };
  if (a.lse) {
    row.push_back(Stmt::Compute("log_l", ScalarOp::Log, {val("l")}));
    row.push_back(Stmt::Compute("lse_i", ScalarOp::Add, {val("m"), val("log_l")}));
    row.push_back(Stmt::Write(kLseTensor, {b, h, i}, val("lse_i")));
  }
  Block empty = {Stmt::For("d", a.D, LoopKind::Parallel, "d",
                           {Stmt::Write("out", {b, h, i, dd}, Operand::constant(0.0))},
                           tiled ? Tier::Thread : Tier::None)};
  if (a.lse) empty.push_back(Stmt::Write(kLseTensor, {b, h, i}, Operand::constant(kNegInf)));
  Block cell = a.batch_lets(b);  // paged: the splits' keys depend on the batch's length
  for (Block part : {guarded(a.has_keys(i), std::move(row)), guarded(a.empty_row(i), std::move(empty))})
    cell.insert(cell.end(), part.begin(), part.end());
  return {Stmt::For("i", a.Sq, LoopKind::Parallel, "i",
                    {Stmt::For("h", a.Hq, LoopKind::Parallel, "h",
                               {Stmt::For("b", a.B, LoopKind::Parallel, "b", std::move(cell), grid)},
                               grid)},
                    grid)};
}

// One CTA per (i, h, b) of D·G threads: thread (g, d) folds splits g, g + G, .. of the
// row into a running (m, l, acc) — online, one pass: acc = acc·e^(m − m') + e^(x − m')·O
// — then the G partial states meet in shared memory and threads g = 0 form O and LSE.
// G = ceil(S / 8) by default (at most 1024 / D threads): each thread's loads
// are a few independent L2 reads instead of S of them in a row (S = 64-94 splits at
// B = 1: two loops of 64-94 loads per thread kept the combine at several µs, a large
// part of an 11 µs decode).
int64_t combine_groups_default(int64_t splits, int64_t head_dim) {
  constexpr int64_t kCombineSplitsPerThread = 8;
  return std::clamp<int64_t>(cdiv(splits, kCombineSplitsPerThread), 1,
                             std::max<int64_t>(1, 1024 / head_dim));
}

KernelOp attention_combine_kernel(const AttentionLoops& a, const AttentionDecode& d,
                                  KernelProgram& p, int64_t groups) {
  const Expr b = Expr::var("b"), h = Expr::var("h"), i = Expr::var("i"), sp = Expr::var("sp"),
             dd = Expr::var("d"), g = Expr::var("g"), j = Expr::var("j"), gg = Expr::var("gg");
  const int64_t D = a.D.const_value(), S = d.splits, G = groups;
  if (G < 1 || D * G > 1024)
    throw Error("COMBINE_GROUPS=" + std::to_string(G) + ": the combine kernel's CTA is G groups "
                "of D = " + std::to_string(D) + " threads, at most 1024 threads: use 1 to " +
                std::to_string(std::max<int64_t>(1, 1024 / D)));
  auto shared = [&](const std::string& base, int64_t n) {
    TensorDecl t;
    t.name = fresh_tensor_name(p, base);
    t.dtype = DType::F32;
    t.shape = {Expr(n)};
    t.role = TensorRole::Shared;
    p.tensors.push_back(t);
    return t.name;
  };
  const std::string acc_s = shared("comb_acc", G * D), ml_s = shared("comb_ml", 2 * G);
  // (After the shared tensors join p.tensors: references into it stay valid from here.)
  const TensorDecl &po = p.tensor(d.part_o), &pl = p.tensor(d.part_lse);
  const Expr holds = d.has_keys(a, i, sp);
  // 1. This thread's splits, online. Where whether a split holds keys of the row is known
  //    only at run time (paged KV, a run-time Sk, causal), the loads are not left under that
  //    test: ptxas keeps each split's loads behind the previous split's branch, J dependent
  //    round trips to L2 (the paged combine at 1k keys, 8 splits a thread; the last CTA's
  //    combine had the same flaw, k:012). There every split's LSE and O are first loaded
  //    into registers (every split stores its partials, a keyless one LSE = -inf; a slot
  //    past the last split reads the last one's), ahead of the row's tests, then folded
  //    under the test.
  const int64_t J = cdiv(S, G);
  const bool hoist = !(holds.is_const() && holds.const_value() != 0);
  const Operand x = hoist ? val("cx", {j}) : val("x"), o = hoist ? val("co", {j}) : val("o");
  Block fold;
  if (!hoist) fold.push_back(Stmt::Load("x", d.part_lse, {flat(pl, {b, h, i, sp})}));
  fold.insert(fold.end(), {
      Stmt::Compute("m_new", ScalarOp::Max, {val("m"), x}),
      Stmt::Compute("m_d", ScalarOp::Sub, {val("m"), val("m_new")}),
      Stmt::Compute("c", ScalarOp::Exp, {val("m_d")}),  // m = -inf first: c = 0
      Stmt::Compute("x_m", ScalarOp::Sub, {x, val("m_new")}),
      Stmt::Compute("w", ScalarOp::Exp, {val("x_m")}),
  });
  if (!hoist) fold.push_back(Stmt::Load("o", d.part_o, {flat(po, {b, h, i, sp, dd})}));
  fold.insert(fold.end(), {
      Stmt::Compute("wo", ScalarOp::Mul, {val("w"), o}),
      Stmt::Accum("acc", val("c"), ScalarOp::Mul),
      Stmt::Accum("acc", val("wo")),
      Stmt::Accum("l", val("c"), ScalarOp::Mul),
      Stmt::Accum("l", val("w")),
      Stmt::Accum("m", x, ScalarOp::Max),
  });
  Block loads;
  if (hoist) {
    const Expr at = min(sp, Expr(S - 1));
    Stmt load_x = Stmt::Load("cx", d.part_lse, {flat(pl, {b, h, i, at})});
    load_x.dst_index = {j};
    Stmt load_o = Stmt::Load("co", d.part_o, {flat(po, {b, h, i, at, dd})});
    load_o.dst_index = {j};
    loads = {Stmt::Alloc("cx", {Expr(J)}), Stmt::Alloc("co", {Expr(J)}),
             kernel_builders::reg_loop("j", J, {Stmt::Let("sp", j * G + g), load_x, load_o})};
  }
  Block step = {Stmt::Let("sp", j * G + g)};
  Block in = guarded(S % G == 0 ? holds : (sp < Expr(S) && holds), std::move(fold));
  step.insert(step.end(), in.begin(), in.end());
  // 2. The G states meet: M = max m_g (finite: group 0 holds split 0, which holds key 0
  //    of every row with keys), O = Σ acc_g e^(m_g − M) / Σ l_g e^(m_g − M).
  const Expr out_at = flat(p.tensor("out"), {b, h, i, dd});
  Block meet = {
      Stmt::Init("mm", -std::numeric_limits<double>::infinity()),
      Stmt::For("gg", Expr(G), LoopKind::Reduce, "gg",
                {Stmt::Load("mg", ml_s, {gg * 2}), Stmt::Accum("mm", val("mg"), ScalarOp::Max)}),
      Stmt::Init("ll", 0.0),
      Stmt::Init("aa", 0.0),
      Stmt::For("gg", Expr(G), LoopKind::Reduce, "gg",
                {Stmt::Load("mg", ml_s, {gg * 2}), Stmt::Load("lg", ml_s, {gg * 2 + 1}),
                 Stmt::Load("ag", acc_s, {gg * D + dd}),
                 Stmt::Compute("mg_d", ScalarOp::Sub, {val("mg"), val("mm")}),
                 Stmt::Compute("cg", ScalarOp::Exp, {val("mg_d")}),
                 Stmt::Compute("lc", ScalarOp::Mul, {val("lg"), val("cg")}),
                 Stmt::Compute("ac", ScalarOp::Mul, {val("ag"), val("cg")}),
                 Stmt::Accum("ll", val("lc")), Stmt::Accum("aa", val("ac"))}),
      Stmt::Compute("y", ScalarOp::Div, {val("aa"), val("ll")}),
      Stmt::Write("out", {out_at}, val("y")),
  };
  if (a.lse) {
    const Expr at = flat(p.tensor(kLseTensor), {b, h, i});
    meet.push_back(Stmt::If(dd < 1, {Stmt::Compute("log_l", ScalarOp::Log, {val("ll")}),
                                     Stmt::Compute("lse_i", ScalarOp::Add, {val("mm"), val("log_l")}),
                                     Stmt::Write(kLseTensor, {at}, val("lse_i"))}));
  }
  Block row = {
      Stmt::Init("m", -std::numeric_limits<double>::infinity()),
      Stmt::Init("l", 0.0),
      Stmt::Init("acc", 0.0),
      hoist ? kernel_builders::reg_loop("j", J, std::move(step), LoopKind::Reduce)
            : Stmt::For("j", Expr(J), LoopKind::Reduce, "j", std::move(step)),
      Stmt::Write(acc_s, {g * D + dd}, val("acc")),
      Stmt::If(dd < 1, {Stmt::Write(ml_s, {g * 2}, val("m")),
                        Stmt::Write(ml_s, {g * 2 + 1}, val("l"))}),
      Stmt::Barrier(),
      Stmt::If(g < 1, std::move(meet)),
  };
  Block empty = {Stmt::Write("out", {out_at}, Operand::constant(0.0))};
  if (a.lse) {
    const Expr at = flat(p.tensor(kLseTensor), {b, h, i});
    empty.push_back(Stmt::If(dd < 1, {Stmt::Write(kLseTensor, {at}, Operand::constant(kNegInf))}));
  }
  KernelOp k;
  k.name = "k_attention_combine";
  k.grid[0] = a.Sq;
  k.grid[1] = a.Hq;
  k.grid[2] = a.B;
  k.block_threads = int(D * G);
  // __launch_bounds__(D·G, 1): without a minimum NVRTC's ptxas (13.0) capped this kernel at
  // 32 registers and spilled 8 B (the same quirk as k:012's MIN_BLOCKS comment).
  k.min_blocks_per_sm = 1;
  k.body = {Stmt::Let("i", Expr::var("blockIdx.x")), Stmt::Let("h", Expr::var("blockIdx.y")),
            Stmt::Let("b", Expr::var("blockIdx.z")),
            Stmt::Let("g", Expr::var("threadIdx.x") / D),
            Stmt::Let("d", Expr::var("threadIdx.x") % D)};
  if (a.paged)
    k.body.push_back(Stmt::LetLoad(kKvLenVar, a.seqlens, {flat(p.tensor(a.seqlens), {b})}));
  // The hoisted loads go ahead of the row's tests too (their addresses do not depend on
  // the key count), in flight beside the paged form's kv_len.
  k.body.insert(k.body.end(), loads.begin(), loads.end());
  // Both conditions are uniform over the CTA (i, b): every thread reaches the barrier.
  Block cell = guarded(a.has_keys(i), std::move(row));
  Block none = guarded(a.empty_row(i), {Stmt::If(g < 1, std::move(empty))});
  k.body.insert(k.body.end(), cell.begin(), cell.end());
  k.body.insert(k.body.end(), none.begin(), none.end());
  for (const std::string& t : {d.part_o, d.part_lse, std::string("out")}) k.params.push_back(t);
  if (a.lse) k.params.push_back(kLseTensor);
  if (a.paged) k.params.push_back(a.seqlens);
  for (const auto& sym : p.symbols) k.params.push_back(sym);
  return k;
}

}  // namespace loom
