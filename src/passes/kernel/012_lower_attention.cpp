// k:012_lower_attention — attention's tiled Tile IR (t:012) becomes the mma.sync kernel of
// FlashAttention-2 (docs/attention.md, "The mma.sync kernel"): per CTA one query block,
// per warp whole m16 atoms of rows, every product on the table's m16n8k16 atom.
//  1. Bind: blockIdx (qb, h, b), warp w = threadIdx.x / 32, lane = threadIdx.x % 32; with
//     a causal mask the query blocks run longest first (qb = last - blockIdx.x).
//  2. Q resident in registers: the block's [BLOCK_M, D] is copied to shared memory by
//     16-byte cp.async (rows past Sq zero-filled), and each warp ldmatrix.x4s its rows into
//     A fragments for all D/16 k-steps, kept for the whole key loop (Q_IN_REGS=0: loaded
//     again at each k-step of S, the registers going to more rows per warp). With
//     KV_STAGES=S >= 2 blocks 0 .. S-2's K and V are issued before Q is waited for.
//  3. Key loop over the query block's causal bound: K and V blocks by cp.async, one commit
//     group each (rows past Sk zero-filled). KV_STAGES=S >= 2: rings of S, block
//     kb+S-1's K issued right after S_kb and its V right after O += P_kb V_kb (eager
//     loads; S = 3, 4 keep more bytes in flight for decode's one-warp CTAs);
//     KV_STAGES=1: each block loads its own K and V at its top (V overlaps S only).
//     K [key][d] is the "B stored N x K" operand: plain ldmatrix.x4 (two n8 tiles per
//     load); V [key][d] is B stored K x N: ldmatrix.x4.trans. Fragment schedule
//     (s_product, pv_product): each fragment right before its mmas (INTERLEAVE_LOADS=1),
//     the whole block's first (0), or k-step s+1's before s's mmas (FRAG_BUFFERS=2).
//     S's first k-step takes a zero C operand (ZERO_INIT=mma) instead of zeroed registers.
//  4. Masks per element only in blocks the mask or the ragged end reaches (a CTA-uniform
//     test on the block's last key and the block's first row): s = -inf there. A row that
//     keeps no key (bottom-right mask, Sq > Sk) is given every key < Sk instead, so its
//     max is finite and nothing computes -inf - -inf; its O and LSE are overwritten by 0
//     and -inf at the store (index conditions, as in the loop form).
//  5. Online softmax on the fragments: row max over the thread's values, then over the
//     quad (lane_reduce.max.x4: the 4 lanes of an m16n8 C row); alpha = exp2((m - m_new) c),
//     p = exp2(s c - m_new c) with c = scale·log2(e) (one FFMA + ex2; SOFTMAX=exp: S
//     scaled first, p = exp(s - m_new)); the row sum stays per thread until the end
//     (FlashAttention-2), then one lane_reduce.add.x4.
//  6. O += P V with P in registers: two adjacent S accumulator tiles are the A fragment of
//     one k16 step (c_to_a_pairs proves it from the atom's maps; codegen packs the f32
//     pairs with cvt.rn.*x2.f32 at the mma).
//  Decode (attention_decode.h): with GQA_PACK grid y is the KV head and row p of a block
//  is query p / group of head y·group + p % group (Q's copy and the stores index each
//  row's head); with SPLIT_KV the S splits of a query block are consecutive blockIdx.x,
//  the key loop covers the split's blocks from kb0, a row that keeps no key of the split
//  is treated like an empty row (step 4), and the store writes f32 partial O and LSE to
//  the workspace, which the second kernel, k_attention_combine, weights by
//  exp(LSE_s - max LSE). SPLIT_WARPS=W: the CTA is W groups of the row warps on the same
//  rows, group k walking the split's key blocks k, k + W, .. with its own K/V ring and
//  (m, l, O); after the key loop the groups meet in shared memory (over the rings) and
//  group 0 stores. COMBINE=last_cta: no second kernel; each CTA arrives on its row set's
//  counter after its partial store, and the last one combines the S partials.
//  7. O · (1/l) as bf16/f16 pairs into Q_s, then a barrier and 16-byte row stores
//     (STAGE_OUTPUT=1), or straight from the fragments as 4-byte stores (0); LSE by lane
//     t = 0 of each quad for its two rows.
// Shared tiles: Q_s, K_s, V_s, rows of D 16-bit elements. With SWIZZLE=xor (the default
// for a power-of-two D) each row's 16-byte chunk c is stored at c ^ (row % 8)
// (Swizzle<B,3,log2(D)-3>): the 8 rows one ldmatrix matrix reads then sit in 8 different
// bank groups instead of one (rows of 128 or 256 bytes all start at bank 0: 8-way
// conflicts with SWIZZLE=none).
// Knobs: BLOCK_M, BLOCK_N, WARPS (t:012), KV_STAGES (1 to 4), Q_IN_REGS, SWIZZLE (none, xor),
// MIN_BLOCKS, INTERLEAVE_LOADS, FRAG_BUFFERS, SOFTMAX (exp2, exp), ZERO_INIT (mma, init),
// STAGE_OUTPUT, COMBINE_GROUPS (the combine kernel's thread groups per row), SPLIT_WARPS,
// COMBINE (kernel, last_cta).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "atoms/atoms.h"
#include "ir/error.h"
#include "passes/attention_decode.h"
#include "passes/attention_loops.h"
#include "passes/attention_wgmma_tiles.h"
#include "passes/kernel_builders.h"
#include "passes/passes.h"

namespace loom {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int64_t kLanes = 32, kChunk = 8;  // 16-byte cp.async chunks of 16-bit elements
constexpr int64_t kTmaSpan = 64;              // KV_COPY=tma: a box's columns (128 bytes)
// COMBINE=last_cta under a run-time key guard: the registers its hoisted partial loads may
// take (S x (V + 1): 16 splits of 4-wide O fragments and their LSE = 80).
constexpr int64_t kCombineHoistRegs = 80;

using namespace kernel_builders;  // val, reg_loop, with_dst, ||, flat

struct Lowering {
  const AttentionLoops& a;
  const AttentionTiles& t;
  const AttentionDecode& dec;
  KernelProgram& p;
  DType dt;
  std::string q_s, k_s, v_s, red_s, counter;
  Expr b = Expr::var("b"), h = Expr::var("h"), qb = Expr::var("qb"), w = Expr::var("w"),
       lane = Expr::var("lane"), tid = Expr::var("threadIdx.x"), kb = Expr::var("kb"),
       sp = Expr::var("sp"), kb0 = Expr::var("kb0"), wk = Expr::var("wk");
  // SW (SPLIT_WARPS): groups of the W row warps that share the rows, group wk walking key
  // blocks wk, wk + SW, ..; a group's K/V copies use its own threads (copy_block).
  int64_t D, BM, BN, W, RA, RW, SW = 1, min_blocks = 1;
  bool swizzle = true;
  // KV_COPY=tma: K and V blocks by TMA boxes (64 columns x BLOCK_N rows, 128-byte swizzle)
  // issued by one thread of each warp group, each slot's arrival counted on its own
  // mbarrier (K: kbar(slot), V: vbar(slot), slot in [0, SW·S)); the warps wait on it.
  bool tma = false;

  Lowering(const AttentionLoops& a_, const AttentionTiles& t_, const AttentionDecode& d_,
           KernelProgram& p_)
      : a(a_), t(t_), dec(d_), p(p_) {
    dt = p.tensor(a.q).dtype;
    D = t.head_dim, BM = t.block_m, BN = t.block_n, W = t.warps, RA = t.row_atoms;
    RW = BM / W;
    SW = dec.split_warps;
  }

