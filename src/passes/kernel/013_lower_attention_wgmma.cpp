// k:013_lower_attention_wgmma — attention's tiled form (t:012) becomes an sm_90a kernel on
// wgmma and TMA (ATTN_MMA=wgmma, the default on sm_90a for every D that is a multiple of 8
// up to 256; docs/attention.md, "The wgmma kernel"): FlashAttention-3's mainloop, each
// consumer warpgroup owning 64 query rows.
//  1. Bind: blockIdx (qb, h, b) as k:012 (causal: longest query blocks first); warp
//     w = threadIdx.x / 32, warpgroup wg = threadIdx.x / 128, lane = threadIdx.x % 32.
//  2. TMA: thread 0 initializes the mbarriers (Q; per ring slot one for K, one for V, and
//     with the producer one "empty"; with ATTN_OVERLAP one for K and one for V). The
//     head dim, rounded up to 16, is stored as column
//     spans (AttentionSpan, attention_wgmma_tiles.h): the 64-column multiples as 128-byte
//     swizzled chunks of one tensor (TensorDecl::row_chunk past 64), then a 32-column
//     span (64-byte swizzle) and a 16-column one (32-byte), each span a shared tensor of
//     its own (Q_s, Q_s1, Q_s2; K_s...; V_s...) with its own tensor map. Q's block and
//     each K/V block are one box per chunk or narrow span over a 4-D tensor map
//     [B, H, S, D], so rows past Sq or Sk are the map's zero fill, never the next head's,
//     and so are the columns past D of a D that is 8 mod 16 (zero K and Q columns leave
//     S unchanged; V's give O columns that are never stored).
//     Serving forms (docs/attention.md, "Serving forms"): every CTA first binds its
//     sequence's lengths (paged `kv_len`; varlen q_start, q_end, kv_start, kv_end; then
//     seq_q, seq_k, which every bound and mask names). Varlen: 3-D maps over [T, H, D],
//     the box's token coordinate q_start + row / kv_start + key (rows past the sequence are
//     the next one's: keys masked, queries not stored); a query block at or past seq_q
//     skips everything after the lets. Paged KV: a 4-D map over the pool [P, Hkv, page, D],
//     a key block as gcd(BLOCK_N, page)-row boxes, each at the page BT[b, key / page] the
//     issuing thread reads just before them. In the block that holds the sequence's last
//     key, the consumers zero the V rows past it once they land (clean_v): they are real
//     memory (slack, a page's unwritten tail), and 0 x NaN would reach O.
//  3. Key loop over a ring of KV_STAGES slots. ATTN_PRODUCER=0: a block barrier at the top
//     of block kb (every warpgroup retired its wgmmas on kb-1), then thread 0 issues block
//     kb+S-1 into kb-1's slot. ATTN_PRODUCER=1: a producer warpgroup (setmaxnreg down)
//     issues block kb once the consumers released block kb-S's slot (one arrival per
//     warpgroup on the slot's empty barrier); the consumers (setmaxnreg up) never meet.
//  4. S = Q K_kb^T: Dp/16 wgmma m64n{BLOCK_N}k16, span by span, A = Q (shared, K-major),
//     B = K (shared, K-major: K [key][d] is B^T stored N x K), scale-d 0 on the first
//     span's first k-step.
//  5. Masks and online softmax on the accumulator: a warpgroup's C is the m16n8 C layout
//     of each warp over rows 16w.., repeated over N/8 column tiles, so a row's values live
//     in one quad (lane_reduce over 4 lanes) exactly as in k:012: masks per element only in
//     blocks the causal bound (of the warpgroup's first row) or the ragged end reaches,
//     p = exp2(s c - m c).
//  6. O += P V: S tiles 2kk and 2kk+1 are value for value the register A fragment of
//     k-step kk (checked against the atom table here); codegen packs them to 16-bit pairs
//     at the wgmma. B = V (shared, MN-major: V [key][d] is B stored K x N, d contiguous:
//     the descriptor's transpose), one wgmma m64n{width}k16 per span into the span's own
//     accumulator (o_acc, o_acc1, o_acc2), all reading the same P registers. O is
//     rescaled by alpha while no wgmma writes it.
//     ATTN_OVERLAP=0: each block's S, softmax, P V in turn (P packed from S at the wgmma).
//     ATTN_OVERLAP=1: S of block kb issued before P V of kb-1, the softmax under that
//     product; P V reads P from a 16-bit register array (p_acc) the softmax's result is
//     converted into (FlashAttention-3's tOrP), so one f32 S array suffices.
//  7. O (1/l) stored from the fragments (4-byte pairs, rows past Sq and columns past D
//     skipped; varlen at token q_start + row: predicated stores, where a TMA store's box
//     would write into the next sequence's rows), LSE by lane t = 0 of each quad. Rows
//     that keep no key: O = 0, LSE = -inf (k:012's semantics).
// Every shared operand's descriptor is checked against TensorDecl::physical() element by
// element (check_descriptor), so the interpreter's reading of the tiles is the tensor
// cores'.
//     ATTN_PINGPONG=1: the consumer warpgroups take turns issuing their wgmmas (named
//     barriers 1..ATTN_WG, bar.sync before a turn, bar.arrive for the next warpgroup after
//     it), so one's softmax runs under another's products (FlashAttention-3 sec. 3.1).
//     ATTN_PACK_P=1 (always with the overlap): P converted once into p_acc, not packed from
//     S at each P V wgmma.
//     ATTN_PEEL_MASK=1: the key loop as two, the blocks every row of the CTA keeps whole
//     (no mask code: ptxas had if-converted the mask into every block) and then the
//     masked ones (past Sk, the causal diagonal), FlashAttention-3's masking steps.
//     The default causal in the short D = 128 tile and with the overlap under the walk at
//     D = 256 from 4096 keys (attention_wgmma_tiles: measured on the H200).
//     ATTN_PERSISTENT=1 (with the producer; dense or varlen): a grid of min(units, ATTN_CTAS)
//     CTAs (default the SM count) walks the units (query block, head, batch) with the
//     grid's stride; without a mask the query block runs fastest, causal the longest
//     units first (query block slowest, from the last down). Both arms loop over the
//     CTA's units with the unit's lets; the K/V ring turns on across units (a block's slot
//     and phase come from its index in the CTA's stream: without a mask and with the
//     static order, t_i x the key blocks; causal or dynamic, the producer's running count
//     at the unit's start, `ring_base`, which it stores with the unit's index in shared
//     memory, unit_s, before its arrival on Q's barrier; no unit padded). Per unit the
//     producer issues block 0, then Q once the consumers released Q's slot (mbarrier
//     1 + 3S, one arrival per warpgroup after its last S), then the rest: the next unit's
//     loads run under the current unit's last block and epilogue.
//     Varlen: the units are max_seqlen_q's query blocks x Hq x B, longest first with or
//     without a mask, always through the stream; both arms bind the unit's sequence
//     (q_start .. seq_k) after its coordinates (the producer from the cumulative lengths,
//     the consumers from the hand-off, unit_s[4..7]); the producer skips a unit past its
//     sequence's rows (no load, no hand-off), counts its hand-offs in unit_s[3] (Q's
//     release parity) and ends with a stop (unit = units) that breaks the consumers' walk.
//     ATTN_SCHEDULE=dynamic: the producer takes the CTA's first unit from blockIdx.x and
//     each next from a global work counter (fetch.inc, longest first, wrapping to 0 at
//     the launch's last fetch), and a unit past the last ends both arms' walks (break).
//     The unit is fetched when the producer needs it, not as the one before is taken
//     (FlashAttention-3's prefetch measured 0-7 % slower: bench/NOTES.md, 2026-11-29
//     evening), so whichever SM frees first takes the longest unit left.
//     ATTN_LOAD_WARPS=L > 1 (with the producer, one CTA per query block; paged KV's default
//     at 4 or more pages a block): lane 0 of producer warps 0..L-1 each wait for the slot
//     and issue their share of a block's boxes (a page piece each in turn, or box by box
//     where a block has fewer pieces than warps), with their table reads; the first arms
//     the full barrier and issues Q (spread_issue).
//     ATTN_TMA_STORE=1: step 7's O goes to shared memory (O_s, or Q's slot when O_s does
//     not fit: D = 256) by stmatrix.x4 (ATTN_STMATRIX; 0: 4-byte stores), fenced, and
//     each warpgroup's first thread stores its 64 rows by
//     TMA (one box per 64-column chunk or narrow span; the map clips rows past Sq and
//     columns past D); the next unit's writes wait for the store's read
//     (bulk.wait.read 0), and the CTA drains its stores before it exits.
//     ATTN_STMATRIX=1 without the TMA store (varlen's and paged prefill's default): the
//     same stmatrix writes, then the copy-out — the warpgroup meets and its threads copy its
//     64 rows in 16-byte chunks along the rows, rows past Sq (the sequence's) skipped
//     (copy_out()).
// Knobs: ATTN_MMA, ATTN_WG, ATTN_PRODUCER, ATTN_OVERLAP, ATTN_PINGPONG, ATTN_PACK_P, ATTN_PEEL_MASK,
// ATTN_PERSISTENT, ATTN_CTAS, ATTN_SCHEDULE, ATTN_LOAD_WARPS, ATTN_TMA_STORE, ATTN_STMATRIX,
// BLOCK_N, KV_STAGES, MIN_BLOCKS.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include "atoms/atoms.h"
#include "atoms/wgmma_desc.h"
#include "ir/error.h"
#include "passes/attention_loops.h"
#include "passes/attention_wgmma_tiles.h"
#include "passes/kernel_builders.h"
#include "passes/passes.h"

namespace loom {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int64_t kSpan = 64;  // 16-bit elements per 128-byte swizzle span (one TMA box row)

using namespace kernel_builders;  // val, reg_loop, with_dst, ||, flat

// P's repack for wgmma: value v (0..7) of the register A fragment of an m64n?k16 wgmma is,
// on every thread, value v of the S accumulator's column tiles 2kk, 2kk + 1 (values
// 8kk + v) shifted by 16kk columns. Throws naming the first thread and value where not.
void check_p_repack(const AtomDef& s_atom, const AtomDef& pv_atom) {
  const OperandLayout& c = operand_layout(s_atom, "C");
  const OperandLayout& a = operand_layout(pv_atom, "A");
  for (int t = 0; t < 128; ++t)
    for (int v = 0; v < a.values_per_thread; ++v)
      if (a.map(t, v) != c.map(t, v))
        throw Error("k:013: value " + std::to_string(v) + " of thread " + std::to_string(t) +
                    " of " + pv_atom.id + "'s A fragment is not value " + std::to_string(v) +
                    " of " + s_atom.id + "'s accumulator; P cannot stay in registers");
}

// The descriptor codegen makes for the tile at origin (row stride rs, col stride cs) of
// `t` addresses what physical() says, element by element.
void check_descriptor(const TensorDecl& t, WgmmaOperand op, int64_t origin, int64_t rs,
                      int64_t cs, int rows, int cols) {
  const WgmmaDescFields f = wgmma_desc_for(t, op, rs, cs);
  const int64_t start = wgmma_start_byte(t, origin), eb = dtype_bytes(t.dtype);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      if (wgmma_canonical_offset(f, op, start, r, c) != t.physical(origin + r * rs + c * cs) * eb)
        throw Error("k:013: the wgmma descriptor of " + t.name + " at offset " +
                    std::to_string(origin) + " reads element (" + std::to_string(r) + ", " +
                    std::to_string(c) + ") from the wrong byte");
}

struct Lowering {
  AttentionLoops a;  // a copy: the serving forms bind Sq and Sk to lets (build())
  const AttentionWgmmaTiles& t;
  KernelProgram& p;
  KernelOp k;
  DType dt;
  // Per column span (AttentionSpan): Q's, K's and V's shared tensors and O's accumulator.
  std::vector<std::string> q_s, k_s, v_s, o_acc;
  // ATTN_TMA_STORE=1: O's shared tensors per span (their own, or Q's) and tensor maps.
  std::vector<std::string> o_s, o_map;
  // The walk's stream: the unit hand-off (shared i32, its layout at unit_slots()) and the dynamic
  // schedule's work counter (a zeroed global i32); empty where unused.
  std::string unit_s_, work_counter_;
  const Expr b = Expr::var("b"), h = Expr::var("h"), qb = Expr::var("qb"), w = Expr::var("w"),
             wg = Expr::var("wg"), lane = Expr::var("lane"), tid = Expr::var("threadIdx.x"),
             kb = Expr::var("kb");
  int64_t Dp, BM, BN;  // the stored head dim (D rounded up to 16), the tile
  int64_t l2_budget_;  // bytes of K and V a causal section may keep in L2 (causal_section)

  Lowering(const AttentionLoops& a_, const AttentionWgmmaTiles& t_, KernelProgram& p_, int64_t l2_bytes)
      : a(a_), t(t_), p(p_), l2_budget_(l2_bytes * 16 / 25) {
    dt = p.tensor(a.q).dtype;
    Dp = t.padded_dim, BM = t.block_m, BN = t.block_n;
  }

