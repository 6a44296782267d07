// k:012_lower_attention — attention's tiled Tile IR (t:012) becomes the mma.sync kernel of
// FlashAttention-2 (docs/attention.md, "The mma.sync kernel"): per CTA one query block,
// per warp whole m16 atoms of rows, every product on the table's m16n8k16 atom.
//  1. Bind: blockIdx (qb, h, b), warp w = threadIdx.x / 32, lane = threadIdx.x % 32; with
//     a causal mask the query blocks run longest first (qb = last - blockIdx.x).
//  2. Q resident in registers: the block's [BLOCK_M, D] is copied to shared memory by
//     16-byte cp.async (rows past Sq zero-filled), and each warp ldmatrix.x4s its rows into
//     A fragments for all D/16 k-steps, kept for the whole key loop (Q_IN_REGS=0: loaded
//     again at each k-step of S, the registers going to more rows per warp).
//  3. Key loop over the query block's causal bound: K and V blocks by cp.async, one commit
//     group each (rows past Sk zero-filled). KV_STAGES=2: rings of two, block kb+1's K
//     issued right after S_kb and its V right after O += P_kb V_kb (eager loads);
//     KV_STAGES=1: each block loads its own K and V at its top (V overlaps S only).
//     K [key][d] is the "B stored N x K" operand: plain ldmatrix.x4 (two n8 tiles per
//     load); V [key][d] is B stored K x N: ldmatrix.x4.trans.
//  4. Masks per element only in blocks the mask or the ragged end reaches (a CTA-uniform
//     test on the block's last key and the block's first row): s = -inf there. A row that
//     keeps no key (bottom-right mask, Sq > Sk) is given every key < Sk instead, so its
//     max is finite and nothing computes -inf - -inf; its O and LSE are overwritten by 0
//     and -inf at the store (index conditions, as in the loop form).
//  5. Online softmax on the fragments: row max over the thread's values, then over the
//     quad (lane_reduce.max.x4: the 4 lanes of an m16n8 C row); alpha = exp2((m - m_new) c),
//     p = exp2(s c - m_new c) with c = scale·log2(e) (one FFMA + ex2); the row sum stays
//     per thread until the end (FlashAttention-2), then one lane_reduce.add.x4.
//  6. O += P V with P in registers: two adjacent S accumulator tiles are the A fragment of
//     one k16 step (c_to_a_pairs proves it from the atom's maps; codegen packs the f32
//     pairs with cvt.rn.*x2.f32 at the mma).
//  7. O · (1/l) stored by each lane as bf16/f16 pairs (4-byte stores); LSE by lane t = 0 of
//     each quad for its two rows.
// Shared tiles: Q_s, K_s, V_s, rows of D 16-bit elements. With SWIZZLE=xor (the default
// for a power-of-two D) each row's 16-byte chunk c is stored at c ^ (row % 8)
// (Swizzle<B,3,log2(D)-3>): the 8 rows one ldmatrix matrix reads then sit in 8 different
// bank groups instead of one (rows of 128 or 256 bytes all start at bank 0: 8-way
// conflicts with SWIZZLE=none).
// Knobs: BLOCK_M, BLOCK_N, WARPS (t:012), KV_STAGES (1, 2), Q_IN_REGS, SWIZZLE (none, xor),
// MIN_BLOCKS.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "atoms/atoms.h"
#include "ir/error.h"
#include "passes/attention_loops.h"
#include "passes/passes.h"

namespace loom {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int64_t kLanes = 32, kChunk = 8;  // 16-byte cp.async chunks of 16-bit elements

Operand val(const std::string& name, std::vector<Expr> idx = {}) {
  return Operand::value(name, std::move(idx));
}
Stmt reg_loop(const std::string& var, int64_t extent, Block body) {
  return Stmt::For(var, Expr(extent), LoopKind::Parallel, var, std::move(body), Tier::Register);
}
Stmt with_dst(Stmt s, std::vector<Expr> idx) {
  s.dst_index = std::move(idx);
  return s;
}
Expr operator||(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Or, a, b); }

// Row-major flat offset of `idx` in `t`.
Expr flat(const TensorDecl& t, const std::vector<Expr>& idx) {
  const std::vector<Expr> st = t.strides();
  Expr off(0);
  for (size_t i = 0; i < idx.size(); ++i) off = off + idx[i] * st[i];
  return off;
}