  // [rows, D], or [stages, rows, D]: a ring of K or V blocks.
  std::string shared(const std::string& base, int64_t rows, int64_t stages = 0) {
    TensorDecl s;
    s.name = fresh_tensor_name(p, base);
    s.dtype = dt;
    s.shape = {Expr(rows), Expr(D)};
    if (stages > 0) s.shape.insert(s.shape.begin(), Expr(stages));
    s.role = TensorRole::Shared;
    if (tma && (base == "K_s" || base == "V_s")) {
      // TMA's layout: 64-column chunks of the rows stored one after the other (one box
      // each), the 128-byte swizzle on each: chunk c of row r at c ^ (r % 8), so the 8
      // rows an ldmatrix matrix reads sit in 8 bank groups, as under SWIZZLE=xor.
      s.swizzle = Swizzle{3, 3, 3};
      if (D > kTmaSpan) s.row_chunk = kTmaSpan;
    } else if (swizzle) {
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
  // `at` (Q under GQA_PACK): the source index of row r, column c, where rows of one block
  // belong to several heads.
  using RowIndex = std::function<std::vector<Expr>(const Expr& r, const Expr& c)>;
  Block copy_block(const std::string& dst, const std::string& src, const Expr& head,
                   const Expr& row0, int64_t rows, const Expr& limit, const std::string& tag,
                   const Expr& base = Expr(0), const RowIndex& at = nullptr) {
    // K and V blocks are one warp group's (SPLIT_WARPS): its 32·W threads; Q the CTA's.
    const bool group = SW > 1 && (dst == k_s || dst == v_s);
    const int64_t chunks = rows * D / kChunk, threads = kLanes * W * (group ? 1 : SW);
    const Expr me = group ? tid % (kLanes * W) : tid;
    const Expr c = Expr::var(tag + "_c"), e = Expr::var(tag + "_e");
    const Expr row = e / (D / kChunk), col = e % (D / kChunk) * kChunk;
    const bool paged = a.paged && (src == a.k || src == a.v) && !at;
    std::vector<Expr> from =
        at         ? at(row0 + row, col)
        : a.varlen ? std::vector<Expr>{Expr::var(kKvStartVar) + row0 + row, head, col}  // K, V
                   : std::vector<Expr>{b, head, row0 + row, col};
    Block body = {Stmt::Let(tag + "_e", c * threads + me)};
    if (paged) {
      // Paged KV: key row0 + row is row (row0 + row) % page of page BT[b, (row0 + row) / page].
      // A block within one page (BLOCK_N divides the page: row0 is a multiple of BLOCK_N)
      // reads its page once, before the copy loop; a block over several pages reads each
      // chunk's. When the block's threads divide a page's chunks, chunk c of a thread lies
      // in the block's page c / (page chunks / threads) whatever the thread: the slot is
      // written that way, a constant per unrolled c, so the compiler keeps BLOCK_N/page
      // loads of the table per thread instead of one per chunk (H100, page 16 under
      // 32-key blocks: 1.093x the contiguous form's time with a load per chunk).
      // The slot is clamped into the table: rows past the table are zero-filled (the
      // predicate), but their address is still formed.
      const int64_t page_chunks = a.page * D / kChunk;
      const Expr slot_in_block =
          page_chunks % threads == 0 ? c / (page_chunks / threads) : row / Expr(a.page);
      const Expr slot_of =
          min(a.page % rows == 0 || a.page % BN == 0 ? row0 / Expr(a.page)
                                                     : row0 / Expr(a.page) + slot_in_block,
              Expr(p.tensor(a.block_table).shape[1]) - 1);
      Stmt read = Stmt::LetLoad(tag + "_page", a.block_table,
                                {flat(p.tensor(a.block_table), {b, slot_of})});
      from = {Expr::var(tag + "_page"), head, (row0 + row) % Expr(a.page), col};
      if (a.page % rows == 0 || a.page % BN == 0) {
        Block one = {Stmt::AsyncCopy(dst, base + row * D + col, src, flat(p.tensor(src), from),
                                     int(kChunk), row0 + row < limit)};
        if (chunks % threads != 0) one = {Stmt::If(e < chunks, std::move(one))};
        body.insert(body.end(), one.begin(), one.end());
        return {read, reg_loop(tag + "_c", (chunks + threads - 1) / threads, std::move(body))};
      }
      body.push_back(read);
    }
    Block one = {Stmt::AsyncCopy(dst, base + row * D + col, src, flat(p.tensor(src), from),
                                 int(kChunk), row0 + row < limit)};
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
  // With SPLIT_KV the S splits of a query block are consecutive blockIdx.x.
  Expr query_block() const {
    const Expr x = dec.split() ? Expr::var("blockIdx.x") / dec.splits : Expr::var("blockIdx.x");
    if (a.causal == Causal::None) return x;
    return ceil_div(dec.rows_cap(a), Expr(BM)) - 1 - x;
  }

  // Q's A fragment of row atom m_a (the variable) and k-step `ks`, from its staging.
  Stmt q_load(const std::string& dst, std::vector<Expr> prefix, const Expr& ks) const {
    const Expr m_a = Expr::var("m_a");
    return Stmt::CopyAtom("ldmatrix_x4", dst, std::move(prefix), q_s,
                          (w * RW + m_a * 16 + lane % 16) * D + ks * 16 + lane / 16 * 8);
  }

  // The mma D += A·B of row atom m_a and n8 half hf into `acc`[m_a, col, hf]; `zero`:
  // C = 0 (the first k-step of S under ZERO_INIT=mma).
  static Stmt mma_into(const WarpAtom& mma, const std::string& acc, const Expr& col,
                       Operand a_frag, Operand b_frag, bool zero) {
    Stmt s = Stmt::Atom(mma.id, acc, {std::move(a_frag), std::move(b_frag)});
    s.dst_index = {Expr::var("m_a"), col, Expr::var("hf")};
    s.scale_d = Expr(zero ? 0 : 1);
    return s;
  }

  // A product's k-steps: `step(ks, first)` for ks = 0 .. steps-1. With a zero C operand
  // on the first, that one is peeled off (the flag is per statement), the rest loop.
  static Block k_steps(const std::string& var, int64_t steps, bool peel_first,
                       const std::function<Block(const Expr&, bool)>& step) {
    const Expr v = Expr::var(var);
    if (!peel_first)
      return {Stmt::For(var, Expr(steps), LoopKind::Reduce, var, step(v, false), Tier::Register)};
    Block out = step(Expr(0), true);
    if (steps > 1)
      out.push_back(Stmt::For(var, Expr(steps - 1), LoopKind::Reduce, var, step(v + 1, false),
                              Tier::Register));
    return out;
  }

  // S = Q K_kbᵀ into s_acc[RA, BN/16, 2, 4], over D/16 k-steps of BN/16 K fragments
  // (ldmatrix.x4: two n8 tiles of one k16 step each). The fragment schedule:
  //  INTERLEAVE_LOADS=1, FRAG_BUFFERS=1: each K fragment right before its mmas.
  //  INTERLEAVE_LOADS=0: the whole block's K fragments (D/16 x BN/16) first, then the
  //    mmas (the articles' kernel before fragment interleaving).
  //  FRAG_BUFFERS=2: two sets of one k-step's fragments; k-step s+1's loaded before
  //    k-step s's mmas, so ldmatrix latency hides under them (SMEM->RF double buffering).
  // Q_IN_REGS=0 loads Q's fragments of each k-step from Q_s the same way.
  Block s_product(const WarpAtom& mma, const Expr& slot) const {
    const Expr m_a = Expr::var("m_a"), n2 = Expr::var("n2"), hf = Expr::var("hf");
    const int64_t steps = D / 16, tiles = BN / 16;
    const bool whole = !t.interleave_loads, twice = t.frag_buffers == 2;
    auto k_addr = [&](const Expr& ks) {
      return slot + (n2 * 16 + lane / 16 * 8 + lane % 8) * D + ks * 16 + lane / 8 % 2 * 8;
    };
    auto k_load = [&](const std::string& dst, std::vector<Expr> prefix, const Expr& ks) {
      return Stmt::CopyAtom("ldmatrix_x4", dst, std::move(prefix), k_s, k_addr(ks));
    };
    // One k-step's K (and re-read Q) fragments into set `set` of the double buffer.
    auto load_set = [&](const Expr& ks, const Expr& set) {
      Block b = {reg_loop("n2", tiles, {k_load("k_buf", {set, n2}, ks)})};
      if (!t.q_in_regs) b.push_back(reg_loop("m_a", RA, {q_load("q_buf", {set, m_a}, ks)}));
      return b;
    };
    auto q_op = [&](const Expr& ks) {
      if (t.q_in_regs) return val("q_frag", {m_a, ks});
      return twice ? val("q_buf", {ks % 2, m_a}) : val("q_frag", {m_a});
    };
    auto mmas = [&](const Expr& ks, bool first, const Operand& k_frag_of_hf_prefix) {
      Operand kf = k_frag_of_hf_prefix;
      kf.index.push_back(hf);
      return reg_loop("m_a", RA, {reg_loop("hf", 2, {mma_into(mma, "s_acc", n2, q_op(ks), kf, first)})});
    };
    Block out;
    if (!t.q_in_regs && !twice) out.push_back(Stmt::Alloc("q_frag", {Expr(RA), Expr(8)}));
    if (whole) {
      out.push_back(Stmt::Alloc("k_all", {Expr(steps), Expr(tiles), Expr(2), Expr(4)}));
      out.push_back(reg_loop("d_k", steps, {reg_loop("n2", tiles, {
          k_load("k_all", {Expr::var("d_k"), n2}, Expr::var("d_k"))})}));
    }
    if (twice) {
      out.push_back(Stmt::Alloc("k_buf", {Expr(2), Expr(tiles), Expr(2), Expr(4)}));
      if (!t.q_in_regs) out.push_back(Stmt::Alloc("q_buf", {Expr(2), Expr(RA), Expr(8)}));
      Block first = load_set(Expr(0), Expr(0));
      out.insert(out.end(), first.begin(), first.end());
    }
    auto step = [&](const Expr& ks, bool first) {
      Block b;
      if (!t.q_in_regs && !twice) b.push_back(reg_loop("m_a", RA, {q_load("q_frag", {m_a}, ks)}));
      if (twice) {
        b = guarded(ks + 1 < Expr(steps), load_set(ks + 1, (ks + 1) % 2));
        b.push_back(reg_loop("n2", tiles, {mmas(ks, first, val("k_buf", {ks % 2, n2}))}));
      } else if (whole) {
        b.push_back(reg_loop("n2", tiles, {mmas(ks, first, val("k_all", {ks, n2}))}));
      } else {
        b.push_back(reg_loop("n2", tiles, {
            Stmt::Alloc("k_frag", {Expr(2), Expr(4)}), k_load("k_frag", {}, ks),
            mmas(ks, first, val("k_frag"))}));
      }
      return b;
    };
    out.insert(out.begin(), Stmt::Alloc("s_acc", {Expr(RA), Expr(tiles), Expr(2), Expr(4)}));
    if (!t.zero_init_mma) {
      const Expr e = Expr::var("e");
      out.insert(out.begin() + 1,
                 reg_loop("m_a", RA, {reg_loop("n2", tiles, {reg_loop("hf", 2, {reg_loop("e", 4, {
                     with_dst(Stmt::Init("s_acc", 0.0), {m_a, n2, hf, e})})})})}));
    }
    Block ks = k_steps("d_k", steps, t.zero_init_mma, step);
    out.insert(out.end(), ks.begin(), ks.end());
    return out;
  }

  // O += P V_kb over BN/16 k-steps (P's S tiles (kk, 0) and (kk, 1) are the A fragment
  // of k-step kk), D/16 V fragments each (ldmatrix.x4.trans: two n8 tiles of O); the
  // fragment schedules of s_product. O is not zeroed through the mma: its first product
  // is in key block 0, after the rescale by alpha that reads it, and peeling block 0 off
  // the key loop would double the kernel for D/2 register moves per CTA.
  Block pv_product(const WarpAtom& mma, const Expr& slot) const {
    const Expr m_a = Expr::var("m_a"), dn2 = Expr::var("dn2"), hf = Expr::var("hf");
    const int64_t steps = BN / 16, tiles = D / 16;
    const bool whole = !t.interleave_loads, twice = t.frag_buffers == 2;
    auto v_load = [&](const std::string& dst, std::vector<Expr> prefix, const Expr& ks) {
      return Stmt::CopyAtom("ldmatrix_x4_trans", dst, std::move(prefix), v_s,
                            slot + (ks * 16 + lane % 16) * D + dn2 * 16 + lane / 16 * 8);
    };
    auto mmas = [&](const Expr& ks, Operand v_frag) {
      v_frag.index.push_back(hf);
      return reg_loop("m_a", RA, {reg_loop("hf", 2, {
          mma_into(mma, "o_acc", dn2, val("s_acc", {m_a, ks}), v_frag, false)})});
    };
    Block out;
    if (whole) {
      out.push_back(Stmt::Alloc("v_all", {Expr(steps), Expr(tiles), Expr(2), Expr(4)}));
      out.push_back(reg_loop("kk", steps, {reg_loop("dn2", tiles, {
          v_load("v_all", {Expr::var("kk"), dn2}, Expr::var("kk"))})}));
    }
    if (twice) {
      out.push_back(Stmt::Alloc("v_buf", {Expr(2), Expr(tiles), Expr(2), Expr(4)}));
      out.push_back(reg_loop("dn2", tiles, {v_load("v_buf", {Expr(0), dn2}, Expr(0))}));
    }
    auto step = [&](const Expr& ks, bool) {
      Block b;
      if (twice) {
        b = guarded(ks + 1 < Expr(steps),
                    {reg_loop("dn2", tiles, {v_load("v_buf", {(ks + 1) % 2, dn2}, ks + 1)})});
        b.push_back(reg_loop("dn2", tiles, {mmas(ks, val("v_buf", {ks % 2, dn2}))}));
      } else if (whole) {
        b.push_back(reg_loop("dn2", tiles, {mmas(ks, val("v_all", {ks, dn2}))}));
      } else {
        b.push_back(reg_loop("dn2", tiles, {Stmt::Alloc("v_frag", {Expr(2), Expr(4)}),
                                            v_load("v_frag", {}, ks), mmas(ks, val("v_frag"))}));
      }
      return b;
    };
    Block ks = k_steps("kk", steps, false, step);
    out.insert(out.end(), ks.begin(), ks.end());
    return out;
  }

  // The key loop's barrier: the CTA's, or (SPLIT_WARPS) the group's own named barrier
  // 1 + wk over its 32·W threads — a group's ring is its own, and its warps need not
  // wait for the other groups' copies.
  Stmt group_sync() const {
    return SW > 1 ? Stmt::NamedBarrier(Expr(1) + wk, int(kLanes * W)) : Stmt::Barrier();
  }

  // KV_COPY=tma. Ring slot `slot` (0 .. SW·S - 1) of K has mbarrier slot, V's SW·S + slot.
  int64_t ring_slots() const { return std::max<int64_t>(1, t.kv_stages) * SW; }
  Expr kbar(const Expr& slot) const { return slot; }
  Expr vbar(const Expr& slot) const { return Expr(ring_slots()) + slot; }
  // The thread that issues its group's boxes: lane 0 of the group's first warp.
  Expr elected() const { return (SW > 1 ? tid % (kLanes * W) : tid) < 1; }
  // Block at key `row0` of head `head` of `src` into ring slot `slot` of `dst`: the
  // slot's mbarrier expects the block's bytes, then one box per 64 columns. Rows past the
  // key count are the tensor map's zero fill (and are counted: the box is whole).
  Block tma_block(const std::string& dst, const std::string& src, const Expr& head,
                  const Expr& row0, const Expr& slot, const Expr& bar) const {
    Block out = {Stmt::MbarArriveExpectTx(bar, BN * D * 2)};
    for (int64_t j = 0; j < D / kTmaSpan; ++j)
      out.push_back(Stmt::TmaLoad(dst, slot * (BN * D) + Expr(j * kTmaSpan), src,
                                  {b, head, row0, Expr(j * kTmaSpan)}, dst + "_tmap", bar,
                                  BN * kTmaSpan * 2));
    return out;
  }

  // SPLIT_WARPS: whether row i keeps a key of group wk's blocks: its first key (block wk
  // of the split), which every row keeping any of the group's keys keeps.
  Expr group_first_key(const Expr& g) const { return ((dec.split() ? kb0 : Expr(0)) + g) * BN; }
  Expr group_has_keys(const Expr& i) const {
    if (SW == 1) return dec.has_keys(a, i, sp);
    return group_first_key(wk) < a.keys_for_rows(i + 1);
  }

  // SPLIT_WARPS: the groups meet. Groups 1.. store their (m, l, O) fragments to shared
  // memory over the K/V rings (overlay part 1: every copy has landed and every warp has
  // passed the barrier), and group 0 folds them in, thread by thread (lane L of every
  // group holds the same rows and columns): M = max(m_0, m_k), l = l_0 e^(m_0 - M) +
  // l_k e^(m_k - M), O likewise. Group k counts for row i only if i keeps its first key
  // (group_has_keys); otherwise its statistics are those of the every-key-below-Sk
  // stand-in, or it ran no block at all (m = -inf), and are skipped.
  Block meet_groups(const Expr& key_blocks, double c) {
    const Expr m_a = Expr::var("m_a"), dn2 = Expr::var("dn2"), hf = Expr::var("hf"),
               e = Expr::var("e"), r2 = Expr::var("r2"), kw = Expr::var("kw");
    const int64_t regs = RA * (D / 16) * 8, per = regs + 4 * RA;  // O, then m and l
    auto at = [&](const Expr& group, const Expr& reg) {
      return ((group - 1) * W + w) * (per * kLanes) + reg * kLanes + lane;
    };
    const Expr o_reg = ((m_a * (D / 16) + dn2) * 2 + hf) * 4;
    const Expr m_reg = regs + m_a * 2 + r2, l_reg = regs + 2 * RA + m_a * 2 + r2;
    Block put = {
        reg_loop("m_a", RA, {reg_loop("dn2", D / 16, {reg_loop("hf", 2, {reg_loop("e", 4, {
            Stmt::Write(red_s, {at(wk, o_reg + e)}, val("o_acc", {m_a, dn2, hf, e}))})})})}),
        reg_loop("m_a", RA, {reg_loop("r2", 2, {
            Stmt::Write(red_s, {at(wk, m_reg)}, val("m_i", {m_a, r2})),
            Stmt::Write(red_s, {at(wk, l_reg)}, val("l_i", {m_a, r2}))})}),
    };
    const bool e2 = t.softmax_exp2;
    const ScalarOp ex = e2 ? ScalarOp::Exp2 : ScalarOp::Exp;
    // e^(m - M) in S's units: exp2((m - M)·c) under SOFTMAX=exp2 (m unscaled), else exp.
    auto weight = [&](const std::string& dst, const Operand& m) {
      Block b = {Stmt::Compute(dst + "_d", ScalarOp::Sub, {m, val("gm_new")})};
      if (e2)
        b.push_back(Stmt::Compute(dst + "_dc", ScalarOp::Mul,
                                  {val(dst + "_d"), Operand::constant(c)}));
      b.push_back(Stmt::Compute(dst, ex, {val(e2 ? dst + "_dc" : dst + "_d")}));
      return b;
    };
    const Expr gk = kw + 1;  // group 1 .. SW-1
    const Expr i = dec.query(row_of(m_a, r2));
    Block fold = {
        Stmt::Load("gm", red_s, {at(gk, m_reg)}),
        Stmt::Load("gl", red_s, {at(gk, l_reg)}),
        Stmt::Compute("gm_new", ScalarOp::Max, {val("m_i", {m_a, r2}), val("gm")}),
    };
    for (Block w8 : {weight("ga", val("m_i", {m_a, r2})), weight("gb", val("gm"))})
      fold.insert(fold.end(), w8.begin(), w8.end());
    fold.push_back(Stmt::Compute("gl_b", ScalarOp::Mul, {val("gl"), val("gb")}));
    fold.push_back(with_dst(Stmt::Accum("l_i", val("ga"), ScalarOp::Mul), {m_a, r2}));
    fold.push_back(with_dst(Stmt::Accum("l_i", val("gl_b")), {m_a, r2}));
    fold.push_back(with_dst(Stmt::Compute("m_i", ScalarOp::Max, {val("m_i", {m_a, r2}), val("gm")}),
                            {m_a, r2}));
    fold.push_back(reg_loop("dn2", D / 16, {reg_loop("hf", 2, {reg_loop("e", 2, {
        Stmt::Load("go", red_s, {at(gk, o_reg + r2 * 2 + e)}),
        Stmt::Compute("go_b", ScalarOp::Mul, {val("go"), val("gb")}),
        with_dst(Stmt::Accum("o_acc", val("ga"), ScalarOp::Mul), {m_a, dn2, hf, r2 * 2 + e}),
        with_dst(Stmt::Accum("o_acc", val("go_b")), {m_a, dn2, hf, r2 * 2 + e})})})}));
    // Group kw ran a block (kw < the split's blocks) that row i keeps a key of.
    const Expr counts = gk < key_blocks && group_first_key(gk) < a.keys_for_rows(i + 1);
    Block take = {reg_loop("kw", SW - 1, {reg_loop("m_a", RA, {reg_loop("r2", 2, {
        Stmt::If(counts, std::move(fold))})})}, LoopKind::Reduce)};
    return {Stmt::Barrier(), Stmt::If(Expr(0) < wk, std::move(put)), Stmt::Barrier(),
            Stmt::If(wk < 1, std::move(take))};
  }

  // COMBINE=last_cta: after its partial O and LSE are stored, the CTA arrives on its row
  // set's counter (tile.arrive: a barrier, a release fence and an atomic add by one
  // thread; the counter is zeroed once by the runtime and reset by the last arrival), and
  // the CTA that arrives S-th combines the S partials of its rows as k_attention_combine
  // does: a thread per (row, 4 consecutive d) — one 16-byte load of O per split, one
  // weight per split for its four d — folding the splits online (unrolled: the loads do
  // not depend on the running sum), then O (one 8-byte store) and LSE. One launch
  // instead of two; the last CTA reads S·D·4 bytes per row alone.
  Block combine_in_last_cta() const {
    // Rows past the row count (a constant below BLOCK_M: 4 rows of a 16-row block at
    // Sq = 1, GQA 4) get no items.
    const Expr rows = dec.rows(a);
    const int64_t live = rows.is_const() ? std::min(BM, rows.const_value()) : BM;
    const int64_t V = D % 4 == 0 ? 4 : 1, per_row = D / V;
    const int64_t T = kLanes * W * SW, S = dec.splits, items = live * per_row;
    const Expr e = Expr::var("cb_e"), r = Expr::var("cb_r"), dd = Expr::var("cb_d"),
               pr = Expr::var("cb_p"), cs = Expr::var("cb_s"), cv = Expr::var("cb_v");
    const Expr i = dec.query(pr), hq = dec.head(h, pr);
    const TensorDecl &po = p.tensor(dec.part_o), &pl = p.tensor(dec.part_lse);
    auto each = [&](Block b) { return reg_loop("cb_v", V, std::move(b)); };
    // Each split's weight folds its O online; a split that keeps no key of the row (only
    // where the key count is known at run time: paged KV, run-time Sk, causal) is skipped.
    // Under that guard the loads must not sit between the folds: ptxas keeps each split's
    // loads behind the previous split's branch, S dependent round trips to L2 per pass (the
    // paged form's last-CTA combine cost 5 us at Sq = 1 and 12 us at Sq = 4 against the
    // combine kernel on the H200, 2026-11-28; bench/NOTES.md, "paged KV decode: the last
    // CTA's combine"). So there every split's partials are loaded first into registers
    // (S x (V + 1) of them; every split stores its partials, a keyless one LSE = -inf), then
    // folded; without a guard the one loop is straight-line code and stays as measured.
    const Expr guard = dec.has_keys(a, i, cs);
    const bool hoist = !(guard.is_const() && guard.const_value() != 0) &&
                       S * (V + 1) <= kCombineHoistRegs;
    // Hoisted, the split's LSE is cx[cb_s] and its O fragment co[cb_s][..]; else scalars.
    const std::vector<Expr> x_at = hoist ? std::vector<Expr>{cs} : std::vector<Expr>{};
    auto o_el = [&](const Expr& v) {
      std::vector<Expr> at = x_at;
      at.push_back(v);
      return at;
    };
    Stmt load_o = Stmt::Load("co", dec.part_o, {flat(po, {b, hq, i, cs, dd})});
    load_o.dst_index = o_el(Expr(0));
    load_o.width = int(V);
    Stmt load_x = Stmt::Load("cx", dec.part_lse, {flat(pl, {b, hq, i, cs})});
    load_x.dst_index = x_at;
    const Operand cx = val("cx", x_at);
    Block fold = {
        Stmt::Compute("cm_new", ScalarOp::Max, {val("cm"), cx}),
        Stmt::Compute("cm_d", ScalarOp::Sub, {val("cm"), val("cm_new")}),
        Stmt::Compute("cc", ScalarOp::Exp, {val("cm_d")}),  // cm = -inf first: cc = 0
        Stmt::Compute("cx_m", ScalarOp::Sub, {cx, val("cm_new")}),
        Stmt::Compute("cw", ScalarOp::Exp, {val("cx_m")}),
        each({Stmt::Compute("cwo", ScalarOp::Mul, {val("cw"), val("co", o_el(cv))}),
              with_dst(Stmt::Accum("cacc", val("cc"), ScalarOp::Mul), {cv}),
              with_dst(Stmt::Accum("cacc", val("cwo")), {cv})}),
        Stmt::Accum("cl", val("cc"), ScalarOp::Mul),
        Stmt::Accum("cl", val("cw")),
        Stmt::Accum("cm", cx, ScalarOp::Max),
    };
    Block splits;
    if (hoist) {
      splits = {Stmt::Alloc("cx", {Expr(S)}), Stmt::Alloc("co", {Expr(S), Expr(V)}),
                reg_loop("cb_s", S, {load_x, load_o}),
                reg_loop("cb_s", S, guarded(guard, std::move(fold)), LoopKind::Reduce)};
    } else {
      Block step = {load_x, load_o};
      for (Stmt& x : guarded(guard, std::move(fold))) step.push_back(std::move(x));
      splits = {Stmt::Alloc("co", {Expr(V)}), reg_loop("cb_s", S, std::move(step), LoopKind::Reduce)};
    }
    const Expr out_at = flat(p.tensor("out"), a.q_index(b, hq, i, dd));
    Stmt store = Stmt::Write("out", {out_at}, val("cy", {Expr(0)}));
    store.width = int(V);
    Block row = {
        Stmt::Alloc("cacc", {Expr(V)}),
        Stmt::Alloc("cy", {Expr(V)}),
        Stmt::Init("cm", kNegInf),
        Stmt::Init("cl", 0.0),
        each({with_dst(Stmt::Init("cacc", 0.0), {cv})}),
    };
    row.insert(row.end(), splits.begin(), splits.end());
    row.insert(row.end(), {
        each({with_dst(Stmt::Compute("cy", ScalarOp::Div, {val("cacc", {cv}), val("cl")}), {cv})}),
        V > 1 ? store : Stmt::Write("out", {out_at}, val("cy", {Expr(0)})),
    });
    Block empty = {each({Stmt::Write("out", {out_at + cv}, Operand::constant(0.0))})};
    if (a.lse) {
      const Expr at = flat(p.tensor(kLseTensor), a.lse_index(b, hq, i));
      row.push_back(Stmt::If(dd < 1, {
          Stmt::Compute("c_log_l", ScalarOp::Log, {val("cl")}),
          Stmt::Compute("c_lse", ScalarOp::Add, {val("cm"), val("c_log_l")}),
          Stmt::Write(kLseTensor, {at}, val("c_lse"))}));
      empty.push_back(
          Stmt::If(dd < 1, {Stmt::Write(kLseTensor, {at}, Operand::constant(kNegInf))}));
    }
    Block cell = guarded(a.has_keys(i), std::move(row));
    Block none = guarded(a.empty_row(i), std::move(empty));
    cell.insert(cell.end(), none.begin(), none.end());
    Expr keep = pr < rows;
    if (items % T != 0) keep = e < items && keep;
    Block item = {Stmt::Let("cb_e", Expr::var("cb_c") * T + tid), Stmt::Let("cb_r", e / per_row),
                  Stmt::Let("cb_d", e % per_row * V), Stmt::Let("cb_p", qb * BM + r),
                  Stmt::If(keep, std::move(cell))};
    const Expr offset = flat(p.tensor(counter), {b, h, qb});
    return {Stmt::TileArrive("cb_last", counter, offset, S, int(T)),
            Stmt::If(Expr::make(Expr::Kind::Eq, Expr::var("cb_last"), Expr(1)),
                     {Stmt::For("cb_c", Expr((items + T - 1) / T), LoopKind::Parallel, "cb_c",
                                std::move(item))})};
  }

  Block build(const WarpAtom& mma) {
    const Expr m_a = Expr::var("m_a"), d_k = Expr::var("d_k"), n2 = Expr::var("n2"),
               hf = Expr::var("hf"), e = Expr::var("e"), r2 = Expr::var("r2"),
               kk = Expr::var("kk"), dn2 = Expr::var("dn2");
    const double c = a.scale * M_LOG2E;
    // h is the head slot: the query head, or under GQA_PACK the KV head whose query heads
    // the rows pack (row p: query p / group of head h·group + p % group).
    const Expr hk = dec.kv_head(a, h);
    Block body = {
        Stmt::Let("qb", query_block()), Stmt::Let("h", Expr::var("blockIdx.y")),
        Stmt::Let("b", Expr::var("blockIdx.z")),
        Stmt::Let("w", SW > 1 ? tid / kLanes % W : tid / kLanes),
        Stmt::Let("lane", tid % kLanes),
    };
    if (SW > 1) body.push_back(Stmt::Let("wk", tid / (kLanes * W)));
    // Paged KV: Sk is this sequence's key count, read once per CTA (before kb0, which
    // divides the sequence's blocks among the splits).
    if (a.paged)
      body.insert(body.begin() + 3, Stmt::LetLoad(kKvLenVar, a.seqlens,
                                                  {flat(p.tensor(a.seqlens), {b})}));
    if (a.varlen)  // the sequence's rows of Q and K: its lengths, read once per CTA
      body.insert(body.begin() + 3,
                  {Stmt::LetLoad(kQStartVar, a.cu_q, {flat(p.tensor(a.cu_q), {b})}),
                   Stmt::LetLoad(kQEndVar, a.cu_q, {flat(p.tensor(a.cu_q), {b + 1})}),
                   Stmt::LetLoad(kKvStartVar, a.cu_k, {flat(p.tensor(a.cu_k), {b})}),
                   Stmt::LetLoad(kKvEndVar, a.cu_k, {flat(p.tensor(a.cu_k), {b + 1})})});
    if (dec.split())  // SPLIT_KV: this CTA's split and its first key block
      body.insert(body.begin() + (a.paged ? 4 : 1),
                  {Stmt::Let("sp", Expr::var("blockIdx.x") % dec.splits),
                   Stmt::Let("kb0", dec.first_block(sp))});
    auto append = [&](Block x) { body.insert(body.end(), x.begin(), x.end()); };

    // 2. Q.
    if (a.varlen)  // Q [Tq, Hq, D]: row r of the block is token q_start + query(r)
      append(copy_block(q_s, a.q, h, qb * BM, BM, dec.rows(a), "q", Expr(0),
                        [&](const Expr& r, const Expr& col) {
                          return a.q_index(b, dec.head(h, r), dec.query(r), col);
                        }));
    else if (dec.pack > 1)
      append(copy_block(q_s, a.q, h, qb * BM, BM, dec.rows(a), "q", Expr(0),
                        [&](const Expr& r, const Expr& col) {
                          return std::vector<Expr>{b, dec.head(h, r), dec.query(r), col};
                        }));
    else
      append(copy_block(q_s, a.q, h, qb * BM, BM, a.Sq, "q"));
    append({Stmt::AsyncCommit()});
    // The key loop's extent (the query block's causal bound; SPLIT_KV: this split's blocks,
    // from kb0); `key` is the first key of local block x.
    const Expr rows_end = dec.queries_of(a, (qb + 1) * BM);
    const Expr key_blocks = dec.block_count(sp, ceil_div(a.keys_for_rows(rows_end), Expr(BN)));
    // SPLIT_WARPS: local block x of group wk is the split's block x·SW + wk; `valid(x)`:
    // it exists (the loop runs ceil(blocks / SW) steps in every group, a group past its
    // last block skips the math but keeps the barriers).
    auto local = [&](const Expr& x) { return SW > 1 ? x * SW + wk : x; };
    auto key = [&](const Expr& x) { return (dec.split() ? kb0 + local(x) : local(x)) * BN; };
    auto valid = [&](const Expr& x) { return local(x) < key_blocks; };
    const Expr steps_per_group = SW > 1 ? ceil_div(key_blocks, Expr(SW)) : key_blocks;
    // KV_STAGES=S >= 2: a ring of S slots, S - 1 blocks' K and V in flight ahead of the
    // block being computed on. `ahead` commit groups (K, V of each) precede a block's own.
    const int64_t S = t.kv_stages;
    const bool eager = S >= 2;
    const int ahead = int(2 * (S - 1));
    if (tma) {
      // KV_COPY=tma: the ring's mbarriers, initialized by one thread and published by a
      // barrier (Q's copies already in flight), then each group's elected thread issues
      // blocks 0 .. S-2 (the prologue): Q's cp.async group is then the only one, wait 0.
      Block init;
      for (int64_t i = 0; i < 2 * ring_slots(); ++i) init.push_back(Stmt::MbarInit(Expr(i), 1));
      init.push_back(Stmt::FenceMbarInit());
      append({Stmt::If(tid < 1, std::move(init)), Stmt::Barrier()});
      const Expr ring0 = SW > 1 ? wk * S : Expr(0);
      Block issue;
      for (int64_t st = 0; st + 1 < S; ++st) {
        Block both = tma_block(k_s, a.k, hk, key(Expr(st)), ring0 + st, kbar(ring0 + st));
        Block v = tma_block(v_s, a.v, hk, key(Expr(st)), ring0 + st, vbar(ring0 + st));
        both.insert(both.end(), v.begin(), v.end());
        issue.push_back(Stmt::If(valid(Expr(st)), std::move(both)));
      }
      append({Stmt::If(elected(), std::move(issue))});
    } else if (eager) {
      // The prologue, blocks 0 .. S-2's K and V, issued before Q is waited for: the DRAM
      // latencies overlap instead of following each other (a split of decode walks only
      // a few key blocks, so its CTA's start is a large part of its time). Groups complete
      // in order: wait 2(S-1) = Q landed, the prologue's K and V may still be in flight.
      for (int64_t st = 0; st + 1 < S; ++st) {
        const Expr at = SW > 1 ? (wk * S + st) * (BN * D) : Expr(st * BN * D);
        append({Stmt::If(valid(Expr(st)),
                         copy_block(k_s, a.k, hk, key(Expr(st)), BN, a.Sk, "k", at))});
        append({Stmt::AsyncCommit()});
        append({Stmt::If(valid(Expr(st)),
                         copy_block(v_s, a.v, hk, key(Expr(st)), BN, a.Sk, "v", at))});
        append({Stmt::AsyncCommit()});
      }
    }
    append({Stmt::AsyncWait(eager && !tma ? ahead : 0), Stmt::Barrier()});
    if (t.q_in_regs)
      append({Stmt::Alloc("q_frag", {Expr(RA), Expr(D / 16), Expr(8)}),
              reg_loop("m_a", RA, {reg_loop("d_k", D / 16, {q_load("q_frag", {m_a, d_k}, d_k)})})});
    // Accumulators and row statistics (value index e of a C tile; r2 = row g or g + 8).
    append({Stmt::Alloc("o_acc", {Expr(RA), Expr(D / 16), Expr(2), Expr(4)}),
            reg_loop("m_a", RA, {reg_loop("dn2", D / 16, {reg_loop("hf", 2, {reg_loop("e", 4, {
                with_dst(Stmt::Init("o_acc", 0.0), {m_a, dn2, hf, e})})})})}),
            Stmt::Alloc("m_i", {Expr(RA), Expr(2)}), Stmt::Alloc("l_i", {Expr(RA), Expr(2)}),
            reg_loop("m_a", RA, {reg_loop("r2", 2, {
                with_dst(Stmt::Init("m_i", kNegInf), {m_a, r2}),
                with_dst(Stmt::Init("l_i", 0.0), {m_a, r2})})})});

    // 3. The key loop.
    // KV_STAGES=1: every block waits for its own K (V overlaps S only). KV_STAGES=S >= 2
    // (the articles' eager loads, on a ring of S): K_{kb+S-1} is issued into the slot of
    // K_{kb-1} right after S_kb = Q K_kbᵀ, V_{kb+S-1} into V_{kb-1}'s right after
    // O += P_kb V_kb, so each load runs under S - 1 blocks of math. One commit group per
    // copy, empty past the last block, keeps the count the waits rely on: at the top of
    // block kb the groups in flight are K_kb, V_kb, .., K_{kb+S-2}, V_{kb+S-2} (wait
    // 2S-3: K_kb landed); before P·V, V_kb .. K_{kb+S-1} (wait 2S-3: V_kb landed).
    const Expr ring = SW > 1 ? wk * (eager ? S : 1) : Expr(0);  // the group's first slot
    const Expr slot = eager ? (SW > 1 ? ring + kb % S : kb % S) * (BN * D)
                            : SW > 1 ? ring * (BN * D) : Expr(0);
    const Expr next_slot = (SW > 1 ? ring + (kb + (S - 1)) % S : (kb + (S - 1)) % S) * (BN * D);
    // KV_COPY=tma: the ring slots (not element offsets) of block kb and of kb + S - 1;
    // block x's use of its slot is the slot's (x / S)-th phase.
    const Expr slot_i = SW > 1 ? ring + kb % S : kb % S;
    const Expr next_i = SW > 1 ? ring + (kb + (S - 1)) % S : (kb + (S - 1)) % S;
    const Expr parity = kb / S % 2;
    auto next = [&](const std::string& dst, const std::string& src, const std::string& tag) {
      if (tma)
        return Block{Stmt::If(elected() && valid(kb + (S - 1)),
                              tma_block(dst, src, hk, key(kb + (S - 1)), next_i,
                                        dst == k_s ? kbar(next_i) : vbar(next_i)))};
      Block issue = {Stmt::If(valid(kb + (S - 1)),
                              copy_block(dst, src, hk, key(kb + (S - 1)), BN, a.Sk, tag,
                                         next_slot))};
      issue.push_back(Stmt::AsyncCommit());
      return issue;
    };
    Block step;
    auto add = [&](Block x) { step.insert(step.end(), x.begin(), x.end()); };
    // The math of a step, which a group past its last block skips (warp-uniform).
    auto add_math = [&](Block x) {
      if (SW > 1) x = {Stmt::If(valid(kb), std::move(x))};
      add(std::move(x));
    };
    // KV_COPY=tma: K_kb's slot completed its phase (a group past its last block has no
    // K_kb to wait for).
    auto landed = [&](const Expr& bar) {
      Stmt w8 = Stmt::MbarWait(bar, parity);
      return SW > 1 ? Stmt::If(valid(kb), {w8}) : w8;
    };
    if (tma) {
      add({landed(kbar(slot_i)), group_sync()});
    } else if (eager) {
      // In flight here: the ring's 2(S-1) groups from K_kb on: wait until only those after
      // K_kb may be.
      add({Stmt::AsyncWait(ahead - 1), group_sync()});
    } else {
      add({group_sync()});  // every warp is done with the previous K and V
      auto own = [&](Block x) { return SW > 1 ? Block{Stmt::If(valid(kb), std::move(x))} : x; };
      add(own(copy_block(k_s, a.k, hk, key(kb), BN, a.Sk, "k", slot)));
      add({Stmt::AsyncCommit()});
      add(own(copy_block(v_s, a.v, hk, key(kb), BN, a.Sk, "v", slot)));
      add({Stmt::AsyncCommit(), Stmt::AsyncWait(1), group_sync()});
    }
    // S = Q Kᵀ (unscaled; the scale rides in the exponent), over D/16 k-steps.
    {
      // S's accumulators stay declared at the step's scope: the masks, the softmax and
      // P V read them (each under its own SPLIT_WARPS guard).
      Block s_math = s_product(mma, slot);
      if (SW > 1 && !s_math.empty() && s_math.front().kind == StmtKind::Alloc) {
        add({s_math.front()});
        s_math.erase(s_math.begin());
      }
      add_math(std::move(s_math));
    }
    // K_{kb+S-1} goes to K_{kb-1}'s slot, which every warp finished reading (S_{kb-1})
    // before this iteration's barrier.
    if (eager) add(next(k_s, a.k, "k"));
    // 4. Masks: only where the block reaches past Sk or past the first row's last key.
    {
      // A row that keeps no key of this split (SPLIT_KV) or none at all keeps every key
      // < Sk instead, as an empty row does (finite statistics; the store overwrites it).
      const Expr i = dec.query(row_of(m_a, e / 2));
      const Expr j = key(kb) + n2 * 16 + hf * 8 + lane % 4 * 2 + e % 2;
      // SPLIT_WARPS: per group, whose first key is the one every row keeping any of its
      // keys keeps (the masks keep prefixes); the meet skips the group for other rows.
      const Expr drop = (a.Sk <= j) || (a.drops(i, j) && group_has_keys(i));
      const Expr last = key(kb) + (BN - 1);
      const Expr reaches = (a.Sk <= last) || a.drops(dec.query(qb * BM), last);
      // Constant lengths bound kb and qb, which may prove that no block reaches (no mask,
      // Sk a multiple of BLOCK_N): then the kernel has no predicate at all.
      std::map<std::string, Expr::Range> ranges;
      if (a.Sk.is_const()) {
        const int64_t nkb = (a.Sk.const_value() + BN - 1) / BN;
        if (dec.split()) {
          const int64_t per = dec.split_blocks.const_value();
          ranges["kb"] = {0, (per + SW - 1) / SW - 1};
          ranges["kb0"] = {0, (dec.splits - 1) * per};
          ranges["sp"] = {0, dec.splits - 1};
        } else {
          ranges["kb"] = {0, (nkb + SW - 1) / SW - 1};
        }
      }
      if (SW > 1) ranges["wk"] = {0, SW - 1};
      if (a.Sq.is_const())
        ranges["qb"] = {0, (a.Sq.const_value() * dec.pack + BM - 1) / BM - 1};
      const auto never = reaches.bounds(ranges);
      if (!(never && never->hi == 0))
        add_math(guarded(reaches, {reg_loop("m_a", RA, {reg_loop("n2", BN / 16, {reg_loop("hf", 2,
                {reg_loop("e", 4, guarded(drop, {with_dst(Stmt::Init("s_acc", kNegInf),
                                                           {m_a, n2, hf, e})}))})})})}));
    }
    // 5. Online softmax, per row half r2 (row g or g + 8 of the atom). SOFTMAX=exp2: S
    // stays unscaled and c = scale·log2(e) rides in the exponent, p = exp2(s c - m c)
    // (nvcc contracts the multiply and subtract into one FFMA, then ex2). SOFTMAX=exp
    // (the articles' plain form): S is scaled first (one FMUL per score), m is in those
    // units, p = exp(s - m) (expf).
    {
      const bool e2 = t.softmax_exp2;
      const ScalarOp ex = e2 ? ScalarOp::Exp2 : ScalarOp::Exp;
      const Expr v = r2 * 2 + e;  // values 2 r2, 2 r2 + 1 of a C tile hold row r2
      const Operand s_v = val("s_acc", {m_a, n2, hf, v});
      auto each_score = [&](Block b) {
        return reg_loop("n2", BN / 16, {reg_loop("hf", 2, {reg_loop("e", 2, std::move(b))})});
      };
      Block row_max;
      if (!e2)
        row_max.push_back(each_score({with_dst(
            Stmt::Compute("s_acc", ScalarOp::Mul, {s_v, Operand::constant(a.scale)}),
            {m_a, n2, hf, v})}));
      Block stats = {
          Stmt::Init("m_t", kNegInf),
          each_score({Stmt::Accum("m_t", s_v, ScalarOp::Max)}),
          Stmt::LaneReduce("m_q", ScalarOp::Max, val("m_t"), 4),
          Stmt::Compute("m_new", ScalarOp::Max, {val("m_i", {m_a, r2}), val("m_q")}),
          Stmt::Compute("m_diff", ScalarOp::Sub, {val("m_i", {m_a, r2}), val("m_new")}),
      };
      row_max.insert(row_max.end(), stats.begin(), stats.end());
      if (e2) {
        row_max.push_back(
            Stmt::Compute("m_diff_c", ScalarOp::Mul, {val("m_diff"), Operand::constant(c)}));
        row_max.push_back(Stmt::Compute("alpha", ScalarOp::Exp2, {val("m_diff_c")}));
      } else {
        row_max.push_back(Stmt::Compute("alpha", ScalarOp::Exp, {val("m_diff")}));
      }
      row_max.push_back(with_dst(
          Stmt::Compute("m_i", ScalarOp::Max, {val("m_i", {m_a, r2}), val("m_q")}), {m_a, r2}));
      row_max.push_back(with_dst(Stmt::Accum("l_i", val("alpha"), ScalarOp::Mul), {m_a, r2}));
      Block p_of_s;
      if (e2) {
        row_max.push_back(Stmt::Compute("m_c", ScalarOp::Mul, {val("m_new"), Operand::constant(c)}));
        p_of_s = {Stmt::Compute("s_c", ScalarOp::Mul, {s_v, Operand::constant(c)}),
                  Stmt::Compute("s_m", ScalarOp::Sub, {val("s_c"), val("m_c")})};
      } else {
        p_of_s = {Stmt::Compute("s_m", ScalarOp::Sub, {s_v, val("m_new")})};
      }
      p_of_s.push_back(with_dst(Stmt::Compute("s_acc", ex, {val("s_m")}), {m_a, n2, hf, v}));
      p_of_s.push_back(with_dst(Stmt::Accum("l_i", s_v), {m_a, r2}));
      row_max.push_back(each_score(std::move(p_of_s)));
      row_max.push_back(reg_loop("dn2", D / 16, {reg_loop("hf", 2, {reg_loop("e", 2, {
          with_dst(Stmt::Accum("o_acc", val("alpha"), ScalarOp::Mul), {m_a, dn2, hf, v})})})}));
      add_math({reg_loop("m_a", RA, {reg_loop("r2", 2, std::move(row_max))})});
    }
    // 6. O += P V: S tiles (kk, 0) and (kk, 1) are the A fragment of k-step kk.
    // V_kb landed: eager, only the 2S-3 groups after it may still be in flight.
    add({tma ? landed(vbar(slot_i)) : Stmt::AsyncWait(eager ? ahead - 1 : 0), group_sync()});
    add_math(pv_product(mma, slot));
    // V_{kb+S-1} into the slot whose V_{kb-1} every warp finished before this PV's barrier.
    if (eager) add(next(v_s, a.v, "v"));
    append({Stmt::For("kb", steps_per_group, LoopKind::Reduce, "kb", std::move(step))});
    // No copy outlives the kernel's shared memory (KV_COPY=tma: every box issued is a
    // block some group waited for).
    if (eager && !tma) append({Stmt::AsyncWait(0)});
    if (SW > 1) append(meet_groups(key_blocks, c));

    // 7. Normalize and store: O and LSE, or (SPLIT_KV) the split's partial O and LSE,
    // f32, to the workspace. Packed row pr is query i of head hq (GQA_PACK).
    {
      const Expr pr = row_of(m_a, r2), i = dec.query(pr), hq = dec.head(h, pr);
      const Expr d = dn2 * 16 + hf * 8 + lane % 4 * 2;
      Block fin = {
          Stmt::LaneReduce("l_q", ScalarOp::Add, val("l_i", {m_a, r2}), 4),
          with_dst(Stmt::Compute("inv_l", ScalarOp::Div, {Operand::constant(1.0), val("l_q")}),
                   {m_a, r2}),
      };
      Block zero_inv =
          guarded(dec.split_empty(a, i, sp), {with_dst(Stmt::Init("inv_l", 0.0), {m_a, r2})});
      fin.insert(fin.end(), zero_inv.begin(), zero_inv.end());
      fin.push_back(reg_loop("dn2", D / 16, {reg_loop("hf", 2, {
          Stmt::Alloc("y", {Expr(2)}),
          reg_loop("e", 2, {with_dst(Stmt::Compute("y", ScalarOp::Mul,
                                                   {val("o_acc", {m_a, dn2, hf, r2 * 2 + e}),
                                                    val("inv_l", {m_a, r2})}),
                                     {e})}),
          [&] {
            // STAGE_OUTPUT=1: into the row's place in Q_s (this warp's own rows, which
            // only this warp ever read); rows past Sq too, the copy out skips them.
            Stmt s = t.stage_output
                         ? Stmt::Write(q_s, {(w * RW + m_a * 16 + lane / 4 + r2 * 8) * D + d},
                                       val("y", {Expr(0)}))
                     : dec.split()
                         ? Stmt::Write(dec.part_o,
                                       {flat(p.tensor(dec.part_o), {b, hq, i, sp, d})},
                                       val("y", {Expr(0)}))
                         : Stmt::Write("out", {flat(p.tensor("out"), a.q_index(b, hq, i, d))},
                                       val("y", {Expr(0)}));
            s.width = 2;
            return t.stage_output ? s : Stmt::If(pr < dec.rows(a), {s});
          }()})}));
      if (a.lse || dec.split()) {
        // m is in S's units: unscaled (SOFTMAX=exp2) or scaled (exp).
        Block lse = {
            Stmt::Compute("m_s", ScalarOp::Mul,
                          {val("m_i", {m_a, r2}),
                           Operand::constant(t.softmax_exp2 ? a.scale : 1.0)}),
            Stmt::Compute("log_l", ScalarOp::Log, {val("l_q")}),
            with_dst(Stmt::Compute("lse_v", ScalarOp::Add, {val("m_s"), val("log_l")}), {m_a, r2}),
        };
        Block none = guarded(dec.split_empty(a, i, sp),
                             {with_dst(Stmt::Init("lse_v", kNegInf), {m_a, r2})});
        lse.insert(lse.end(), none.begin(), none.end());
        const std::string dst = dec.split() ? dec.part_lse : kLseTensor;
        const std::vector<Expr> at = dec.split() ? std::vector<Expr>{b, hq, i, sp}
                                                 : a.lse_index(b, hq, i);
        lse.push_back(Stmt::If(lane % 4 < 1 && pr < dec.rows(a),
                               {Stmt::Write(dst, {flat(p.tensor(dst), at)},
                                            val("lse_v", {m_a, r2}))}));
        fin.insert(fin.end(), lse.begin(), lse.end());
      }
      Block tail = {Stmt::Alloc("inv_l", {Expr(RA), Expr(2)})};
      if (a.lse || dec.split()) tail.push_back(Stmt::Alloc("lse_v", {Expr(RA), Expr(2)}));
      tail.push_back(reg_loop("m_a", RA, {reg_loop("r2", 2, std::move(fin))}));
      // SPLIT_WARPS: group 0 holds the met statistics and stores.
      append(SW > 1 ? Block{Stmt::If(wk < 1, std::move(tail))} : std::move(tail));
      if (t.stage_output) append(copy_out());
      if (dec.combine_last_cta) append(combine_in_last_cta());
    }
    if (a.varlen) {
      // A query block past its sequence's rows (the grid is sized by max_seqlen_q) has
      // nothing to do: everything after the lets is under one CTA-uniform condition.
      size_t lets = 0;
      while (lets < body.size() && body[lets].kind == StmtKind::Let) ++lets;
      Block rest(body.begin() + std::ptrdiff_t(lets), body.end());
      body.erase(body.begin() + std::ptrdiff_t(lets), body.end());
      body.push_back(Stmt::If(qb * BM < dec.rows(a), std::move(rest)));
    }
    return body;
  }

  // STAGE_OUTPUT=1: after a barrier (every warp's O rows in Q_s), the block's [BLOCK_M, D]
  // leaves by 16-byte row-contiguous loads and stores, consecutive threads taking
  // consecutive chunks of a row (whole 32-byte sectors per pair of lanes, where the
  // fragments' 4-byte stores fill half-sectors), rows past Sq skipped.
  Block copy_out() const {
    const int64_t chunks = BM * D / kChunk, threads = kLanes * W;
    const Expr cv = Expr::var("o_c"), e = Expr::var("o_e");
    const Expr row = e / (D / kChunk), col = e % (D / kChunk) * kChunk;
    Stmt ld = Stmt::Load("o_v", q_s, {row * D + col});
    ld.dst_index = {Expr(0)};
    ld.width = int(kChunk);
    Stmt st = Stmt::Write("out", {flat(p.tensor("out"), {b, h, qb * BM + row, col})},
                          val("o_v", {Expr(0)}));
    st.width = int(kChunk);
    // `row < Sq - qb·BM`: one loop-invariant bound (k:054 found the other form spilling).
    Expr keep = row < a.Sq - qb * BM;
    if (chunks % threads != 0) keep = e < chunks && keep;
    Block move = {Stmt::Let("o_e", cv * threads + tid), Stmt::Alloc("o_v", {Expr(kChunk)})};
    move.push_back(Stmt::If(keep, {ld, st}));
    return {Stmt::Barrier(),
            Stmt::For("o_c", Expr((chunks + threads - 1) / threads), LoopKind::Parallel, "o_c",
                      std::move(move))};
  }

  KernelOp run() {
    q_s = shared("Q_s", BM);
    // A ring of KV_STAGES blocks (or one block) per SPLIT_WARPS group.
    const int64_t slots = (t.kv_stages >= 2 ? t.kv_stages : 1) * SW;
    k_s = shared("K_s", BN, slots > 1 ? slots : 0);
    v_s = shared("V_s", BN, slots > 1 ? slots : 0);
    if (SW > 1) {
      // Groups 1..SW-1's (O, m, l) fragments, a thread's registers lane-minor (no bank
      // conflict), over the rings (overlay part 1: after the key loop).
      TensorDecl r;
      r.name = fresh_tensor_name(p, "attn_meet");
      r.dtype = DType::F32;
      r.shape = {Expr((SW - 1) * W * kLanes * (RA * (D / 16) * 8 + 4 * RA))};
      r.role = TensorRole::Shared;
      r.overlay = 1;
      p.tensors.push_back(r);
      red_s = r.name;
    }
    if (dec.combine_last_cta) {
      // The arrival counters, one per row set (b, head slot, query block).
      TensorDecl c;
      c.name = fresh_tensor_name(p, "attn_split_count");
      c.dtype = DType::F32;
      c.role = TensorRole::Temp;
      c.zero_init = true;
      c.shape = {a.B, dec.heads(a), ceil_div(dec.rows_cap(a), Expr(BM))};
      p.tensors.push_back(c);
      counter = c.name;
    }
    const AtomDef& mma_def =
        atom(dt == DType::F16 ? "mma_m16n8k16_f32_f16" : "mma_m16n8k16_f32_bf16");
    c_to_a_pairs(mma_def);  // P's registers are O += P V's A fragments, or refuse
    KernelOp k;
    k.name = "k_attention";
    k.grid[0] = ceil_div(dec.rows_cap(a), Expr(BM)) * dec.splits;
    k.grid[1] = dec.heads(a);
    k.grid[2] = a.B;
    k.block_threads = int(kLanes * W * SW);
    // __launch_bounds__(threads, MIN_BLOCKS), at least 1: without a minimum, NVRTC's ptxas
    // (13.0) aimed a 128-thread D = 64 kernel at 128 registers and spilled 12 B in the key
    // loop; with (128, 1) it took 148 and spilled nothing (nvcc's default took 137).
    k.min_blocks_per_sm = int(min_blocks);
    if (tma) {
      k.mbarriers = int(2 * ring_slots());
      for (const auto& [sh, src] : {std::pair{k_s, a.k}, std::pair{v_s, a.v}}) {
        TmaDescriptor d;
        d.name = sh + "_tmap";
        d.tensor = src;
        d.shared = sh;
        d.box = {kTmaSpan, BN, 1, 1};
        d.swizzle_bytes = 128;
        k.tma.push_back(d);
      }
    }
    k.warp_atoms = {warp_atom(mma_def)};
    k.warp_copies = {warp_copy(atom("ldmatrix_x4")), warp_copy(atom("ldmatrix_x4_trans"))};
    k.body = build(k.warp_atoms[0]);
    // One parameter per tensor: attention(Q, Q, Q) passes one pointer.
    std::vector<std::string> tensors = {a.q, a.k, a.v};
    if (a.paged) {
      tensors.push_back(a.block_table);
      tensors.push_back(a.seqlens);
    }
    if (a.varlen) {
      tensors.push_back(a.cu_q);
      tensors.push_back(a.cu_k);
    }
    if (dec.split()) {
      tensors.push_back(dec.part_o);
      tensors.push_back(dec.part_lse);
    }
    if (dec.combine_last_cta) tensors.push_back(counter);
    if (!dec.split() || dec.combine_last_cta) {
      tensors.push_back("out");
      if (a.lse) tensors.push_back(kLseTensor);
    }
    for (const std::string& t : tensors)
      if (std::find(k.params.begin(), k.params.end(), t) == k.params.end()) k.params.push_back(t);
    for (const auto& sym : p.symbols) k.params.push_back(sym);
    return k;
  }
};

// KV_COPY (cp_async, the default; tma): whether K and V blocks come by TMA boxes, checked.
bool kv_copy_tma(CompileState& s, const AttentionLoops& a, const AttentionTiles& t) {
  const std::string mode = s.knobs.get_str("KV_COPY", "cp_async");
  if (mode != "cp_async" && mode != "tma")
    throw Error("KV_COPY=" + mode + ": attention's mma.sync kernel copies K and V blocks by "
                "16-byte cp.async from every thread (cp_async) or by TMA boxes from one thread "
                "per warp group (tma)");
  if (!s.knobs.has("KV_COPY")) return false;
  s.used_knobs["KV_COPY"] = mode;
  if (mode != "tma") return false;
  auto refuse = [&](const std::string& why, const std::string& fix) {
    throw Error("KV_COPY=tma: " + why + ": " + fix);
  };
  if (s.target.compute_capability() < 90)
    refuse("TMA (cp.async.bulk.tensor) is sm_90 and newer, and the target is " + s.target.arch,
           "use KV_COPY=cp_async");
  if (t.kv_stages < 2)
    refuse("the boxes of block kb + S - 1 are issued S - 1 blocks ahead into a ring, and "
           "KV_STAGES=" + std::to_string(t.kv_stages) + " has no ring",
           "use KV_STAGES=2 or more");
  if (a.paged)
    refuse("paged K/V (block_table=) would need one box per page of each block, which is "
           "not built", "use KV_COPY=cp_async");
  if (a.varlen)
    refuse("packed sequences' K/V ([T, H, D]) take a map over tokens, which is not built "
           "for this kernel", "use KV_COPY=cp_async");
  if (t.head_dim % kTmaSpan != 0)
    refuse("a box is 64 columns (128 bytes, TMA's 128-byte swizzle), and D = " +
               std::to_string(t.head_dim) + " is not a multiple of 64",
           "use KV_COPY=cp_async");
  if (t.block_n > 256)
    refuse("a box has at most 256 rows and BLOCK_N=" + std::to_string(t.block_n) + " is one box",
           "use BLOCK_N=256 or less");
  // The swizzle repeats every 1024 bytes: each K/V slot must start on a repeat. Q_s comes
  // first, then K_s and V_s (rings of BLOCK_N-row slots).
  if ((t.block_m * t.head_dim * 2) % 1024 != 0 || (t.block_n * t.head_dim * 2) % 1024 != 0)
    refuse("the 128-byte swizzle repeats every 1024 bytes and a " + std::to_string(t.block_m) +
               "- or " + std::to_string(t.block_n) + "-row tile of D = " +
               std::to_string(t.head_dim) + " is not a whole number of repeats",
           "use BLOCK_M and BLOCK_N multiples of " + std::to_string(1024 / (t.head_dim * 2)) +
               ", or KV_COPY=cp_async");
  return true;
}

}  // namespace

Pass pass_lower_attention() {
  return Pass{"k:012_lower_attention", Level::Tile, Level::Kernel,
              "attention is one mma.sync kernel: Q in registers, K/V blocks by cp.async, "
              "S and P in registers (P as O += P V's A fragments), quad-shuffle row max and "
              "sum, causal blocks past the diagonal never visited; GQA_PACK's rows read and "
              "write their own heads; KV_STAGES 2-4: rings of K/V blocks in flight; SPLIT_KV: f32 "
              "partial O/LSE, then k_attention_combine (COMBINE_GROUPS thread groups per row) "
              "or the last CTA per row set (COMBINE=last_cta); SPLIT_WARPS: warp groups on "
              "every W-th key block of the rows, meeting in shared memory",
              {"BLOCK_M", "BLOCK_N", "WARPS", "KV_STAGES", "Q_IN_REGS", "SWIZZLE", "MIN_BLOCKS",
               "INTERLEAVE_LOADS", "FRAG_BUFFERS", "SOFTMAX", "ZERO_INIT", "STAGE_OUTPUT",
               "COMBINE_GROUPS", "SPLIT_WARPS", "COMBINE", "KV_COPY"},
              [](CompileState& s) {
                if (!s.graph.attention() || attention_uses_wgmma(s)) return;  // k:013's
                if (s.target.compute_capability() < 80)
                  throw Error("attention's kernel uses mma.sync m16n8k16 with bf16/f16 and "
                              "cp.async: sm_80 or newer, not " + s.target.arch);
                AttentionLoops a(s.graph);
                const AttentionTiles t = attention_tiles(s, a);
                KernelProgram kp;
                static_cast<ProgramBase&>(kp) = s.tile;
                const AttentionDecode dec =
                    attention_decode(s, a, t.block_m, t.block_n, &kp);
                if (t.stage_output && a.varlen)
                  throw Error("STAGE_OUTPUT=1 copies the block's rows of O out as one contiguous "
                              "[BLOCK_M, D] of one head, and packed sequences' rows are [T, H, D] "
                              "(a row stride of H·D): use STAGE_OUTPUT=0");
                if (t.stage_output && (dec.split() || dec.pack > 1))
                  throw Error(std::string("STAGE_OUTPUT=1 copies the block's rows of O out as one "
                              "contiguous [BLOCK_M, D] of one head, and ") +
                              (dec.split() ? "SPLIT_KV writes f32 partials" :
                                             "GQA_PACK's rows belong to several heads") +
                              ": use STAGE_OUTPUT=0, or " +
                              (dec.split() ? "SPLIT_KV=1" : "GQA_PACK=0"));
                if (dec.split_warps > 1) {
                  const int64_t threads = 32 * t.warps * dec.split_warps;
                  if (threads > 1024)
                    throw Error("SPLIT_WARPS=" + std::to_string(dec.split_warps) + " groups of " +
                                std::to_string(t.warps) + " warps (WARPS) are " +
                                std::to_string(threads) + " threads, above 1024: use SPLIT_WARPS=" +
                                std::to_string(std::max<int64_t>(1, 32 / t.warps)) +
                                " or less, or fewer WARPS");
                  const int64_t smem = decode_cta_smem(t.block_m, t.block_n, t.head_dim,
                                                       std::max<int64_t>(1, t.kv_stages),
                                                       dec.split_warps);
                  if (smem > s.target.smem_per_block)
                    throw Error("SPLIT_WARPS=" + std::to_string(dec.split_warps) + " gives each "
                                "group its own ring of KV_STAGES=" + std::to_string(t.kv_stages) +
                                " K/V blocks: " + std::to_string(smem) + " B of shared memory, "
                                "above the " + std::to_string(s.target.smem_per_block) +
                                " B a block may use: use fewer SPLIT_WARPS, KV_STAGES or BLOCK_N");
                }
                Lowering lower(a, t, dec, kp);
                lower.min_blocks = std::max<int64_t>(1, s.knob("MIN_BLOCKS", 1));
                const bool pow2 = (t.head_dim & (t.head_dim - 1)) == 0;
                const std::string sw = s.knobs.get_str("SWIZZLE", pow2 ? "xor" : "none");
                s.used_knobs["SWIZZLE"] = sw;
                if (sw != "xor" && sw != "none")
                  throw Error("SWIZZLE=" + sw + ": attention's K, V and Q tiles take none or "
                              "xor (the TMA patterns are for TMA-staged slabs)");
                lower.swizzle = sw == "xor";
                lower.tma = kv_copy_tma(s, a, t);
                kp.kernels.push_back(lower.run());
                // SPLIT_KV: the combine, launched after (k:065: as a programmatic dependent).
                if (dec.split() && !dec.combine_last_cta) {
                  const int64_t groups = s.knob(
                      "COMBINE_GROUPS", combine_groups_default(dec.splits, t.head_dim));
                  kp.kernels.push_back(attention_combine_kernel(a, dec, kp, groups));
                }
                s.kernel = std::move(kp);
                s.level = Level::Kernel;
              }};
}

}  // namespace loom