  // [stages,] 1, 1, rows, width of span `sp`: the box covers the tensor map's four
  // dimensions [B, H, S, D] (unit extents along B and H); a span wider than 64 columns is
  // stored as 64-column chunks, each one TMA box, the 128-byte swizzle (TMA's and wgmma's
  // pattern) on every chunk; a 32- or 16-column span is one box of its own width under
  // the 64- or 32-byte swizzle (its rows exactly one swizzle span). The first span's
  // tensors are Q_s, K_s, V_s; later ones add the span's index.
  std::string shared(const std::string& base, const AttentionSpan& sp, size_t index, int64_t rows,
                     int64_t stages = 0) {
    TensorDecl s;
    s.name = fresh_tensor_name(p, index == 0 ? base : base + std::to_string(index));
    s.dtype = dt;
    s.shape = {Expr(1), Expr(1), Expr(rows), Expr(sp.width)};
    if (stages > 0) s.shape.insert(s.shape.begin(), Expr(stages));
    s.role = TensorRole::Shared;
    int bits = 0;
    while ((int64_t(16) << bits) < sp.swizzle_bytes()) ++bits;
    s.swizzle = Swizzle{bits, 3, 3};
    if (sp.width > kSpan) s.row_chunk = kSpan;
    // Every swizzled tensor starts on its pattern's repeat (at most 1024 B) because every
    // one before it is a whole number of repeats: shared_layout() places tensors at 128 B.
    LOOM_CHECK(rows * sp.width * std::max<int64_t>(stages, 1) * 2 % 1024 == 0,
               "attention's shared span tensors are whole 1024-byte repeats");
    p.tensors.push_back(s);
    return s.name;
  }

  // The tensor map of `src` for span `sp`: boxes of min(width, 64) columns x `rows` rows
  // of one (batch, head), the span's swizzle. Columns past D (a D that is 8 mod 16) are
  // the map's zero fill.
  // Varlen: a 3-D map over [T, H, D] (innermost first: d, head, token), boxes of one head
  // and `rows` tokens; the box's token coordinate is the sequence's first row plus the
  // block's, and rows past the sequence are the next sequence's (masked: keys past Sk;
  // queries past Sq are not stored) or, past T, the map's zero fill. Paged K/V: a 4-D map
  // over the pool [P, Hkv, page, D], boxes of `rows` = page_rows() rows of one page.
  void descriptor(const std::string& sh, const std::string& src, const AttentionSpan& sp,
                  int64_t rows) {
    TmaDescriptor d;
    d.name = sh + "_tmap";
    d.tensor = src;
    d.shared = sh;
    const int64_t w = std::min(sp.width, kSpan);
    d.box = a.varlen ? std::vector<int64_t>{w, 1, rows} : std::vector<int64_t>{w, rows, 1, 1};
    d.swizzle_bytes = int(sp.swizzle_bytes());
    k.tma.push_back(d);
  }

  // Paged KV: the rows of one TMA box of K or V, gcd(BLOCK_N, page). A key block of
  // BLOCK_N keys starts at a multiple of BLOCK_N, so each piece of this many rows starts at
  // a multiple of it and lies within one page (it divides the page): BLOCK_N <= page and
  // dividing it is one box per block; a BLOCK_N that does not divide the page (the 3 x 112
  // tile at D = 128) or exceeds it (16-key pages) is several boxes, each with its own page.
  int64_t page_rows() const { return attention_page_rows(a, BN); }

  // The walk's stream: units of differing lengths (causal; varlen and paged KV, each
  // sequence its own keys) or an order known only as the units are fetched (dynamic), so
  // the producer hands each unit over with its ring base (build(), "stream").
  bool streams() const {
    return t.persistent && (a.causal != Causal::None || t.dynamic || a.varlen || a.paged);
  }
  // unit_s_, the stream's hand-off in shared memory (i32): [0] the unit, [1] its ring base,
  // [2] the producer's running block count; varlen: [3] the producer's hand-off count,
  // [4..7] the unit's q_start, seq_q, kv_start, seq_k, packed order also [8] the
  // producer's sequence cursor and [9..11] the unit's b, h, qb; paged KV: [3] the unit's
  // key count. ATTN_LOAD_WARPS = L > 1 (not varlen): every issuing warp keeps its own
  // running count, warp w's at [4 + w] (each warp reads only what it wrote, so no warp
  // waits on another's count).
  static constexpr int64_t kPagedKeysSlot = 3, kWarpCountsSlot = 4;
  int64_t unit_slots() const {
    const int64_t base = a.paged ? 4 : !a.varlen ? 3 : packed_order() ? 12 : 8;
    return t.load_warps > 1 ? std::max(base, kWarpCountsSlot + t.load_warps) : base;
  }
  Expr ring_count_slot() const {
    return t.load_warps > 1 ? Expr(kWarpCountsSlot) + Expr::var("load_warp") : Expr(2);
  }

  // The global coordinates of rows row0.. of head `head` of `src` at column `col`: dense
  // [b, head, row0, col]; varlen [start + row0, head, col] (start: q_start for Q,
  // kv_start for K and V); paged (K and V) [page, head, row0 % page, col].
  std::vector<Expr> coords(const std::string& src, const Expr& head, const Expr& row0,
                           const Expr& col, const Expr& page) const {
    if (a.varlen)
      return {Expr::var(src == a.q ? kQStartVar : kKvStartVar) + row0, head, col};
    if (a.paged && src != a.q) return {page, head, row0 % Expr(a.page), col};
    return {b, head, row0, col};
  }

  // rows x padded D of head `head` from row `row0` of `src` into the span tensors `dst`
  // (slot origin `slot` x rows x the span's width): one box per 64-column chunk or
  // narrower span, completing on mbarrier `mbar`.
  // Paged KV: piece r (page_rows() keys) of the block at key `row0` reads page
  // BT[b, (row0 + r·rows) / page]; the slot is clamped into the table (a piece past the
  // sequence still forms a coordinate: its page is the last slot's, a live page or a dead
  // slot's number, which the map zero-fills when it lies outside the pool).
  std::string page_var(int64_t r) const { return std::string(kKvPageVar) + "_" + std::to_string(r); }
  Stmt page_let(const Expr& row0, int64_t r) const {
    const Expr last_slot = p.tensor(a.block_table).shape[1] - 1;
    return Stmt::LetLoad(page_var(r), a.block_table,
                         {flat(p.tensor(a.block_table),
                               {b, min((row0 + Expr(r * page_rows())) / Expr(a.page), last_slot)})});
  }
  Block page_lets(const Expr& row0) const {
    Block out;
    for (int64_t r = 0; r < BN / page_rows(); ++r) out.push_back(page_let(row0, r));
    return out;
  }

  // One TMA box of a block: its page piece and its place counted piece by piece (the
  // order spread_issue deals boxes in), and the load.
  struct BoxLoad {
    int64_t piece = 0, piece_order = 0;
    Stmt load;
  };
  std::vector<BoxLoad> box_loads(const std::vector<std::string>& dst, const std::string& src,
                                 const Expr& head, const Expr& row0, int64_t rows, const Expr& slot,
                                 const Expr& mbar) const {
    std::vector<BoxLoad> out;
    // Paged K/V: one box per page piece (its own page); otherwise the whole block.
    const bool paged = a.paged && src != a.q;
    const int64_t pr = paged ? page_rows() : rows;
    int64_t per_piece = 0;  // boxes a piece has, over every span
    for (const AttentionSpan& sp : t.spans) per_piece += sp.width / std::min(sp.width, kSpan);
    int64_t before = 0;     // boxes of a piece in the spans before this one
    for (size_t i = 0; i < t.spans.size(); ++i) {
      const AttentionSpan& sp = t.spans[i];
      const int64_t box = std::min(sp.width, kSpan);
      for (int64_t r = 0; r < rows / pr; ++r)
        for (int64_t j = 0; j < sp.width / box; ++j)
          out.push_back({r, r * per_piece + before + j,
                         Stmt::TmaLoad(dst[i], slot * (rows * sp.width) + Expr(r * pr * sp.width + j * box), src,
                                       coords(src, head, row0 + Expr(r * pr), Expr(sp.col + j * box),
                                              paged ? Expr::var(page_var(r)) : Expr(0)),
                                       dst[i] + "_tmap", mbar, pr * box * 2)});
      before += sp.width / box;
    }
    return out;
  }
  Block tma_block(const std::vector<std::string>& dst, const std::string& src, const Expr& head,
                  const Expr& row0, int64_t rows, const Expr& slot, const Expr& mbar) const {
    Block out;
    for (BoxLoad& b : box_loads(dst, src, head, row0, rows, slot, mbar)) out.push_back(std::move(b.load));
    return out;
  }

  // ATTN_LOAD_WARPS > 1: the boxes of a key block's K or V (tma_block's) spread over the
  // issuing warps, lane 0 of producer warps 0..L-1 (`load_warp`), one thread issuing
  // being instruction-bound at many small boxes (16-key pages). With at least L pieces
  // (paged: a block of several pages) piece r goes to warp r mod L, so each table entry is
  // read once; otherwise box n (counted piece by piece) to warp n mod L. Each warp's boxes
  // go under `if (load_warp == w)`, its table reads first (all in flight together). Every
  // box completes on the one full barrier, which the first warp arms with the whole half
  // block's bytes: a box may land before that arrival (the transaction count runs negative
  // within the phase, which cannot complete before the arrival).
  Block spread_issue(const std::vector<std::string>& dst, const std::string& src,
                     const Expr& head, const Expr& row0, const Expr& slot, const Expr& mbar) const {
    const bool paged = a.paged && src != a.q;
    const int64_t pieces = BN / (paged ? page_rows() : BN);
    std::vector<BoxLoad> boxes = box_loads(dst, src, head, row0, BN, slot, mbar);
    std::stable_sort(boxes.begin(), boxes.end(),
                     [](const BoxLoad& x, const BoxLoad& y) { return x.piece_order < y.piece_order; });
    std::vector<Block> reads(size_t(t.load_warps)), loads(size_t(t.load_warps));
    std::vector<std::vector<bool>> has_page(size_t(t.load_warps), std::vector<bool>(size_t(pieces)));
    for (BoxLoad& bx : boxes) {
      const size_t w = size_t((pieces >= t.load_warps ? bx.piece : bx.piece_order) % t.load_warps);
      if (paged && !has_page[w][size_t(bx.piece)]) {
        has_page[w][size_t(bx.piece)] = true;
        reads[w].push_back(page_let(row0, bx.piece));
      }
      loads[w].push_back(std::move(bx.load));
    }
    Block out;
    for (size_t w = 0; w < loads.size(); ++w) {
      if (loads[w].empty()) continue;
      reads[w].insert(reads[w].end(), loads[w].begin(), loads[w].end());
      out.push_back(Stmt::If(Expr::make(Expr::Kind::Eq, Expr::var("load_warp"), Expr(int64_t(w))),
                             std::move(reads[w])));
    }
    return out;
  }