struct Lowering {
  const AttentionLoops& a;
  const AttentionTiles& t;
  KernelProgram& p;
  DType dt;
  std::string q_s, k_s, v_s;
  Expr b = Expr::var("b"), h = Expr::var("h"), qb = Expr::var("qb"), w = Expr::var("w"),
       lane = Expr::var("lane"), tid = Expr::var("threadIdx.x"), kb = Expr::var("kb");
  int64_t D, BM, BN, W, RA, RW, min_blocks = 1;
  bool swizzle = true;

  Lowering(const AttentionLoops& a_, const AttentionTiles& t_, KernelProgram& p_)
      : a(a_), t(t_), p(p_) {
    dt = p.tensor(a.q).dtype;
    D = t.head_dim, BM = t.block_m, BN = t.block_n, W = t.warps, RA = t.row_atoms;
    RW = BM / W;
  }

  // [rows, D], or [stages, rows, D]: a ring of K or V blocks.
  std::string shared(const std::string& base, int64_t rows, int64_t stages = 0) {
    TensorDecl s;
    s.name = fresh_tensor_name(p, base);
    s.dtype = dt;
    s.shape = {Expr(rows), Expr(D)};
    if (stages > 0) s.shape.insert(s.shape.begin(), Expr(stages));
    s.role = TensorRole::Shared;
    if (swizzle) {
      int row_bits = 0;
      while ((int64_t(1) << row_bits) < D) ++row_bits;
      if ((int64_t(1) << row_bits) != D)
        throw Error("SWIZZLE=xor permutes the 16-byte chunks of a row by the row's low bits and "
                    "needs a power-of-two head dim; D = " + std::to_string(D) +
                    " takes SWIZZLE=none");
      // Chunk bits [3, 3 + B) of the element offset XOR the row's low B bits.
      s.swizzle = Swizzle{std::min(3, row_bits - 3), 3, row_bits - 3};
    }
    p.tensors.push_back(s);
    return s.name;
  }

  // rows x D of `src` (rows from `row0` of head `head`) into `dst` by 16-byte cp.async,
  // the block's threads taking consecutive chunks; rows at or past `limit` zero-filled.
  Block copy_block(const std::string& dst, const std::string& src, const Expr& head,
                   const Expr& row0, int64_t rows, const Expr& limit, const std::string& tag,
                   const Expr& base = Expr(0)) {
    const int64_t chunks = rows * D / kChunk, threads = kLanes * W;
    const Expr c = Expr::var(tag + "_c"), e = Expr::var(tag + "_e");
    const Expr row = e / (D / kChunk), col = e % (D / kChunk) * kChunk;
    Block one = {Stmt::AsyncCopy(dst, base + row * D + col, src,
                                 flat(p.tensor(src), {b, head, row0 + row, col}), int(kChunk),
                                 row0 + row < limit)};
    Block body = {Stmt::Let(tag + "_e", c * threads + tid)};
    if (chunks % threads != 0) one = {Stmt::If(e < chunks, std::move(one))};
    body.insert(body.end(), one.begin(), one.end());
    return {reg_loop(tag + "_c", (chunks + threads - 1) / threads, std::move(body))};
  }

  // Row and key of value `e` (0..3) of C tile `col_tile` (8 keys) of row atom m_a: the
  // m16n8 C layout, (g, 2t + e%2) and (g + 8, ...), read off the atom table.
  Expr row_of(const Expr& m_a, const Expr& half) const {
    return qb * BM + w * RW + m_a * 16 + lane / 4 + half * 8;
  }

  // Under a causal mask the last query blocks have the most key blocks: they take the
  // lowest blockIdx.x, which the GPU schedules first, so the short ones fill the tail
  // (FlashAttention-2's order) instead of the longest starting last.
  Expr query_block() const {
    const Expr x = Expr::var("blockIdx.x");
    if (a.causal == Causal::None) return x;
    return ceil_div(a.Sq, Expr(BM)) - 1 - x;
  }

  Block build(const WarpAtom& mma) {
    const Expr m_a = Expr::var("m_a"), d_k = Expr::var("d_k"), n2 = Expr::var("n2"),
               hf = Expr::var("hf"), e = Expr::var("e"), r2 = Expr::var("r2"),
               kk = Expr::var("kk"), dn2 = Expr::var("dn2");
    const double c = a.scale * M_LOG2E;
    const Expr hk = a.kv_head(h);
    Block body = {
        Stmt::Let("qb", query_block()), Stmt::Let("h", Expr::var("blockIdx.y")),
        Stmt::Let("b", Expr::var("blockIdx.z")), Stmt::Let("w", tid / kLanes),
        Stmt::Let("lane", tid % kLanes),
    };
    auto append = [&](Block x) { body.insert(body.end(), x.begin(), x.end()); };

    // 2. Q.
    append(copy_block(q_s, a.q, h, qb * BM, BM, a.Sq, "q"));
    // Q's A fragment of row atom m_a and k-step d_k, from its staging.
    auto q_load = [&](std::vector<Expr> prefix) {
      return Stmt::CopyAtom("ldmatrix_x4", "q_frag", std::move(prefix), q_s,
                            (w * RW + m_a * 16 + lane % 16) * D + d_k * 16 + lane / 16 * 8);
    };
    append({Stmt::AsyncCommit(), Stmt::AsyncWait(0), Stmt::Barrier()});
    if (t.q_in_regs)
      append({Stmt::Alloc("q_frag", {Expr(RA), Expr(D / 16), Expr(8)}),
              reg_loop("m_a", RA, {reg_loop("d_k", D / 16, {q_load({m_a, d_k})})})});
    // Accumulators and row statistics (value index e of a C tile; r2 = row g or g + 8).
    append({Stmt::Alloc("o_acc", {Expr(RA), Expr(D / 16), Expr(2), Expr(4)}),
            reg_loop("m_a", RA, {reg_loop("dn2", D / 16, {reg_loop("hf", 2, {reg_loop("e", 4, {
                with_dst(Stmt::Init("o_acc", 0.0), {m_a, dn2, hf, e})})})})}),
            Stmt::Alloc("m_i", {Expr(RA), Expr(2)}), Stmt::Alloc("l_i", {Expr(RA), Expr(2)}),
            reg_loop("m_a", RA, {reg_loop("r2", 2, {
                with_dst(Stmt::Init("m_i", kNegInf), {m_a, r2}),
                with_dst(Stmt::Init("l_i", 0.0), {m_a, r2})})})});

    // 3. The key loop.
    const Expr rows_end = min(a.Sq, (qb + 1) * BM);
    const Expr key_blocks = ceil_div(a.keys_for_rows(rows_end), Expr(BN));
    // KV_STAGES=1: every block waits for its own K (V overlaps S only). KV_STAGES=2 (the
    // articles' eager loads): K_{kb+1} is issued into the other buffer right after
    // S_kb = Q K_kbᵀ, V_{kb+1} right after O += P_kb V_kb, so each load runs under a
    // whole phase of math. One commit group per copy, empty past the last block, keeps
    // the count the waits rely on: at the top of block kb the groups in flight are K_kb
    // then V_kb (wait 1: K_kb landed); before P·V, V_kb then K_{kb+1} (wait 1: V_kb).
    const bool eager = t.kv_stages == 2;
    const Expr slot = eager ? kb % 2 * (BN * D) : Expr(0);
    const Expr next_slot = (kb + 1) % 2 * (BN * D);
    auto next = [&](const std::string& dst, const std::string& src, const std::string& tag) {
      Block issue = {Stmt::If(kb + 1 < key_blocks,
                              copy_block(dst, src, hk, (kb + 1) * BN, BN, a.Sk, tag, next_slot))};
      issue.push_back(Stmt::AsyncCommit());
      return issue;
    };
    if (eager) {  // the prologue: block 0's K and V
      append({Stmt::If(Expr(0) < key_blocks, copy_block(k_s, a.k, hk, Expr(0), BN, a.Sk, "k"))});
      append({Stmt::AsyncCommit()});
      append({Stmt::If(Expr(0) < key_blocks, copy_block(v_s, a.v, hk, Expr(0), BN, a.Sk, "v"))});
      append({Stmt::AsyncCommit()});
    }
    Block step;
    auto add = [&](Block x) { step.insert(step.end(), x.begin(), x.end()); };
    if (eager) {
      // In flight here: K_kb, V_kb (and nothing older): wait until only V_kb may be.
      add({Stmt::AsyncWait(1), Stmt::Barrier()});
    } else {
      add({Stmt::Barrier()});  // every warp is done with the previous K and V
      add(copy_block(k_s, a.k, hk, kb * BN, BN, a.Sk, "k"));
      add({Stmt::AsyncCommit()});
      add(copy_block(v_s, a.v, hk, kb * BN, BN, a.Sk, "v"));
      add({Stmt::AsyncCommit(), Stmt::AsyncWait(1), Stmt::Barrier()});
    }
    // S = Q Kᵀ (unscaled; the scale rides in the exponent). Q_IN_REGS=0: each k-step's Q
    // fragments come from Q_s again, freeing D/4 registers per row atom for two atoms per
    // warp, whose K fragments then serve both (half the ldmatrix bytes per mma).
    const Operand q_frag = t.q_in_regs ? val("q_frag", {m_a, d_k}) : val("q_frag", {m_a});
    Block s_step;
    if (!t.q_in_regs)
      s_step = {Stmt::Alloc("q_frag", {Expr(RA), Expr(8)}),
                reg_loop("m_a", RA, {q_load({m_a})})};
    s_step.push_back(reg_loop("n2", BN / 16, {
        Stmt::Alloc("k_frag", {Expr(2), Expr(4)}),
        Stmt::CopyAtom("ldmatrix_x4", "k_frag", {}, k_s,
                       slot + (n2 * 16 + lane / 16 * 8 + lane % 8) * D + d_k * 16 +
                           lane / 8 % 2 * 8),
        reg_loop("m_a", RA, {reg_loop("hf", 2, {[&] {
          Stmt s = Stmt::Atom(mma.id, "s_acc", {q_frag, val("k_frag", {hf})});
          s.dst_index = {m_a, n2, hf};
          return s;
        }()})})}));
    add({Stmt::Alloc("s_acc", {Expr(RA), Expr(BN / 16), Expr(2), Expr(4)}),
         reg_loop("m_a", RA, {reg_loop("n2", BN / 16, {reg_loop("hf", 2, {reg_loop("e", 4, {
             with_dst(Stmt::Init("s_acc", 0.0), {m_a, n2, hf, e})})})})}),
         Stmt::For("d_k", Expr(D / 16), LoopKind::Reduce, "d_k", std::move(s_step),
                   Tier::Register)});
    // K_{kb+1} goes to the other slot, which every warp finished reading (S_{kb-1})
    // before this iteration's barrier.
    if (eager) add(next(k_s, a.k, "k"));
    // 4. Masks: only where the block reaches past Sk or past the first row's last key.
    {
      const Expr i = row_of(m_a, e / 2);
      const Expr j = kb * BN + n2 * 16 + hf * 8 + lane % 4 * 2 + e % 2;
      const Expr drop = (a.Sk <= j) || (a.drops(i, j) && a.has_keys(i));
      const Expr last = kb * BN + (BN - 1);
      const Expr reaches = (a.Sk <= last) || a.drops(qb * BM, last);
      // Constant lengths bound kb and qb, which may prove that no block reaches (no mask,
      // Sk a multiple of BLOCK_N): then the kernel has no predicate at all.
      std::map<std::string, Expr::Range> ranges;
      if (a.Sk.is_const()) ranges["kb"] = {0, (a.Sk.const_value() + BN - 1) / BN - 1};
      if (a.Sq.is_const()) ranges["qb"] = {0, (a.Sq.const_value() + BM - 1) / BM - 1};
      const auto never = reaches.bounds(ranges);
      if (!(never && never->hi == 0))
        add(guarded(reaches, {reg_loop("m_a", RA, {reg_loop("n2", BN / 16, {reg_loop("hf", 2,
                {reg_loop("e", 4, guarded(drop, {with_dst(Stmt::Init("s_acc", kNegInf),
                                                           {m_a, n2, hf, e})}))})})})}));
    }
    // 5. Online softmax, per row half r2 (row g or g + 8 of the atom).
    {
      const Expr v = r2 * 2 + e;  // values 2 r2, 2 r2 + 1 of a C tile hold row r2
      const Operand s_v = val("s_acc", {m_a, n2, hf, v});
      Block row_max = {
          Stmt::Init("m_t", kNegInf),
          reg_loop("n2", BN / 16, {reg_loop("hf", 2, {reg_loop("e", 2, {
              Stmt::Accum("m_t", s_v, ScalarOp::Max)})})}),
          Stmt::LaneReduce("m_q", ScalarOp::Max, val("m_t"), 4),
          Stmt::Compute("m_new", ScalarOp::Max, {val("m_i", {m_a, r2}), val("m_q")}),
          Stmt::Compute("m_diff", ScalarOp::Sub, {val("m_i", {m_a, r2}), val("m_new")}),
          Stmt::Compute("m_diff_c", ScalarOp::Mul, {val("m_diff"), Operand::constant(c)}),
          Stmt::Compute("alpha", ScalarOp::Exp2, {val("m_diff_c")}),
          with_dst(Stmt::Compute("m_i", ScalarOp::Max, {val("m_i", {m_a, r2}), val("m_q")}),
                   {m_a, r2}),
          with_dst(Stmt::Accum("l_i", val("alpha"), ScalarOp::Mul), {m_a, r2}),
          Stmt::Compute("m_c", ScalarOp::Mul, {val("m_new"), Operand::constant(c)}),
          reg_loop("n2", BN / 16, {reg_loop("hf", 2, {reg_loop("e", 2, {
              Stmt::Compute("s_c", ScalarOp::Mul, {s_v, Operand::constant(c)}),
              Stmt::Compute("s_m", ScalarOp::Sub, {val("s_c"), val("m_c")}),
              with_dst(Stmt::Compute("s_acc", ScalarOp::Exp2, {val("s_m")}), {m_a, n2, hf, v}),
              with_dst(Stmt::Accum("l_i", s_v), {m_a, r2})})})}),
          reg_loop("dn2", D / 16, {reg_loop("hf", 2, {reg_loop("e", 2, {
              with_dst(Stmt::Accum("o_acc", val("alpha"), ScalarOp::Mul),
                       {m_a, dn2, hf, v})})})}),
      };
      add({reg_loop("m_a", RA, {reg_loop("r2", 2, std::move(row_max))})});
    }
    // 6. O += P V: S tiles (kk, 0) and (kk, 1) are the A fragment of k-step kk.
    // V_kb landed: eager, only K_{kb+1} may still be in flight.
    add({Stmt::AsyncWait(eager ? 1 : 0), Stmt::Barrier(),
         Stmt::For("kk", Expr(BN / 16), LoopKind::Reduce, "kk",
                   {reg_loop("dn2", D / 16, {
                       Stmt::Alloc("v_frag", {Expr(2), Expr(4)}),
                       Stmt::CopyAtom("ldmatrix_x4_trans", "v_frag", {}, v_s,
                                      slot + (kk * 16 + lane % 16) * D + dn2 * 16 +
                                          lane / 16 * 8),
                       reg_loop("m_a", RA, {reg_loop("hf", 2, {
                           [&] {
                             Stmt s = Stmt::Atom(mma.id, "o_acc",
                                                 {val("s_acc", {m_a, kk}), val("v_frag", {hf})});
                             s.dst_index = {m_a, dn2, hf};
                             return s;
                           }()})})})},
                   Tier::Register)});
    // V_{kb+1} into the slot whose V_{kb-1} every warp finished before this PV's barrier.
    if (eager) add(next(v_s, a.v, "v"));
    append({Stmt::For("kb", key_blocks, LoopKind::Reduce, "kb", std::move(step))});
    if (eager) append({Stmt::AsyncWait(0)});  // no copy outlives the kernel's shared memory

    // 7. Normalize and store.
    {
      const Expr i = row_of(m_a, r2);
      const Expr d = dn2 * 16 + hf * 8 + lane % 4 * 2;
      Block fin = {
          Stmt::LaneReduce("l_q", ScalarOp::Add, val("l_i", {m_a, r2}), 4),
          with_dst(Stmt::Compute("inv_l", ScalarOp::Div, {Operand::constant(1.0), val("l_q")}),
                   {m_a, r2}),
      };
      Block zero_inv = guarded(a.empty_row(i), {with_dst(Stmt::Init("inv_l", 0.0), {m_a, r2})});
      fin.insert(fin.end(), zero_inv.begin(), zero_inv.end());
      fin.push_back(reg_loop("dn2", D / 16, {reg_loop("hf", 2, {
          Stmt::Alloc("y", {Expr(2)}),
          reg_loop("e", 2, {with_dst(Stmt::Compute("y", ScalarOp::Mul,
                                                   {val("o_acc", {m_a, dn2, hf, r2 * 2 + e}),
                                                    val("inv_l", {m_a, r2})}),
                                     {e})}),
          Stmt::If(i < a.Sq, {[&] {
            Stmt s = Stmt::Write("out", {flat(p.tensor("out"), {b, h, i, d})}, val("y", {Expr(0)}));
            s.width = 2;
            return s;
          }()})})}));
      if (a.lse) {
        Block lse = {
            Stmt::Compute("m_s", ScalarOp::Mul,
                          {val("m_i", {m_a, r2}), Operand::constant(a.scale)}),
            Stmt::Compute("log_l", ScalarOp::Log, {val("l_q")}),
            with_dst(Stmt::Compute("lse_v", ScalarOp::Add, {val("m_s"), val("log_l")}), {m_a, r2}),
        };
        Block none = guarded(a.empty_row(i), {with_dst(Stmt::Init("lse_v", kNegInf), {m_a, r2})});
        lse.insert(lse.end(), none.begin(), none.end());
        lse.push_back(Stmt::If(lane % 4 < 1 && i < a.Sq,
                               {Stmt::Write(kLseTensor, {flat(p.tensor(kLseTensor), {b, h, i})},
                                            val("lse_v", {m_a, r2}))}));
        fin.insert(fin.end(), lse.begin(), lse.end());
      }
      Block tail = {Stmt::Alloc("inv_l", {Expr(RA), Expr(2)})};
      if (a.lse) tail.push_back(Stmt::Alloc("lse_v", {Expr(RA), Expr(2)}));
      tail.push_back(reg_loop("m_a", RA, {reg_loop("r2", 2, std::move(fin))}));
      append(std::move(tail));
    }
    return body;
  }