  // ATTN_PERSISTENT=1: the units (query block, head, batch), nq·Hq·B of them, walked by
  // grid() CTAs: CTA c takes units c, c + P, c + 2P, .. (P the grid). Without a mask the
  // query block runs fastest (consecutive units share a head's K and V in L2). Causal,
  // longest first within sections of G (head, batch) pairs: the query block slowest and
  // from the last (most keys) down, the section's pairs within it, so a CTA's units shrink
  // as it goes through a section (LPT). G = causal_section(): as many pairs as keep their K
  // and V within l2_budget_ (32 MB of the H100's 50: the target's L2 x 0.64), so the next
  // query block's units (the same keys, a block fewer) find them in L2 — over all the pairs
  // at once the walk re-read K and V from DRAM once per query block.
  Expr query_blocks() const { return ceil_div(a.q_cap, Expr(BM)); }
  // Varlen without a mask walks its units in packed order: sequence by sequence, each
  // sequence's heads in turn, each head's query blocks fastest (consecutive units share a
  // head's K and V in L2, as the dense walk's). A unit is a slot of a numbering with no
  // table: sequence b owns slots [start_b, start_b+1) per head, start_b = q_start_b / BM + b
  // (cumulative rows from cu_seqlens_q), which is at least its ceil(rows / BM) query blocks
  // and at most one more, so the walk skips at most one unit per (sequence, head) — the
  // box order (max_seqlen_q's query blocks for every sequence) skips every query block a
  // short sequence lacks, and the static stride dealt those skips to the same CTAs
  // (measured 1.44-1.57x its padded batch on the H200, against 1.31x for one CTA per
  // query block). The producer finds b by a forward scan from the CTA's last sequence
  // (its units only grow), one load of cu_seqlens_q per sequence passed.
  // Causal varlen takes the same numbering with each sequence's units longest first (its
  // query blocks from the last down, the heads fastest: packed_coords) where it has fewer
  // units than the box order — both orders hold the same real units, so fewer units is
  // fewer skipped ones, each an atomic and three dependent loads on the producer's path
  // (H200 2026-11-29, vs_pad box / packed: 4096,2048,..,128 1.222 / 1.178, 1023,777,3001,
  // 129,2048,1500 1.216 / 1.191, 8192 + 512 x 8 1.126 / 1.094; but 1024 x 8, which the box
  // order walks without a skip, 1.070 / 1.087, and 128 x 32 1.255 / 1.413: one query block
  // each, every second packed slot skipped). With a run-time token count the packed order
  // (at most one skip per sequence and head). Not with three consumer warpgroups: the
  // producer's 24 registers then spilled 8 B under the scan (the 3 x 112 tile).
  bool packed_order() const {
    if (!t.persistent || !a.varlen) return false;
    if (a.causal == Causal::None) return true;
    if (t.warpgroups > 2) return false;
    const Expr packed = packed_units(), box = box_units();
    return !packed.is_const() || !box.is_const() || packed.const_value() < box.const_value();
  }
  Expr q_tokens() const { return p.tensor(a.q).shape[0]; }
  Expr packed_units() const { return (q_tokens() / Expr(BM) + a.B) * a.Hq; }
  Expr box_units() const { return query_blocks() * a.Hq * a.B; }
  Expr units() const { return packed_order() ? packed_units() : box_units(); }
  Expr grid() const { return min(units(), Expr(t.ctas)); }
  // Causal units differ in length, and the stride hands CTA 0 the longest unit of every
  // round: the rounds alternate direction instead (round r: CTA c takes unit r P + c for
  // even r, r P + P - 1 - c for odd r), so a CTA that took a round's longest unit takes
  // the next round's shortest. The last, partial round (units % P of them) reaches CTAs
  // 0.. of an even round and P - 1.. of an odd one.
  bool snake() const { return lpt_order(); }
  // The longest-first order (query block slowest, from the last down): causal (varlen
  // under the walk: within each sequence, packed_coords), and varlen on the plain grid —
  // only the long sequences have the high query blocks, and their units carry the most keys.
  bool lpt_order() const { return a.causal != Causal::None || (a.varlen && !packed_order()); }
  Expr units_for_cta() const {
    const Expr c = Expr::var("blockIdx.x");
    if (!snake()) return (units() - c + grid() - 1) / grid();
    const Expr rounds = units() / grid(), rem = units() % grid();
    const Expr even = Expr::make(Expr::Kind::Eq, rounds % 2, Expr(0));
    const Expr odd = Expr::make(Expr::Kind::Eq, rounds % 2, Expr(1));
    return rounds + ((even && c < rem) || (odd && grid() - 1 - c < rem));
  }
  // The section's (head, batch) pairs: the largest divisor of Hq·B whose pairs' K and V
  // (Sk x D x 2 x 2 bytes per KV head, shared by `group` query heads) fit l2_budget_; all
  // of them where a size is symbolic. Varlen (causal: the box order) counts max_seqlen_q
  // keys per sequence — its own key counts are known only at run time, and prefill's are
  // its query counts — so a section is the pairs of a few sequences: over all of them
  // at once (8 sequences of 1024, 16 heads: 64 MB of K and V) each query block's units
  // re-read every key block from DRAM.
  Expr causal_section() const {
    const Expr hb = a.Hq * a.B, keys = a.varlen ? a.q_cap : a.Sk;
    if (!hb.is_const() || !keys.is_const() || !a.group.is_const()) return hb;
    const int64_t pairs = hb.const_value(), g = std::max<int64_t>(1, a.group.const_value());
    const int64_t kv = keys.const_value() * Dp * 2 * 2;
    int64_t best = 1;
    for (int64_t d = 1; d <= pairs; ++d)
      if (pairs % d == 0 && (d + g - 1) / g * kv <= l2_budget_) best = d;
    return Expr(best);
  }
  // The static schedule's unit t_i of this CTA.
  Expr static_unit(const Expr& t_i) const {
    const Expr c = Expr::var("blockIdx.x");
    return snake() ? t_i * grid() + c + t_i % 2 * (grid() - 1 - c - c) : c + t_i * grid();
  }
  Block persistent_unit_lets(const Expr& t_i) const {
    Block out = {Stmt::Let("unit", static_unit(t_i))};
    Block coords = unit_coords();
    out.insert(out.end(), coords.begin(), coords.end());
    return out;
  }
  // qb, h, b of unit `unit` (a let): the order the static stride and the dynamic counter
  // hand the units out in.
  Block unit_coords() const {
    const Expr u = Expr::var("unit"), nq = query_blocks();
    Block out;
    if (packed_order()) {
      // The consumers' copy: the producer found the unit's sequence and handed b, h, qb over
      // (unit_s_[9..11]) with the unit.
      return {Stmt::LetLoad("b", unit_s_, {Expr(9)}), Stmt::LetLoad("h", unit_s_, {Expr(10)}),
              Stmt::LetLoad("qb", unit_s_, {Expr(11)})};
    }
    if (!lpt_order()) {
      out.insert(out.end(), {Stmt::Let("qb", u % nq), Stmt::Let("h", u / nq % a.Hq),
                             Stmt::Let("b", u / (nq * a.Hq))});
    } else {
      // hb = section·G + the pair within it; qb from the last down within the section
      // (one section: u / G and u % G).
      const Expr G = causal_section();
      const Expr pairs = a.Hq * a.B;  // causal_section() returns it where it is symbolic
      const bool one = !G.is_const() || !pairs.is_const() || G.const_value() == pairs.const_value();
      const Expr r = one ? u : u % (G * nq);
      const Expr hb = one ? u % G : u / (G * nq) * G + r % G;
      out.insert(out.end(), {Stmt::Let("qb", nq - 1 - r / G), Stmt::Let("h", hb % a.Hq),
                             Stmt::Let("b", hb / a.Hq)});
    }
    return out;
  }

  // The packed order's sequence of unit `unit` (producer): the last b with start_b <= unit /
  // Hq, scanned forward from the CTA's cursor (unit_s_[8], its previous unit's sequence).
  Block packed_sequence() const {
    const Expr bj = Expr::var("pk_b"), next_q = Expr::var("pk_next");
    const Expr slot = Expr::var("unit") / a.Hq;
    Block step = {Stmt::LetLoad("pk_b", unit_s_, {Expr(8)}),
                  Stmt::LetLoad("pk_next", a.cu_q, {flat(p.tensor(a.cu_q), {bj + 1})}),
                  Stmt::BreakIf((a.B <= bj + 1) || (slot < next_q / Expr(BM) + bj + 1)),
                  Stmt::WriteInt(unit_s_, {Expr(8)}, bj + 1)};
    Stmt scan = Stmt::For("pk_j", a.B, LoopKind::Reduce, "pk_j", std::move(step));
    scan.no_unroll = true;
    return {std::move(scan), Stmt::LetLoad("b", unit_s_, {Expr(8)})};
  }
  // Then, with the sequence's q_start and q_end bound: the unit's head and query block within
  // the sequence's slots (span_b of them per head): without a mask head by head, the query
  // blocks fastest; causal the query block slowest and from the last down (the sequence's
  // longest units first; its slot past the rows, if any, first and skipped), the heads
  // fastest. `pk_r` < 0, h >= Hq or qb < 0 only past the last sequence's slots or with
  // cu_seqlens_q out of order: the unit is skipped (real_unit).
  Block packed_coords() const {
    const Expr qs = Expr::var(kQStartVar), qe = Expr::var(kQEndVar), r = Expr::var("pk_r");
    const Expr span = max(qe / Expr(BM) - qs / Expr(BM) + 1, Expr(1)), sp = Expr::var("pk_span");
    Block out = {Stmt::Let("pk_r", Expr::var("unit") - (qs / Expr(BM) + b) * a.Hq), Stmt::Let("pk_span", span)};
    if (a.causal == Causal::None)
      out.insert(out.end(), {Stmt::Let("h", r / sp), Stmt::Let("qb", r % sp)});
    else
      out.insert(out.end(), {Stmt::Let("h", r % a.Hq), Stmt::Let("qb", sp - 1 - r / a.Hq)});
    return out;
  }

  Expr query_block() const {
    const Expr x = Expr::var("blockIdx.x");
    if (a.causal == Causal::None) return x;
    return ceil_div(a.q_cap, Expr(BM)) - 1 - x;  // q_cap: Sq, or varlen's max_seqlen_q
  }

  // Row of value r2 (0: row g, 1: g + 8) of this thread's accumulator fragments.
  Expr row_of(const Expr& r2) const { return qb * BM + w * 16 + lane / 4 + r2 * 8; }

  // The copy-out (ATTN_STMATRIX without the TMA store): after `meet` (each chunk was written
  // by stmatrix from other lanes), the warpgroup's 64 rows of O leave its buffer in 16-byte
  // chunks, consecutive threads along a row — whole 32-byte sectors, where the fragments'
  // 4-byte stores fill half-sectors and a warp's store touches 8 rows — under the row test
  // (rows past Sq: for varlen past the sequence, whose next rows are another sequence's);
  // columns past D are not copied. `opaque_zero` as in the stores to the buffer (under the
  // walk the shared addresses would depend on the thread alone and be hoisted).
  Block copy_out(const Stmt& meet, const Expr& opaque_zero) const {
    constexpr int64_t kChunk = 8, kThreads = 128;
    Block out = {meet};
    for (size_t sp = 0; sp < t.spans.size(); ++sp) {
      const int64_t wd = t.spans[sp].width, per_row = t.spans[sp].real / kChunk,
                    chunks = 64 * per_row;
      const std::string c = "o_c" + std::to_string(sp), e = "o_e" + std::to_string(sp),
                        v = "o_v" + std::to_string(sp);
      const Expr ev = Expr::var(e), row = ev / per_row, col = ev % per_row * kChunk;
      Stmt ld = Stmt::Load(v, o_s[sp], {(wg * 64 + row + opaque_zero) * wd + col});
      ld.dst_index = {Expr(0)};
      ld.width = int(kChunk);
      const Expr i = qb * BM + wg * 64 + row;
      Stmt st = Stmt::Write("out", {flat(p.tensor("out"), a.q_index(b, h, i, Expr(t.spans[sp].col) + col))},
                            val(v, {Expr(0)}));
      st.width = int(kChunk);
      Expr keep = i < a.Sq;
      if (chunks % kThreads != 0) keep = ev < chunks && keep;
      out.push_back(Stmt::For(c, Expr((chunks + kThreads - 1) / kThreads), LoopKind::Parallel, c,
                              {Stmt::Let(e, Expr::var(c) * kThreads + tid % kThreads),
                               Stmt::Alloc(v, {Expr(kChunk)}), Stmt::If(keep, {ld, st})}));
    }
    return out;
  }

  Block build(const WarpAtom& s_mma, const std::vector<WarpAtom>& pv_mma) {
    const Expr n2 = Expr::var("n2"), hf = Expr::var("hf"), e = Expr::var("e"),
               r2 = Expr::var("r2"), d_k = Expr::var("d_k"), kk = Expr::var("kk"),
               dn = Expr::var("dn");
    const double c = a.scale * M_LOG2E;
    const Expr hk = a.kv_head(h);
    const Expr elected = Expr::make(Expr::Kind::Eq, tid, Expr(0));
    // ATTN_PERSISTENT=1: the unit's coordinates are lets of the walk's unit index (both
    // arms open their unit loop with them); otherwise of the CTA's.
    const bool persist = t.persistent;
    // The walk's stream (causal, or the dynamic schedule): units of differing lengths, or
    // an order known only as it is fetched, so the ring's block count at a unit's start
    // (`ring_base`) is the producer's running count, which it hands to the consumers with
    // the unit's index through shared memory (unit_s_: [unit, ring_base, the producer's
    // own running count]); see "stream" below.
    // Varlen: every unit's sequence has its own lengths, so its units differ too.
    // Paged KV: each unit's sequence has its own key count.
    const bool stream = streams();
    const Expr t_i = Expr::var("t_i");
    const Block unit_lets = persist ? (stream ? Block{} : persistent_unit_lets(t_i))
                                    : Block{Stmt::Let("qb", query_block()),
                                            Stmt::Let("h", Expr::var("blockIdx.y")),
                                            Stmt::Let("b", Expr::var("blockIdx.z"))};
    Block body = persist ? Block{} : unit_lets;
    // The consumers' thread lets. With the overlap under the walk's stream (causal, or the
    // dynamic schedule) they are bound in the consumer arm after its setmaxnreg: bound at
    // the top, ptxas (NVRTC 13.0) kept the warp index live across the arms' split and
    // spilled it (4 B stored at entry, loaded once after setmaxnreg, SASS; D = 256: the
    // spill that kept the overlap's default off under the causal walk and the dynamic
    // schedule). Elsewhere at the top, as measured (the defaults' kernels unchanged).
    const Block thread_lets = {Stmt::Let("w", tid / 32), Stmt::Let("wg", tid / 128),
                               Stmt::Let("lane", tid % 32)};
    const bool lets_in_consumers = t.producer && t.overlap && stream;
    if (!lets_in_consumers) body.insert(body.end(), thread_lets.begin(), thread_lets.end());
    // Paged KV: the sequence's key count; varlen: its rows of Q and K. Read by every
    // thread before anything uses Sq or Sk: once per CTA at the top, or under the walk
    // (varlen) per unit in both arms, after the unit's coordinates.
    Block seq_lets;
    if (a.paged)
      seq_lets.push_back(Stmt::LetLoad(kKvLenVar, a.seqlens, {flat(p.tensor(a.seqlens), {b})}));
    if (a.varlen)
      seq_lets.insert(seq_lets.end(),
                      {Stmt::LetLoad(kQStartVar, a.cu_q, {flat(p.tensor(a.cu_q), {b})}),
                       Stmt::LetLoad(kQEndVar, a.cu_q, {flat(p.tensor(a.cu_q), {b + 1})}),
                       Stmt::LetLoad(kKvStartVar, a.cu_k, {flat(p.tensor(a.cu_k), {b})}),
                       Stmt::LetLoad(kKvEndVar, a.cu_k, {flat(p.tensor(a.cu_k), {b + 1})})});
    // The sequence's lengths, once: every bound and mask below names them.
    if (a.varlen) {
      seq_lets.push_back(Stmt::Let("seq_q", a.Sq));
      a.Sq = Expr::var("seq_q");
    }
    if (a.paged || a.varlen) {
      seq_lets.push_back(Stmt::Let("seq_k", a.Sk));
      a.Sk = Expr::var("seq_k");
    }
    if (!persist) body.insert(body.end(), seq_lets.begin(), seq_lets.end());
    // Varlen: a query block at or past its sequence's rows (the grid and the walk's units
    // are sized by max_seqlen_q) has nothing to do.
    const Expr real_unit = packed_order() ? (qb * BM < a.Sq) && (h < a.Hq) && (Expr(0) <= Expr::var("pk_r")) &&
                                                (Expr(0) <= qb)
                                          : qb * BM < a.Sq;
    // Varlen under the walk: the producer skips such units (no hand-off), so the
    // hand-offs are counted apart from t_i (`handed`, unit_s_[3], the producer's), and a
    // last hand-off of unit = units() ends the consumers' walk, as the dynamic schedule's.
    const bool skip_units = persist && a.varlen;
    const bool stop_handoff = t.dynamic || skip_units;
    // The consumers' copy of the unit's sequence (varlen under the walk): the producer read
    // the cumulative lengths for its skip test and hands the unit's first rows and lengths
    // over with it (unit_s_[4..7]: q_start, seq_q, kv_start, seq_k), so the consumers' unit
    // starts with shared reads, not a global round trip after the hand-off's wait. (The
    // lengths, not the ends: the producer's q_end and kv_end then die at its skip test —
    // under the dynamic packed walk they were the two registers past its 24 that ptxas
    // spilled, 8 B.)
    const char* const seq_vars[4] = {kQStartVar, "seq_q", kKvStartVar, "seq_k"};
    Block seq_lets_handed;
    if (skip_units)
      for (int i = 0; i < 4; ++i)
        seq_lets_handed.push_back(Stmt::LetLoad(seq_vars[i], unit_s_, {Expr(4 + i)}));
    // Paged KV under the walk likewise: the unit's key count (unit_s_[3]), which the
    // producer read from seqlens_k for its loads.
    if (persist && a.paged) seq_lets_handed.push_back(Stmt::LetLoad("seq_k", unit_s_, {Expr(kPagedKeysSlot)}));
    const size_t lets = body.size();
    auto append = [&](Block x) { body.insert(body.end(), x.begin(), x.end()); };
    const int64_t kv_bytes = 2 * BN * Dp * 2;
    const size_t n_spans = t.spans.size();

    // 2. Barriers. Mbarrier 0: Q; 1 + s: ring slot s's K; 1 + S + s: its V (S =
    // KV_STAGES), so S = Q K^T waits for K alone; with the producer (ATTN_PRODUCER=1),
    // 1 + 2S + s: slot s released, one arrival per consumer warpgroup (with ATTN_OVERLAP
    // its V; K's release below).
    const int64_t S = t.kv_stages;
    const bool producer = t.producer;
    const int64_t c_threads = 128 * t.warpgroups;
    // ATTN_PERSISTENT=1: 1 + 3S: Q's slot released (one arrival per consumer warpgroup
    // once its last S retired, or with O in Q's slot once its TMA store read it).
    // ATTN_OVERLAP=1: the slot's K and V are released apart (FlashAttention-3's two
    // pipelines): 1 + 2S + s is V's release, 1 + 3S (+1 with the walk) + s K's, one arrival
    // per consumer warpgroup each. K is free once S retired (wgmma.wait 1), V only once P V
    // of the block retired, at the end of the next block's softmax; with one release for
    // both, block kb + S's K waited for the P V of block kb, so with two slots the load of
    // the next block's K started just before its S was issued and nothing hid it.
    const bool split_release = producer && t.overlap;
    const int64_t empty_k_base = 1 + 3 * S + (persist ? 1 : 0);
    k.mbarriers = int(1 + (producer ? 3 : 2) * S + (persist ? 1 : 0) + (split_release ? S : 0));
    auto full_k = [&](const Expr& slot) { return Expr(1) + slot; };
    auto full_v = [&](const Expr& slot) { return Expr(1 + S) + slot; };
    auto empty = [&](const Expr& slot) { return Expr(1 + 2 * S) + slot; };
    const Expr q_empty = Expr(1 + 3 * S);
    auto empty_k = [&](const Expr& slot) { return split_release ? Expr(empty_k_base) + slot : empty(slot); };
    {
      Block init;
      for (int i = 0; i < k.mbarriers; ++i)
        init.push_back(Stmt::MbarInit(Expr(i), i > 2 * S ? int(t.warpgroups) : 1));
      init.push_back(Stmt::FenceMbarInit());
      append({Stmt::If(elected, std::move(init)), Stmt::Barrier()});
    }
    const Expr rows_end = min(a.Sq, (qb + 1) * BM);
    const Expr key_blocks = ceil_div(a.keys_for_rows(rows_end), Expr(BN));
    // The ring: key block kbx of the unit is the ring's block kbx + base, in slot
    // (kbx + base) % S at phase (kbx + base) / S % 2. One CTA per unit: base 0. The
    // persistent walk keeps the ring turning across units: without a mask and with the
    // static schedule every unit has the same key blocks (base = t_i key_blocks); causal
    // units differ, and the dynamic schedule's order is known only as the units come, so
    // there base is the blocks the CTA streamed before the unit (`ring_base`): the
    // producer keeps the running count and hands it to the consumers with the unit. No
    // unit is padded: a unit of 1 block costs 1 block's round trip.
    const Expr base = stream ? Expr::var("ring_base") : persist ? t_i * key_blocks : Expr(0);
    auto slot_of = [&](const Expr& kbx) { return (kbx + base) % S; };
    auto phase_of = [&](const Expr& kbx) { return (kbx + base) / S % 2; };
    // The phase of the slot's release that block kbx waits for: block kbx - S's.
    auto release_phase = [&](const Expr& kbx) { return ((kbx + base) / S + 1) % 2; };
    // The producer waits for block kbx's slot unless it was never used: the ring's first S
    // blocks.
    auto slot_used = [&](const Expr& kbx) { return Expr(S) <= kbx + base; };
    // Key block `block`'s K (or V) boxes into ring slot `slot`, with the bytes they bring.
    // ATTN_LOAD_WARPS > 1: the first issuing warp arms the barrier, each warp issues its
    // boxes (with their table reads: spread_issue).
    const bool spread = t.load_warps > 1;
    const Expr first_load_warp = Expr::make(Expr::Kind::Eq, Expr::var("load_warp"), Expr(0));
    auto half_issue = [&](bool keys, const Expr& block, const Expr& slot, Block& x) {
      const Expr full = keys ? full_k(slot) : full_v(slot);
      if (spread) {
        x.push_back(Stmt::If(first_load_warp, {Stmt::MbarArriveExpectTx(full, kv_bytes / 2)}));
        for (Stmt& st : spread_issue(keys ? k_s : v_s, keys ? a.k : a.v, hk, block * BN, slot, full))
          x.push_back(st);
        return;
      }
      x.push_back(Stmt::MbarArriveExpectTx(full, kv_bytes / 2));
      for (Stmt& st : tma_block(keys ? k_s : v_s, keys ? a.k : a.v, hk, block * BN, BN, slot, full))
        x.push_back(st);
    };
    auto kv_issue = [&](const Expr& block, const Expr& slot) {
      Block x = a.paged && !spread ? page_lets(block * BN) : Block{};
      half_issue(true, block, slot, x);
      half_issue(false, block, slot, x);
      return x;
    };
    Block q_issue = {Stmt::MbarArriveExpectTx(Expr(0), BM * Dp * 2)};
    for (Stmt& st : tma_block(q_s, a.q, h, qb * BM, BM, Expr(0), Expr(0))) q_issue.push_back(st);
    // ATTN_PRODUCER=1: the producer's loop (its first thread): block kb into slot kb % S
    // once the consumers released the slot's previous block kb - S (phase kb / S - 1 of
    // its empty barrier). ATTN_PRODUCER=0: thread 0 issues Q and blocks 0 .. S - 2 here.
    // ATTN_PERSISTENT=1, per unit: block 0 first (with the overlap its K alone; its slot
    // frees while the consumers finish the unit before), then Q once they released Q's
    // slot, then the other blocks (rest_loop, below).
    Block producer_loop;
    if (producer) {
      auto fill = [&](const Expr& kbx) {
        const Expr slot = slot_of(kbx);
        Block f = {Stmt::If(slot_used(kbx), {Stmt::MbarWait(empty(slot), release_phase(kbx))})};
        Block issue = kv_issue(kbx, slot);
        f.insert(f.end(), issue.begin(), issue.end());
        return f;
      };
      // With the split release (the overlap): one half of block kbx, K once its slot's K was
      // released, V once its V was.
      auto fill_half = [&](bool keys, const Expr& kbx) {
        const Expr slot = slot_of(kbx);
        Block f = a.paged && !spread ? page_lets(kbx * BN) : Block{};
        f.push_back(Stmt::If(slot_used(kbx), {Stmt::MbarWait(keys ? empty_k(slot) : empty(slot),
                                                             release_phase(kbx))}));
        half_issue(keys, kbx, slot, f);
        return f;
      };
      // A unit's loads: its first part (before Q: block 0, or block 0's K), then the rest.
      // With the split release K runs one block ahead of V — K of block kb + 1, then V of
      // block kb — the order the overlap reads them in (S of kb + 1 is issued before P V of
      // kb; FlashAttention-3's producer order). In block order (K and V of kb, then of
      // kb + 1) the wait for V's slot, released only after P V, held back the next K behind
      // it: under ncu (H200, 2026-11-29, D = 128 at 1k without a mask) 7.5 % of the
      // consumers' stall samples sat in the wait for K at the top of the key loop.
      const Block first_fill = split_release ? fill_half(true, Expr(0)) : fill(Expr(0));
      auto rest_loop = [&]() {
        if (!split_release)
          return Stmt::For("kb", max(key_blocks, Expr(1)) - 1, LoopKind::Reduce, "kb", fill(kb + 1));
        Block step = {Stmt::If(kb + 1 < key_blocks, fill_half(true, kb + 1))};
        const Block v = fill_half(false, kb);
        step.insert(step.end(), v.begin(), v.end());
        return Stmt::For("kb", key_blocks, LoopKind::Reduce, "kb", std::move(step));
      };
      // One copy of the loop (#pragma unroll 1): the producer runs on 24 registers, and
      // NVRTC's unrolled copies at a small constant trip count (7 or 8 key blocks) spilled
      // 40-230 B (D = 128 at 1024 keys: 40 B; D = 96: 144 B, one box more per K and V).
      // The consumers' loop was not unrolled there (the same cubin with #pragma unroll 1).
      if (!persist) {
        producer_loop = spread ? Block{Stmt::If(first_load_warp, q_issue)} : q_issue;
        if (split_release) producer_loop.push_back(Stmt::If(Expr(0) < key_blocks, first_fill));
        Stmt loop = split_release ? rest_loop()
                                  : Stmt::For("kb", key_blocks, LoopKind::Reduce, "kb", fill(kb));
        loop.no_unroll = true;
        producer_loop.push_back(std::move(loop));
      } else if (!stream) {
        producer_loop = unit_lets;
        producer_loop.push_back(Stmt::If(Expr(0) < key_blocks, first_fill));
        // Q: the first issuing warp alone (ATTN_LOAD_WARPS: the others issue K and V only).
        Block q_part = {Stmt::If(Expr(0) < t_i, {Stmt::MbarWait(q_empty, (t_i + 1) % 2)})};
        q_part.insert(q_part.end(), q_issue.begin(), q_issue.end());
        if (spread) q_part = {Stmt::If(first_load_warp, std::move(q_part))};
        producer_loop.insert(producer_loop.end(), q_part.begin(), q_part.end());
        Stmt loop = rest_loop();
        loop.no_unroll = true;
        producer_loop.push_back(std::move(loop));
        Stmt walk = Stmt::For("t_i", units_for_cta(), LoopKind::Reduce, "t_i", std::move(producer_loop));
        walk.no_unroll = true;
        producer_loop = {std::move(walk)};
      } else {
        // The stream: per unit the producer takes the unit (static: the stride's; dynamic:
        // blockIdx.x first, then the work counter's next plus the grid, LPT order), reads
        // its running block count (unit_s_[2], its own), issues block 0 into the ring, waits
        // until the consumers released Q's slot (they read the unit before: their arrival
        // follows their first S, or the warpgroup's meeting), then stores the unit and its
        // base for them (unit_s_[0..1]) before the arrival on Q's barrier that publishes
        // them (mbarrier arrive releases, the consumers' wait acquires), and issues the
        // rest. Dynamic: a unit past the last tells the consumers to stop (the same
        // hand-off, a plain arrival on Q's barrier) and ends the walk.
        const Expr u = Expr::var("unit"), ring_base = Expr::var("ring_base");
        const Expr done = Expr::make(Expr::Kind::Le, units(), u);
        const Expr handed = skip_units ? Expr::var("handed") : t_i;
        Block it;
        if (t.dynamic) {
          it.push_back(Stmt::LetFetchInc("fetched", work_counter_, {Expr(0)}, units(), Expr(0) < t_i));
          const Expr later = min(t_i, Expr(1));
          it.push_back(Stmt::Let("unit", later * (Expr::var("fetched") + grid()) +
                                             (Expr(1) - later) * Expr::var("blockIdx.x")));
        } else {
          it.push_back(Stmt::Let("unit", static_unit(t_i)));
        }
        const bool packed = packed_order();
        if (!packed) {
          const Block coords = unit_coords();
          it.insert(it.end(), coords.begin(), coords.end());
        }
        it.push_back(Stmt::LetLoad("ring_base", unit_s_, {ring_count_slot()}));
        if (skip_units) it.push_back(Stmt::LetLoad("handed", unit_s_, {Expr(3)}));
        auto q_free_after = [&](const Expr& n) {
          return Stmt::If(Expr(0) < n, {Stmt::MbarWait(q_empty, (n + 1) % 2)});
        };
        const Stmt q_free = q_free_after(handed);
        // The hand-off and Q: by the first issuing warp alone (ATTN_LOAD_WARPS: the others
        // issue their share of K and V and keep their own running count).
        Block hand_off = {q_free, Stmt::WriteInt(unit_s_, {Expr(0)}, u),
                          Stmt::WriteInt(unit_s_, {Expr(1)}, ring_base)};
        if (skip_units)
          for (int i = 0; i < 4; ++i)
            hand_off.push_back(Stmt::WriteInt(unit_s_, {Expr(4 + i)}, Expr::var(seq_vars[i])));
        if (a.paged) hand_off.push_back(Stmt::WriteInt(unit_s_, {Expr(kPagedKeysSlot)}, Expr::var("seq_k")));
        if (packed) {
          const Expr handed_coords[3] = {b, h, qb};
          for (int i = 0; i < 3; ++i)
            hand_off.push_back(Stmt::WriteInt(unit_s_, {Expr(9 + i)}, handed_coords[i]));
        }
        hand_off.insert(hand_off.end(), q_issue.begin(), q_issue.end());
        if (spread) hand_off = {Stmt::If(first_load_warp, std::move(hand_off))};
        Block work = {Stmt::If(Expr(0) < key_blocks, first_fill)};
        work.insert(work.end(), hand_off.begin(), hand_off.end());
        Stmt loop = rest_loop();
        loop.no_unroll = true;
        work.push_back(std::move(loop));
        work.push_back(Stmt::WriteInt(unit_s_, {ring_count_slot()}, ring_base + key_blocks));
        if (skip_units) {
          work.push_back(Stmt::WriteInt(unit_s_, {Expr(3)}, handed + 1));
          work = {Stmt::If(real_unit, std::move(work))};
        }
        Expr trips = units_for_cta();
        if (t.dynamic) {
          Block stop = {q_free, Stmt::WriteInt(unit_s_, {Expr(0)}, u)};
          // Varlen: a CTA whose every unit was skipped never wrote the base the
          // consumers read with the stop.
          if (skip_units) stop.push_back(Stmt::WriteInt(unit_s_, {Expr(1)}, Expr(0)));
          stop.push_back(Stmt::MbarArrive(Expr(0)));
          it.push_back(Stmt::If(done, std::move(stop)));
          it.push_back(Stmt::BreakIf(done));
          // Its own first unit, the units no other CTA takes, the stop: a bound the break
          // ends early.
          trips = units() - grid() + 2;
        }
        // The unit's sequence (varlen), after the stop: a unit past the last has none.
        if (packed) {
          const Block find = packed_sequence();
          it.insert(it.end(), find.begin(), find.end());
        }
        it.insert(it.end(), seq_lets.begin(), seq_lets.end());
        if (packed) {
          const Block coords = packed_coords();
          it.insert(it.end(), coords.begin(), coords.end());
        }
        it.insert(it.end(), work.begin(), work.end());
        Stmt walk = Stmt::For("t_i", trips, LoopKind::Reduce, "t_i", std::move(it));
        walk.no_unroll = true;
        producer_loop = {Stmt::WriteInt(unit_s_, {ring_count_slot()}, Expr(0))};
        if (skip_units) producer_loop.push_back(Stmt::WriteInt(unit_s_, {Expr(3)}, Expr(0)));
        if (packed) producer_loop.push_back(Stmt::WriteInt(unit_s_, {Expr(8)}, Expr(0)));
        producer_loop.push_back(std::move(walk));
        if (skip_units && !t.dynamic) {
          // The static walk's stop, once the CTA's units are done.
          const Expr n = Expr::var("handed_all");
          producer_loop.insert(producer_loop.end(),
                               {Stmt::LetLoad("handed_all", unit_s_, {Expr(3)}), q_free_after(n),
                                Stmt::WriteInt(unit_s_, {Expr(0)}, units()),
                                Stmt::WriteInt(unit_s_, {Expr(1)}, Expr(0)), Stmt::MbarArrive(Expr(0))});
        }
      }
    } else {
      Block first = q_issue;
      for (int64_t j = 0; j + 1 < S; ++j)
        first.push_back(Stmt::If(Expr(j) < key_blocks, kv_issue(Expr(j), Expr(j))));
      append({Stmt::If(elected, std::move(first))});
    }
    // The consumers' part, from here to the epilogue; under ATTN_PRODUCER=1 it becomes the
    // consumer arm.
    const size_t consumer_from = body.size();
    // O: per span, one flat array of the m64n{width} accumulator's width/2 values (value
    // 4 dn + e: column tile dn, the m16n8 C value e).
    for (size_t i = 0; i < n_spans; ++i) {
      const int64_t wd = t.spans[i].width;
      append({Stmt::Alloc(o_acc[i], {Expr(wd / 2)}),
              reg_loop("dn", wd / 8, {reg_loop("e", 4, {with_dst(Stmt::Init(o_acc[i], 0.0), {dn * 4 + e})})})});
    }
    append({Stmt::Alloc("m_i", {Expr(2)}), Stmt::Alloc("l_i", {Expr(2)}),
            reg_loop("r2", 2, {with_dst(Stmt::Init("m_i", kNegInf), {r2}),
                               with_dst(Stmt::Init("l_i", 0.0), {r2})}),
            });
    // The stream's consumers wait for Q's barrier before the unit's lets (below).
    if (!stream) append({Stmt::MbarWait(Expr(0), persist ? t_i % 2 : Expr(0))});

    // 3-6, per key block `kbx` and the S/P register array `sa`, as pieces the two
    // schedules below put in order.
    // 4. S = Q K^T into `sa` (issued, committed; not waited for): the k-steps of each
    // span in turn, scale-d 0 on the first span's first.
    auto s_issue = [&](const Expr& kbx, const std::string& sa) {
      Block x = {Stmt::MbarWait(full_k(slot_of(kbx)), phase_of(kbx)), Stmt::WgmmaFence()};
      for (size_t i = 0; i < n_spans; ++i) {
        const int64_t wd = t.spans[i].width;
        Stmt mma = Stmt::Atom(s_mma.id, sa,
                              {val(q_s[i], {wg * (64 * wd) + d_k * 16, Expr(wd), Expr(1)}),
                               val(k_s[i], {slot_of(kbx) * (BN * wd) + d_k * 16, Expr(1), Expr(wd)})});
        if (i == 0) mma.scale_d = Expr(0) < d_k;
        x.push_back(reg_loop("d_k", wd / 16, {mma}, LoopKind::Reduce));
      }
      x.push_back(Stmt::WgmmaCommit());
      return x;
    };
    // 5. Masks (only where the block reaches past Sk or past the first row's last key) and
    // the online softmax per row half r2, k:012's exp2 form: m, l and `sa` become the
    // block's P; alpha[r2] is O's rescale, applied here when `rescale`. `mask` false: a
    // block of the peeled loop's unmasked range (ATTN_PEEL_MASK), no mask code at all.
    // Per warpgroup (uniform over it): its first row keeps the fewest keys, so a
    // warpgroup whose first row keeps the block's last key masks nothing there (with
    // three warpgroups of 64 rows the CTA's diagonal band is 2-3 key blocks; each
    // warpgroup's is 1-2).
    auto reaches = [&](const Expr& kbx) {
      const Expr last = kbx * BN + (BN - 1);
      return (a.Sk <= last) || a.drops(qb * BM + wg * 64, last);
    };
    // Whether the mask can be needed in some block of some unit: not where the bound of
    // `reaches` over every key block and query block is 0.
    auto mask_needed = [&](const Expr& kbx) {
      std::map<std::string, Expr::Range> ranges;
      if (a.Sk.is_const()) ranges["kb"] = {0, (a.Sk.const_value() + BN - 1) / BN - 1};
      if (a.Sq.is_const()) ranges["qb"] = {0, (a.Sq.const_value() + BM - 1) / BM - 1};
      // (The overlap's loop runs block kb + 1: a range one wider, still a sound bound.)
      const auto never = reaches(kbx).bounds(ranges);
      return !(never && never->hi == 0);
    };
    const bool mask_possible = mask_needed(kb);
    auto softmax = [&](const Expr& kbx, const std::string& sa, bool rescale, bool mask = true) {
      Block out;
      if (mask) {
        const Expr i = row_of(e / 2);
        const Expr j = kbx * BN + n2 * 16 + hf * 8 + lane % 4 * 2 + e % 2;
        const Expr drop = (a.Sk <= j) || (a.drops(i, j) && a.has_keys(i));
        if (mask_needed(kbx))
          out = guarded(reaches(kbx), {reg_loop("n2", BN / 16, {reg_loop("hf", 2, {reg_loop("e", 4,
                    guarded(drop, {with_dst(Stmt::Init(sa, kNegInf), {n2, hf, e})}))})})});
      }
      const Expr v = r2 * 2 + e;
      const Operand s_v = val(sa, {n2, hf, v});
      auto each_score = [&](Block x) {
        return reg_loop("n2", BN / 16, {reg_loop("hf", 2, {reg_loop("e", 2, std::move(x))})});
      };
      Block row = {
          Stmt::Init("m_t", kNegInf),
          each_score({Stmt::Accum("m_t", s_v, ScalarOp::Max)}),
          Stmt::LaneReduce("m_q", ScalarOp::Max, val("m_t"), 4),
          Stmt::Compute("m_new", ScalarOp::Max, {val("m_i", {r2}), val("m_q")}),
          Stmt::Compute("m_diff", ScalarOp::Sub, {val("m_i", {r2}), val("m_new")}),
          Stmt::Compute("m_diff_c", ScalarOp::Mul, {val("m_diff"), Operand::constant(c)}),
          with_dst(Stmt::Compute("alpha", ScalarOp::Exp2, {val("m_diff_c")}), {r2}),
          with_dst(Stmt::Compute("m_i", ScalarOp::Max, {val("m_i", {r2}), val("m_q")}), {r2}),
          with_dst(Stmt::Accum("l_i", val("alpha", {r2}), ScalarOp::Mul), {r2}),
          Stmt::Compute("m_c", ScalarOp::Mul, {val("m_new"), Operand::constant(c)}),
          each_score({Stmt::Compute("s_c", ScalarOp::Mul, {s_v, Operand::constant(c)}),
                      Stmt::Compute("s_m", ScalarOp::Sub, {val("s_c"), val("m_c")}),
                      with_dst(Stmt::Compute(sa, ScalarOp::Exp2, {val("s_m")}), {n2, hf, v}),
                      with_dst(Stmt::Accum("l_i", s_v), {r2})}),
      };
      if (rescale)
        for (size_t i = 0; i < n_spans; ++i)
          row.push_back(reg_loop("dn", t.spans[i].width / 8, {reg_loop("e", 2, {with_dst(
              Stmt::Accum(o_acc[i], val("alpha", {r2}), ScalarOp::Mul), {dn * 4 + v})})}));
      out.push_back(reg_loop("r2", 2, std::move(row)));
      return out;
    };
    auto rescale_o = [&] {
      Block per_row;
      for (size_t i = 0; i < n_spans; ++i)
        per_row.push_back(reg_loop("dn", t.spans[i].width / 8, {reg_loop("e", 2, {with_dst(
            Stmt::Accum(o_acc[i], val("alpha", {r2}), ScalarOp::Mul), {dn * 4 + r2 * 2 + e})})}));
      return Block{reg_loop("r2", 2, std::move(per_row))};
    };
    // 6. O += P V with P = `sa` (issued, committed; not waited for): per k-step one wgmma
    // per span, N = the span's width, into the span's accumulator.
    auto pv_issue = [&](const Expr& kbx, const std::string& sa) {
      Block step;
      for (size_t i = 0; i < n_spans; ++i) {
        const int64_t wd = t.spans[i].width;
        step.push_back(Stmt::Atom(pv_mma[i].id, o_acc[i],
                                  {val(sa, {kk}), val(v_s[i], {slot_of(kbx) * (BN * wd) + kk * (16 * wd),
                                                               Expr(wd), Expr(1)})}));
      }
      return Block{Stmt::MbarWait(full_v(slot_of(kbx)), phase_of(kbx)), Stmt::WgmmaFence(),
                   reg_loop("kk", BN / 16, std::move(step), LoopKind::Reduce), Stmt::WgmmaCommit()};
    };
    // Serving forms: the block that holds the sequence's last key was loaded whole, so its
    // V rows past Sk are the next sequence's, the rest of the last page, or a page a clamped
    // slot names — memory whose values the caller does not promise (slack past
    // cu_seqlens_k[B], unwritten cache rows). P is 0 there, but 0 x NaN is NaN: once V has
    // landed, the consumer threads zero those rows of the slot (16 bytes a store), fence
    // them for the async proxy, and meet (a block barrier, or with the producer named
    // barrier W + 1 over the consumers; once before the zeroing too) before any P V reads
    // the slot. Only in that block (a CTA-uniform test); the dense form's rows past Sk are
    // TMA zero fill.
    auto clean_v = [&](const Expr& kbx) {
      if (!a.paged && !a.varlen) return Block{};
      const Stmt meet = producer ? Stmt::NamedBarrier(Expr(t.warpgroups + 1), int(c_threads))
                                 : Stmt::Barrier();
      // The first meeting orders the landed box before every thread's zeroing (each element
      // is zeroed by a thread that may not be the one whose wait retired the load).
      Block body = {Stmt::MbarWait(full_v(slot_of(kbx)), phase_of(kbx)), meet};
      // The slot's first row past the sequence (1..BN-1 in the block this runs in). Only the
      // rows from it on, 8 elements (16 bytes, within one 64-column swizzle chunk) per store:
      // the whole slot one element per thread and store (BN x width / threads stores under a
      // test each, #pragma unroll 1) cost every unit of a ragged sequence ~4 us on the H200:
      // varlen 1023 x 8 sequences 1.31x -> 1.16x the padded batch (1024 x 8: 1.10x), one
      // 3001-row sequence 1.16x -> 1.09x. (Each warpgroup zeroing alone to keep the
      // ping-pong's turns is a race the interpreter rejects: the other's P V may still read.)
      const Expr first = max(a.Sk - kbx * BN, Expr(0));
      body.push_back(Stmt::Alloc("vz_zero", {Expr(8)}));
      body.push_back(reg_loop("vz_i", 8, {with_dst(Stmt::Init("vz_zero", 0.0), {Expr::var("vz_i")})}));
      for (size_t i = 0; i < n_spans; ++i) {
        const int64_t wd = t.spans[i].width, n = BN * wd, per_row = wd / 8;
        const std::string c = "vz_c" + std::to_string(i), ev = "vz_e" + std::to_string(i);
        const Expr e = Expr::var(ev), count = (Expr(BN) - first) * per_row;
        Stmt store = Stmt::Write(v_s[i], {slot_of(kbx) * n + (first + e / per_row) * wd + e % per_row * 8},
                                 val("vz_zero", {Expr(0)}));
        store.width = 8;
        Stmt zero = Stmt::For(c, (count + Expr(c_threads - 1)) / c_threads, LoopKind::Parallel, c,
                              {Stmt::Let(ev, Expr::var(c) * c_threads + tid),
                               Stmt::If(e < count, {std::move(store)})});
        // One copy (#pragma unroll 1): unrolled, its addresses spilled 72 B in the three
        // warpgroups' 160 registers (D = 96, 144 keys; the scalar form).
        zero.no_unroll = true;
        body.push_back(std::move(zero));
      }
      body.push_back(Stmt::FenceProxyAsync());
      body.push_back(meet);
      return Block{Stmt::If(a.Sk < (kbx + 1) * BN, std::move(body))};
    };
    // Block kbx's slot handed back (ATTN_PRODUCER=1): this warpgroup's first thread arrives.
    auto release = [&](const Expr& kbx) {
      return producer ? Block{Stmt::If(tid % 128 < 1, {Stmt::MbarArrive(empty(slot_of(kbx)))})} : Block{};
    };
    // With the split release (the overlap): block kbx's K, once its S retired; `release`
    // is then V's alone.
    auto release_k = [&](const Expr& kbx) {
      if (!split_release) return Block{};
      return Block{Stmt::If(tid % 128 < 1, {Stmt::MbarArrive(empty_k(slot_of(kbx)))})};
    };
    auto cat = [](Block x, const Block& y) {
      x.insert(x.end(), y.begin(), y.end());
      return x;
    };
    const std::string s_a = "s_acc", p_a = "p_acc";
    auto s_alloc = [&](const std::string& name) {
      return Stmt::Alloc(name, {Expr(BN / 16), Expr(2), Expr(4)});
    };
    append({Stmt::Alloc("alpha", {Expr(2)})});
    // ATTN_PINGPONG=1 (FlashAttention-3's ping-pong): the consumer warpgroups take turns
    // issuing wgmmas, in the ring 0, 1, .., W-1, 0. Warpgroup w waits at named barrier
    // 1 + w (bar.sync, 256 threads: its own 128 and the 128 of the warpgroup before it,
    // which bar.arrive there) before its turn and arrives at 1 + (w + 1) % W after it, so
    // one warpgroup's softmax runs while the next one's products hold the tensor cores.
    // The last warpgroup's first arrive starts the ring and its last is left out: every
    // phase completes within the block.
    const int64_t W = t.warpgroups;
    const int pp_threads = 256;
    auto pp_sync = [&] {
      return t.pingpong ? Block{Stmt::NamedBarrier(Expr(1) + wg, pp_threads)} : Block{};
    };
    auto pp_arrive = [&](const Expr& unless_last) {
      if (!t.pingpong) return Block{};
      const Stmt arrive = Stmt::NamedBarrierArrive(Expr(1) + (wg + 1) % W, pp_threads);
      return Block{Stmt::If(wg < Expr(W - 1) || unless_last, {arrive})};
    };
    // Under the walk with the overlap the ring runs across units (FlashAttention-3's
    // scheduler barrier, opened once per CTA): the last warpgroup's first arrive comes
    // before the walk and it arrives after every turn, its unit's last included, so the
    // first warpgroup's first turn of unit t + 1 waits for that warpgroup's last turn of
    // unit t, not for its P V, epilogue and wait for the next Q as well (a ring opened per
    // unit). After the walk the first warpgroup's bar.sync takes the one arrival left.
    // (Every turn is a key block after the first, the same count for every warpgroup of a
    // unit: the unit's key blocks are the CTA's.) Measured against the ring per unit (H200,
    // 2026-11-29, D = 128): +0 to +0.8 % at 1k, within noise at 2k and 4k.
    const bool ring_across_units = persist && t.pingpong && t.overlap;
    auto pp_start = [&](const Expr& enough) {
      if (!t.pingpong) return Block{};
      const Expr last_wg = Expr::make(Expr::Kind::Eq, wg, Expr(W - 1));
      return Block{Stmt::If(last_wg && enough,
                            {Stmt::NamedBarrierArrive(Expr(1), pp_threads)})};
    };
    // Value v of P's k-step kk is S's (kk, v / 4, v % 4) (check_p_repack); one statement
    // per value (a packed fragment's value index is a constant: codegen pairs v, v + 1
    // into one cvt.rn.*x2.f32).
    Block per_kk;
    for (int64_t v = 0; v < 8; ++v)
      per_kk.push_back(with_dst(Stmt::Compute(p_a, ScalarOp::Mul,
                                              {val(s_a, {kk, Expr(v / 4), Expr(v % 4)}),
                                               Operand::constant(1.0)}),
                                {kk, Expr(v)}));
    const Block to_p = {reg_loop("kk", BN / 16, std::move(per_kk))};
    const Expr wg_first = Expr::make(Expr::Kind::Eq, tid % 128, Expr(0));
    // Q's slot handed back for the next unit under the walk (O not in it): by the
    // warpgroup's first thread once the unit's last S retired (block kbx is the last), so
    // the next unit's Q lands under this unit's last softmax, P V and epilogue — with the
    // overlap as without it. (With the overlap the arrival came after the last P V; moved
    // here it measured within noise at D = 128, 1k, H200 2026-11-29: Q landed in time
    // either way. One place for both schedules.)
    auto release_q_after_last_s = [&](const Expr& kbx) {
      if (!persist || t.o_in_q) return Block{};
      return Block{Stmt::If(Expr::make(Expr::Kind::Eq, kbx + 1, key_blocks) && wg_first,
                            {Stmt::MbarArrive(q_empty)})};
    };
    // ATTN_PEEL_MASK=1: blocks [0, kb_full) are kept whole by every row of the CTA (its
    // first row keeps the fewest keys; rows past Sq keep as many as Sk allows) and run
    // without mask code; blocks [kb_full, key_blocks) — the ragged end past Sk, the
    // causal diagonal — run after them as a loop of their own, masked as before
    // (FlashAttention-3's masking steps, which it runs first because its keys go down;
    // Loom's go up, so the producer's order is unchanged). The CTA's split, not each
    // warpgroup's: Kernel IR loops run the same iterations in every thread of the block
    // (the interpreter checks it); a warpgroup below the first keeps its per-block test in
    // the masked loop (at 64 keys by 2 x 64 rows one of its two diagonal blocks masks
    // nothing). Not where no block of any unit can need the mask (Sk a multiple of
    // BLOCK_N, no causal mask).
    const bool peel = t.peel_mask && mask_possible;
    const Expr split_row = qb * BM;
    const Expr full_blocks = min(key_blocks, min(a.Sk, a.keys_for_rows(split_row + 1)) / Expr(BN));
    const Expr kb_full = full_blocks.is_const() ? full_blocks : Expr::var("kb_full");
    if (peel && !full_blocks.is_const()) append({Stmt::Let("kb_full", full_blocks)});
    if (!t.overlap) {
      // 3. The key loop, each block's two products in turn. ATTN_PRODUCER=0: block kb + S - 1
      // goes into the slot block kb - 1 used, after a block barrier (every warpgroup
      // retired its wgmmas on it). ATTN_PINGPONG=1: a warpgroup's turn is P V of block kb - 1
      // (waited for) and S of block kb (issued), FlashAttention-3's order; the softmax runs
      // outside it.
      auto step_for = [&](const Expr& kbx, bool mask) {
        const Expr next = kbx + (S - 1);
        Block step;
        if (!producer)
          step = {Stmt::Barrier(), Stmt::If(elected && next < key_blocks, kv_issue(next, next % S))};
        step.push_back(s_alloc(s_a));
        if (t.pack_p) step.push_back(Stmt::Alloc(p_a, {Expr(BN / 16), Expr(8)}));
        step = cat(step, s_issue(kbx, s_a));
        step = cat(step, pp_arrive(Expr(1)));
        step.push_back(Stmt::WgmmaWait(0));
        step = cat(step, release_q_after_last_s(kbx));
        step = cat(step, softmax(kbx, s_a, true, mask));
        if (t.pack_p) step = cat(step, to_p);
        // Before the ping-pong's turn: the consumers meet there, and a turn waits for another
        // warpgroup's. (The serving forms' V clean-up is for the block past Sk: masked.)
        if (mask) step = cat(step, clean_v(kbx));
        step = cat(step, pp_sync());
        step = cat(step, pv_issue(kbx, t.pack_p ? p_a : s_a));
        step.push_back(Stmt::WgmmaWait(0));
        step = cat(step, release(kbx));
        return step;
      };
      const Expr any = Expr(0) < key_blocks;
      append(pp_start(any));
      if (t.pingpong) append({Stmt::If(any, pp_sync())});
      // With P's 16-bit array (ATTN_PACK_P) and a small constant key count (at most 8
      // blocks), one copy of the loop (#pragma unroll 1): NVRTC unrolls it there, and the
      // copies' arrays spilled (116 B at 200 keys, D = 128, the 3 x 112 tile,
      // test_families). Long or run-time key counts keep NVRTC's choice, which is what was
      // measured (unroll 1 changes their SASS too).
      const bool no_unroll = t.pack_p && a.Sk.is_const() && a.Sk.const_value() <= 8 * BN;
      if (!peel) {
        Stmt loop = Stmt::For("kb", key_blocks, LoopKind::Reduce, "kb", step_for(kb, true));
        loop.no_unroll = no_unroll;
        append({std::move(loop)});
      } else {
        const Expr kbm = Expr::var("kbm");
        Stmt full = Stmt::For("kb", kb_full, LoopKind::Reduce, "kb", step_for(kb, false));
        Stmt masked = Stmt::For("kbm", key_blocks - kb_full, LoopKind::Reduce, "kbm",
                                step_for(kb_full + kbm, true));
        full.no_unroll = masked.no_unroll = no_unroll;
        append({std::move(full), std::move(masked)});
      }
      if (t.pingpong) append({Stmt::If(any, pp_arrive(Expr(0)))});
    } else {
      // ATTN_OVERLAP=1 (FlashAttention-3's intra-warpgroup pipelining): S of block kb is
      // issued before O += P V of block kb - 1, and its softmax runs while that product is
      // in flight; O's rescale by block kb's alpha waits for it. P V reads P from `p_acc`,
      // a register array of 16-bit pairs (codegen's packed fragment) that the softmax's f32
      // result is converted into once P V of the block before has retired — FlashAttention-
      // 3's tOrP: S's f32 array is free for the next S as soon as it is converted, so one S
      // array and BLOCK_N/4 packed registers, not two S arrays.
      // ATTN_PINGPONG=1: a warpgroup's turn is the issue of both products.
      // ATTN_O_UNDER_S=1: O's rescale by block kb's alpha (its softmax ran in the
      // step before, or before the loop) while S of kb + 1 is in flight, before P V of
      // block kb adds to O (FlashAttention-3's rescale_o between its two gemms); 0: at the
      // step's end, after P V of kb - 1 retired, with the tensor cores idle.
      const bool early = t.rescale_under_s;
      // Step kbx (1 .. key_blocks - 1): S of kbx, P V of kbx - 1, kbx's softmax.
      auto step_for = [&](const Expr& kbx, bool mask) {
        Block step = pp_sync();
        step = cat(step, s_issue(kbx, s_a));
        if (early) step = cat(step, rescale_o());
        step = cat(step, pv_issue(kbx - 1, p_a));
        step = cat(step, pp_arrive(ring_across_units ? Expr(1) : kbx + 1 < key_blocks));
        step.push_back(Stmt::WgmmaWait(1));  // S of kb retired; P V of kb - 1 may run on
        step = cat(step, release_k(kbx));
        step = cat(step, release_q_after_last_s(kbx));
        step = cat(step, softmax(kbx, s_a, false, mask));
        // The wait after the row sums (wgmma_wait_group_after): in one basic block ptxas
        // (CUDA 13.0) hoisted a plain wait above the whole softmax (SASS: the
        // WARPGROUP.DEPBAR.LE 0 before the first FMNMX, every MUFU.EX2 after it), so the
        // softmax ran after P V had retired and the overlap lost 10-30 % to the default.
        // l_i is the last the softmax writes (each exp adds into it, after alpha).
        step.push_back(Stmt::WgmmaWait(0, {val("l_i", {Expr(0)}), val("l_i", {Expr(1)})}));
        step = cat(step, release(kbx - 1));
        step = cat(step, to_p);
        if (!early) step = cat(step, rescale_o());
        return step;
      };
      Block first = ring_across_units ? Block{} : pp_start(Expr(1) < key_blocks);
      first = cat(first, s_issue(Expr(0), s_a));
      first.push_back(Stmt::WgmmaWait(0));
      first = cat(first, release_k(Expr(0)));
      first = cat(first, release_q_after_last_s(Expr(0)));
      // O is 0: no rescale (under S: the first step multiplies it by this block's alpha,
      // 0 — m_i was -inf and block 0 holds a key of every row it scores).
      first = cat(first, softmax(Expr(0), s_a, false));
      first = cat(first, to_p);
      if (!peel) {
        first.push_back(Stmt::For("kb", key_blocks - 1, LoopKind::Reduce, "kb", step_for(kb + 1, true)));
      } else {
        // Blocks 1 .. kb_full - 1 unmasked, then the rest (block 0, before the loop, keeps
        // its test).
        const Expr split = max(kb_full, Expr(1));
        first.push_back(Stmt::For("kb", split - 1, LoopKind::Reduce, "kb", step_for(kb + 1, false)));
        first.push_back(Stmt::For("kbm", key_blocks - split, LoopKind::Reduce, "kbm",
                                  step_for(split + Expr::var("kbm"), true)));
      }
      // The block that can reach past Sk is the last (no block past it is visited), whose
      // P V is this one, outside every ping-pong turn.
      Block tail = clean_v(key_blocks - 1);
      if (early) tail = cat(tail, rescale_o());  // the last block's alpha
      tail = cat(tail, pv_issue(key_blocks - 1, p_a));
      tail.push_back(Stmt::WgmmaWait(0));
      first = cat(first, tail);
      first = cat(first, release(key_blocks - 1));
      append({s_alloc(s_a), Stmt::Alloc(p_a, {Expr(BN / 16), Expr(8)}),
              Stmt::If(Expr(0) < key_blocks, std::move(first))});
    }

    // The warpgroup's S products retired: Q's slot is free for the next unit (with O in
    // Q's slot, once its TMA store read it: below). In the key loop right after the last
    // block's S (release_q_after_last_s: the next Q then lands under its softmax, P V and
    // the epilogue), or here for a unit with no key block.
    //
    // An arrival by the warpgroup's first thread stands for its four warps, which run
    // apart on the GPU: it may come only once every warp is past the wait it answers.
    // After a wgmma that is so (the warpgroup's product needs all four warps); where no
    // wgmma comes between the wait and the arrival — a unit with no key block — the
    // warpgroup meets first (named barrier W + 2 + wg over its 128 threads; it also orders
    // every warp's read of the unit's hand-off before the producer overwrites it). Without
    // it the first warp ran through a CTA's keyless units (or the padding the causal walk
    // had then) alone, its arrivals letting the producer complete Q's (a slot's) phases
    // twice while the other three warps still waited for the first: a parity that never
    // came back (the persistent causal hang at Sq 4097 > Sk 1000, D = 256, 16 CTAs).
    const Stmt wg_meet = Stmt::NamedBarrier(Expr(t.warpgroups + 2) + wg, 128);
    if (persist && !t.o_in_q)
      append({Stmt::If(key_blocks < 1, {wg_meet}),
              Stmt::If(key_blocks < 1 && wg_first, {Stmt::MbarArrive(q_empty)})});

    // 7. Normalize and store (each span's columns of the tensor: the zero-filled ones
    // past D are not stored). ATTN_TMA_STORE=1: each warpgroup writes its 64 rows (every
    // column of the spans) to O's shared buffer (o_s: its own, or Q's slot, whose rows of
    // this warpgroup only its own S products read), fences them for the async proxy,
    // meets (named barrier W + 2 + wg over its 128 threads) and its first thread stores
    // one box per 64-column chunk or narrow span; the tensor map clips rows past Sq and
    // columns past D. A persistent CTA's next unit first waits until the store read the
    // buffer (cp.async.bulk.wait_group.read 0 by the thread that issued it, then the
    // meeting).
    // The copy-out (ATTN_STMATRIX without the TMA store) likewise meets first: every
    // thread of the warpgroup has read the previous unit's rows before any writes over them.
    if (t.tma_store && persist && !t.o_in_q)
      append({Stmt::If(wg_first, {Stmt::BulkWait(0)}), wg_meet});
    else if (t.o_in_shared() && persist && !t.o_in_q)
      append({wg_meet});
    // O in Q's slot: Q's box landed for every consumer thread that waited for it, and the
    // interpreter stamps the landing with the first waiter only; the consumers meet
    // (named barrier 2W + 2) so the writes over Q are ordered after it for every thread.
    if (t.o_in_shared() && t.o_in_q)
      append({Stmt::NamedBarrier(Expr(2 * t.warpgroups + 2), int(c_threads))});
    // Under the walk O's buffer rows carry unit / units (always 0): the addresses depend
    // only on the thread otherwise, and NVRTC hoisted all 32 of the 4-byte stores' out of
    // the unit loop (D = 128, three warpgroups at 160 registers: 56-64 B spilled).
    const Expr opaque_zero = persist ? Expr::var("unit") / units() : Expr(0);
    {
      const Expr i = row_of(r2);
      Block fin = {
          Stmt::LaneReduce("l_q", ScalarOp::Add, val("l_i", {r2}), 4),
          with_dst(Stmt::Compute("inv_l", ScalarOp::Div, {Operand::constant(1.0), val("l_q")}), {r2}),
      };
      Block zero_inv = guarded(a.empty_row(i), {with_dst(Stmt::Init("inv_l", 0.0), {r2})});
      fin.insert(fin.end(), zero_inv.begin(), zero_inv.end());
      // 4-byte stores of value pairs (to global memory, or with ATTN_STMATRIX=0 to O's
      // buffer); with stmatrix O is stored below, after both rows' 1 / l.
      for (size_t sp = 0; sp < n_spans && !t.stmatrix; ++sp) {
        const int64_t wd = t.spans[sp].width;
        const Expr d = Expr(t.spans[sp].col) + dn * 8 + lane % 4 * 2;
        Stmt st = t.tma_store
                      ? Stmt::Write(o_s[sp], {(w * 16 + lane / 4 + r2 * 8 + opaque_zero) * wd + dn * 8 + lane % 4 * 2},
                                    val("y", {Expr(0)}))
                      : Stmt::Write("out", {flat(p.tensor("out"), a.q_index(b, h, i, d))}, val("y", {Expr(0)}));
        st.width = 2;
        fin.push_back(reg_loop("dn", (t.tma_store ? wd : t.spans[sp].real) / 8, {
            Stmt::Alloc("y", {Expr(2)}),
            reg_loop("e", 2, {with_dst(Stmt::Compute("y", ScalarOp::Mul,
                                                     {val(o_acc[sp], {dn * 4 + r2 * 2 + e}), val("inv_l", {r2})}),
                                       {e})}),
            t.tma_store ? st : Stmt::If(i < a.Sq, {st})}));
      }
      if (a.lse) {
        Block lse = {
            Stmt::Compute("m_s", ScalarOp::Mul, {val("m_i", {r2}), Operand::constant(a.scale)}),
            Stmt::Compute("log_l", ScalarOp::Log, {val("l_q")}),
            with_dst(Stmt::Compute("lse_v", ScalarOp::Add, {val("m_s"), val("log_l")}), {r2}),
        };
        Block none = guarded(a.empty_row(i), {with_dst(Stmt::Init("lse_v", kNegInf), {r2})});
        lse.insert(lse.end(), none.begin(), none.end());
        lse.push_back(Stmt::If(lane % 4 < 1 && i < a.Sq,
                               {Stmt::Write(kLseTensor, {flat(p.tensor(kLseTensor), a.lse_index(b, h, i))},
                                            val("lse_v", {r2}))}));
        fin.insert(fin.end(), lse.begin(), lse.end());
      }
      Block tail = {Stmt::Alloc("inv_l", {Expr(2)})};
      if (a.lse) tail.push_back(Stmt::Alloc("lse_v", {Expr(2)}));
      tail.push_back(reg_loop("r2", 2, std::move(fin)));
      if (t.stmatrix) {
        // ATTN_STMATRIX: one stmatrix.x4 per 16 columns of the warp's 16 rows. Its
        // registers are 8 consecutive accumulator values, o_acc[8 dp + v] (column blocks
        // 2 dp and 2 dp + 1, rows r2 = v / 2 % 2 of each; value pairs as stored); lane l
        // gives the address of row l % 8 of matrix l / 8, i.e. row 8 (l / 8 % 2) + l % 8
        // of the warp's 16 at column 16 dp + 8 (l / 16): 16 bytes the swizzle keeps whole.
        // (l / 16 % 2, not l / 16: codegen then knows the column's range, with dp's from
        // its loop, and permutes and swizzles the row and the column apart.)
        const Expr dp = Expr::var("dp"), v = Expr::var("v");
        const Expr row = w * 16 + lane / 8 % 2 * 8 + lane % 8 + opaque_zero;
        std::vector<Operand> values;
        for (int i = 0; i < 8; ++i) values.push_back(val("y", {Expr(i)}));
        if (!find_warp_copy(k, "stmatrix_x4")) k.warp_copies.push_back(warp_copy(atom("stmatrix_x4")));
        for (size_t sp = 0; sp < n_spans; ++sp) {
          const int64_t wd = t.spans[sp].width;
          tail.push_back(reg_loop("dp", wd / 16, {
              Stmt::Alloc("y", {Expr(8)}),
              reg_loop("v", 8, {with_dst(Stmt::Compute("y", ScalarOp::Mul,
                                                       {val(o_acc[sp], {dp * 8 + v}), val("inv_l", {v / 2 % 2})}),
                                         {v})}),
              Stmt::StoreCopyAtom("stmatrix_x4", o_s[sp], row * wd + dp * 16 + lane / 16 % 2 * 8, values)}));
        }
      }
      append(std::move(tail));
    }
    if (t.tma_store) {
      Block store;
      for (size_t sp = 0; sp < n_spans; ++sp) {
        const int64_t wd = t.spans[sp].width, box = std::min(wd, kSpan);
        for (int64_t j = 0; j < wd / box; ++j)
          store.push_back(Stmt::TmaStore(o_s[sp], wg * (64 * wd) + Expr(j * box), "out",
                                         {b, h, qb * BM + wg * 64, Expr(t.spans[sp].col + j * box)},
                                         o_map[sp]));
      }
      store.push_back(Stmt::BulkCommit());
      if (persist && t.o_in_q) store.insert(store.end(), {Stmt::BulkWait(0), Stmt::MbarArrive(q_empty)});
      append({Stmt::FenceProxyAsync(), wg_meet, Stmt::If(wg_first, std::move(store))});
    } else if (t.stmatrix) {
      append(copy_out(wg_meet, opaque_zero));
      // O in Q's slot: every thread of the warpgroup read its rows; Q's slot is free.
      if (persist && t.o_in_q) append({wg_meet, Stmt::If(wg_first, {Stmt::MbarArrive(q_empty)})});
    }
    if (persist) {
      // Both arms walk the units: the consumers' part from its Allocs to the store.
      Block unit(body.begin() + long(consumer_from), body.end());
      body.resize(consumer_from);
      Expr trips = units_for_cta();
      if (stream) {
        // The unit and its ring base, once the producer's arrival on Q's barrier published
        // them; dynamic: a unit past the last ends the walk.
        Block head = {Stmt::MbarWait(Expr(0), t_i % 2), Stmt::LetLoad("unit", unit_s_, {Expr(0)}),
                      Stmt::LetLoad("ring_base", unit_s_, {Expr(1)})};
        // (The packed order's coordinates are the producer's, written with real units only:
        // read after the stop.)
        const Block coords = unit_coords();
        if (!packed_order()) head.insert(head.end(), coords.begin(), coords.end());
        if (stop_handoff) {
          head.push_back(Stmt::BreakIf(Expr::make(Expr::Kind::Le, units(), Expr::var("unit"))));
          // Static varlen: at most every unit of the CTA, then the stop.
          trips = t.dynamic ? units() - grid() + 2 : units_for_cta() + 1;
        }
        if (packed_order()) head.insert(head.end(), coords.begin(), coords.end());
        head.insert(head.end(), seq_lets_handed.begin(), seq_lets_handed.end());
        head.insert(head.end(), unit.begin(), unit.end());
        unit = std::move(head);
      } else {
        unit.insert(unit.begin(), unit_lets.begin(), unit_lets.end());
      }
      Stmt walk = Stmt::For("t_i", trips, LoopKind::Reduce, "t_i", std::move(unit));
      walk.no_unroll = true;
      if (ring_across_units) append(pp_start(Expr(1)));
      body.push_back(std::move(walk));
      if (ring_across_units)
        append({Stmt::If(Expr::make(Expr::Kind::Eq, wg, Expr(0)), {Stmt::NamedBarrier(Expr(1), pp_threads)})});
    }
    // The last stores read O's buffer before the CTA's shared memory goes.
    if (t.tma_store) append({Stmt::If(wg_first, {Stmt::BulkWait(0)})});
    if (producer) {
      // ATTN_PRODUCER=1: two arms after the setup. The producer warpgroup gives its
    // registers to the consumers (setmaxnreg: producer_regs x 128 + consumer_regs x 128
    // ATTN_WG fits what the CTA holds at launch, setmaxnreg_pool) and its first thread runs
    // the loads; the consumers run the rest.
    Block consumer(body.begin() + long(consumer_from), body.end());
    body.resize(consumer_from);
    if (lets_in_consumers) consumer.insert(consumer.begin(), thread_lets.begin(), thread_lets.end());
    consumer.insert(consumer.begin(), Stmt::SetMaxNReg(true, int(t.consumer_regs)));
    // One issuing thread (the warpgroup's first), or lane 0 of each of ATTN_LOAD_WARPS warps.
    Block p_arm = {Stmt::SetMaxNReg(false, int(t.producer_regs))};
    if (t.load_warps > 1) {
      producer_loop.insert(producer_loop.begin(), Stmt::Let("load_warp", (tid - Expr(c_threads)) / Expr(32)));
      p_arm.push_back(Stmt::If(Expr::make(Expr::Kind::Eq, tid % Expr(32), Expr(0)) &&
                                   tid < Expr(c_threads + 32 * t.load_warps),
                               std::move(producer_loop)));
    } else {
      p_arm.push_back(Stmt::If(Expr::make(Expr::Kind::Eq, tid, Expr(c_threads)), std::move(producer_loop)));
    }
    body.push_back(Stmt::Specialize({Stmt::If(Expr(c_threads) <= tid, std::move(p_arm)),
                                     Stmt::If(tid < Expr(c_threads), std::move(consumer))}));
      // The ping-pong's warpgroups wait for each other: the interpreter runs each as a task.
      if (t.pingpong) body.back().mode = "warpgroups";
    }
    if (a.varlen && !persist) {
      // A query block at or past its sequence's rows (the grid is sized by max_seqlen_q)
      // has nothing to do: everything after the lets, the mbarriers' initialization
      // included, is under one CTA-uniform condition, so such a CTA meets no barrier, issues
      // no load and leaves no transaction pending.
      Block rest(body.begin() + std::ptrdiff_t(lets), body.end());
      body.erase(body.begin() + std::ptrdiff_t(lets), body.end());
      body.push_back(Stmt::If(real_unit, std::move(rest)));
    }
    return body;
  }