  KernelOp run() {
    q_s = shared("Q_s", BM);
    k_s = shared("K_s", BN, t.kv_stages == 2 ? 2 : 0);
    v_s = shared("V_s", BN, t.kv_stages == 2 ? 2 : 0);
    const AtomDef& mma_def =
        atom(dt == DType::F16 ? "mma_m16n8k16_f32_f16" : "mma_m16n8k16_f32_bf16");
    c_to_a_pairs(mma_def);  // P's registers are O += P V's A fragments, or refuse
    KernelOp k;
    k.name = "k_attention";
    k.grid[0] = ceil_div(a.Sq, Expr(BM));
    k.grid[1] = a.Hq;
    k.grid[2] = a.B;
    k.block_threads = int(kLanes * W);
    // __launch_bounds__(threads, MIN_BLOCKS), at least 1: without a minimum, NVRTC's ptxas
    // (13.0) aimed a 128-thread D = 64 kernel at 128 registers and spilled 12 B in the key
    // loop; with (128, 1) it took 148 and spilled nothing (nvcc's default took 137).
    k.min_blocks_per_sm = int(min_blocks);
    k.warp_atoms = {warp_atom(mma_def)};
    k.warp_copies = {warp_copy(atom("ldmatrix_x4")), warp_copy(atom("ldmatrix_x4_trans"))};
    k.body = build(k.warp_atoms[0]);
    k.params = {a.q, a.k, a.v, "out"};
    if (a.lse) k.params.push_back(kLseTensor);
    for (const auto& sym : p.symbols) k.params.push_back(sym);
    return k;
  }
};

}  // namespace