  KernelOp run(int64_t min_blocks) {
    for (size_t i = 0; i < t.spans.size(); ++i)
      q_s.push_back(shared("Q_s", t.spans[i], i, BM));
    for (size_t i = 0; i < t.spans.size(); ++i)
      k_s.push_back(shared("K_s", t.spans[i], i, BN, t.kv_stages));
    for (size_t i = 0; i < t.spans.size(); ++i)
      v_s.push_back(shared("V_s", t.spans[i], i, BN, t.kv_stages));
    if (t.o_in_shared()) {
      if (p.tensor("out").dtype != dt)
        throw Error(std::string(t.tma_store ? "ATTN_TMA_STORE=1" : "ATTN_STMATRIX=1") +
                    " stores O from a shared tile of Q's type, and O is " +
                    std::string(dtype_name(p.tensor("out").dtype)) + ": drop " +
                    (t.tma_store ? "ATTN_TMA_STORE" : "ATTN_STMATRIX"));
      for (size_t i = 0; i < t.spans.size(); ++i)
        o_s.push_back(t.o_in_q ? q_s[i] : shared("O_s", t.spans[i], i, BM));
    }
    if (t.tma_store) {
      for (size_t i = 0; i < t.spans.size(); ++i) {
        // 64 rows (one warpgroup's) of min(width, 64) columns of O [B, H, Sq, D].
        TmaDescriptor d;
        d.name = o_s[i] + (t.o_in_q ? "_omap" : "_tmap");
        d.tensor = "out";
        d.shared = o_s[i];
        d.box = {std::min(t.spans[i].width, kSpan), 64, 1, 1};
        d.swizzle_bytes = int(t.spans[i].swizzle_bytes());
        k.tma.push_back(d);
        o_map.push_back(d.name);
      }
    }
    // The walk's stream (causal, dynamic, varlen or paged; streams()): the unit hand-off in shared memory,
    // after every swizzled tensor (each of those starts on its 1024-byte repeat), and the
    // dynamic schedule's work counter, a zeroed i32 the launch's last fetch leaves at 0.
    if (streams()) {
      TensorDecl u;
      u.name = unit_s_ = fresh_tensor_name(p, "unit_s");
      u.dtype = DType::I32;
      u.shape = {Expr(unit_slots())};  // its layout: unit_slots()
      u.role = TensorRole::Shared;
      p.tensors.push_back(u);
    }
    if (t.persistent && t.dynamic) {
      TensorDecl c;
      c.name = work_counter_ = fresh_tensor_name(p, "attn_work");
      c.dtype = DType::I32;
      c.shape = {Expr(1)};
      c.role = TensorRole::Temp;
      c.zero_init = true;
      p.tensors.push_back(c);
    }
    for (size_t i = 0; i < t.spans.size(); ++i) {
      descriptor(q_s[i], a.q, t.spans[i], BM);
      descriptor(k_s[i], a.k, t.spans[i], a.paged ? page_rows() : BN);
      descriptor(v_s[i], a.v, t.spans[i], a.paged ? page_rows() : BN);
      o_acc.push_back(i == 0 ? "o_acc" : "o_acc" + std::to_string(i));
    }
    const AtomDef* s_def = wgmma_atom(dt, int(BN));
    LOOM_CHECK(s_def, "the atom table has m64n{BLOCK_N}k16");
    std::vector<const AtomDef*> pv_defs;
    for (const AttentionSpan& sp : t.spans) {
      pv_defs.push_back(wgmma_atom(dt, int(sp.width)));
      LOOM_CHECK(pv_defs.back(), "the atom table has m64n{span width}k16");
      check_p_repack(*s_def, *pv_defs.back());
    }
    // The descriptors of every tile the kernel reads: Q's k-steps for every warpgroup,
    // K's and V's in every slot, span by span.
    for (size_t i = 0; i < t.spans.size(); ++i) {
      const int64_t wd = t.spans[i].width;
      const TensorDecl &qt = p.tensor(q_s[i]), &kt = p.tensor(k_s[i]), &vt = p.tensor(v_s[i]);
      for (int64_t g = 0; g < t.warpgroups; ++g)
        for (int64_t s = 0; s < wd / 16; ++s)
          check_descriptor(qt, WgmmaOperand::A, g * 64 * wd + s * 16, wd, 1, 64, 16);
      for (int64_t slot = 0; slot < t.kv_stages; ++slot) {
        for (int64_t s = 0; s < wd / 16; ++s)
          check_descriptor(kt, WgmmaOperand::B, slot * BN * wd + s * 16, 1, wd, 16, int(BN));
        for (int64_t s = 0; s < BN / 16; ++s)
          check_descriptor(vt, WgmmaOperand::B, slot * BN * wd + s * 16 * wd, wd, 1, 16, int(wd));
      }
    }
    k.name = "k_attention";
    if (t.persistent) {
      k.grid[0] = grid();
    } else {
      k.grid[0] = ceil_div(a.q_cap, Expr(BM));
      k.grid[1] = a.Hq;
      k.grid[2] = a.B;
    }
    k.block_threads = int(128 * (t.warpgroups + (t.producer ? 1 : 0)));
    k.min_blocks_per_sm = int(min_blocks);
    k.warp_atoms = {warpgroup_atom(*s_def, false)};
    std::vector<WarpAtom> pv_atoms;
    for (const AtomDef* d : pv_defs) {
      pv_atoms.push_back(warpgroup_atom(*d, true));
      if (std::none_of(k.warp_atoms.begin(), k.warp_atoms.end(),
                       [&](const WarpAtom& w) { return w.id == pv_atoms.back().id; }))
        k.warp_atoms.push_back(pv_atoms.back());
    }
    k.body = build(k.warp_atoms[0], pv_atoms);
    // One parameter per tensor: attention(Q, Q, Q) passes one pointer.
    std::vector<std::string> tensors = {a.q, a.k, a.v};
    if (a.paged) tensors.insert(tensors.end(), {a.block_table, a.seqlens});
    if (a.varlen) tensors.insert(tensors.end(), {a.cu_q, a.cu_k});
    tensors.push_back("out");
    if (a.lse) tensors.push_back(kLseTensor);
    if (!work_counter_.empty()) tensors.push_back(work_counter_);
    for (const std::string& t : tensors)
      if (std::find(k.params.begin(), k.params.end(), t) == k.params.end()) k.params.push_back(t);
    for (const auto& sym : p.symbols) k.params.push_back(sym);
    return std::move(k);
  }
};

}  // namespace

Pass pass_lower_attention_wgmma() {
  return Pass{"k:013_lower_attention_wgmma", Level::Tile, Level::Kernel,
              "attention on sm_90a (ATTN_MMA=wgmma): Q, K, V by TMA into 128B-swizzled tiles, "
              "S = Q K^T and O += P V as warpgroup MMAs (P from registers), the online "
              "softmax on the accumulators, one warpgroup per 64 query rows; varlen by 3-D maps over "
              "packed rows, paged KV by page-piece boxes over the pool through the block table",
              {"ATTN_MMA", "ATTN_WG", "ATTN_PRODUCER", "ATTN_OVERLAP", "ATTN_PINGPONG", "ATTN_PACK_P",
               "ATTN_PEEL_MASK",
               "ATTN_PERSISTENT", "ATTN_CTAS", "ATTN_SCHEDULE", "ATTN_LOAD_WARPS", "ATTN_TMA_STORE",
               "ATTN_STMATRIX", "BLOCK_N", "KV_STAGES", "MIN_BLOCKS"},
              [](CompileState& s) {
                if (!s.graph.attention() || !attention_uses_wgmma(s)) return;
                AttentionLoops a(s.graph);
                const AttentionWgmmaTiles t = attention_wgmma_tiles(s, a);
                KernelProgram kp;
                static_cast<ProgramBase&>(kp) = s.tile;
                Lowering lower(a, t, kp, s.target.l2_bytes);
                kp.kernels.push_back(lower.run(std::max<int64_t>(1, s.knob("MIN_BLOCKS", 1))));
                s.kernel = std::move(kp);
                s.level = Level::Kernel;
              }};
}

}  // namespace loom