Pass pass_lower_attention() {
  return Pass{"k:012_lower_attention", Level::Tile, Level::Kernel,
              "attention is one mma.sync kernel: Q in registers, K/V blocks by cp.async, "
              "S and P in registers (P as O += P V's A fragments), quad-shuffle row max and "
              "sum, causal blocks past the diagonal never visited",
              {"BLOCK_M", "BLOCK_N", "WARPS", "KV_STAGES", "Q_IN_REGS", "SWIZZLE", "MIN_BLOCKS"},
              [](CompileState& s) {
                if (!s.graph.attention()) return;
                if (s.target.compute_capability() < 80)
                  throw Error("attention's kernel uses mma.sync m16n8k16 with bf16/f16 and "
                              "cp.async: sm_80 or newer, not " + s.target.arch);
                AttentionLoops a(s.graph);
                const AttentionTiles t = attention_tiles(s, a);
                KernelProgram kp;
                static_cast<ProgramBase&>(kp) = s.tile;
                Lowering lower(a, t, kp);
                lower.min_blocks = std::max<int64_t>(1, s.knob("MIN_BLOCKS", 1));
                const bool pow2 = (t.head_dim & (t.head_dim - 1)) == 0;
                const std::string sw = s.knobs.get_str("SWIZZLE", pow2 ? "xor" : "none");
                s.used_knobs["SWIZZLE"] = sw;
                if (sw != "xor" && sw != "none")
                  throw Error("SWIZZLE=" + sw + ": attention's K, V and Q tiles take none or "
                              "xor (the TMA patterns are for TMA-staged slabs)");
                lower.swizzle = sw == "xor";
                kp.kernels.push_back(lower.run());
                s.kernel = std::move(kp);
                s.level = Level::Kernel;
              }};
}

}  // namespace loom
