// Attention's loop forms (docs/attention.md): the index conditions of its masks and
// heads, shared by l:000 (the unfused form: two contractions with a softmax between)
// and l:005 (the tiled online-softmax form that replaces it).
//
// Every condition is an integer index expression, so the masks, the rows that keep no
// key and the causal loop bounds are all decided by indices, never by comparing values:
// the interpreter runs the forms without NaN from -inf - -inf, and the GPU kernel can
// skip whole tiles by the same arithmetic.
#pragma once
#include <string>

#include "ir/graph.h"
#include "ir/program.h"

namespace loom {

struct AttentionLoops {
  const Node* node = nullptr;
  std::string q, k, v;               // input tensors
  Expr B, Hq, Sq, Sk, D;             // sizes (constants or symbols)
  Expr group;                        // Hq / Hkv: query head h reads head h / group
  Causal causal = Causal::None;
  double scale = 0.0;
  bool lse = false;
  // Paged KV (graph.h, docs/attention.md "Paged KV"): K and V are page pools
  // [P, Hkv, page, D] read through `block_table` [B, maxp]; Sk is then sequence b's key
  // count, the integer `kv_len` that batch_lets(b) binds from `seqlens` [B] (clamped to
  // 0..maxp·page), and `key_cap` = maxp·page the key axis' extent. Dense: Sk = key_cap.
  bool paged = false;
  int64_t page = 0;
  std::string block_table, seqlens;
  Expr key_cap;
  // Varlen (graph.h): Q [Tq, Hq, D], K and V [Tk, Hkv, D] packed; batch_lets(b) binds the
  // sequence's first query row `q_start`, its end `q_end`, and `kv_start`, `kv_end` from
  // `cu_q`, `cu_k`; Sq = min(max(q_end - q_start, 0), max_seqlen_q) and Sk =
  // max(kv_end - kv_start, 0) are expressions of them. `q_cap` (max_seqlen_q; Sq dense)
  // sizes the query axis of temps and grids, `key_cap` (Tk) the key axis.
  bool varlen = false;
  std::string cu_q, cu_k;
  Expr q_cap;

  explicit AttentionLoops(const Graph& g);  // the graph's attention node; throws if none

  // Paged: `let kv_len = load L[b]`; varlen: the four cumulative-length reads; to open
  // the body of every loop over b before Sq or Sk is used; nothing for the dense form.
  Block batch_lets(const Expr& b) const;
  // Where query row i of head h of batch b lives: Q, O [b, h, i, d] and LSE [b, h, i], or
  // varlen Q, O [q_start + i, h, d] and LSE [q_start + i, h].
  std::vector<Expr> q_index(const Expr& b, const Expr& h, const Expr& i, const Expr& d) const;
  std::vector<Expr> lse_index(const Expr& b, const Expr& h, const Expr& i) const;
  // `dst = load K[...]` of key j (K or V: `tensor`) of batch b, KV head hk, column d:
  // K[b, hk, j, d], or paged `let kv_page = load BT[b, j / page]` then
  // K[kv_page, hk, j % page, d]. j must be a key that exists (j < Sk).
  Block load_kv(const std::string& dst, const std::string& tensor, const Expr& b,
                const Expr& hk, const Expr& j, const Expr& d) const;

  Expr kv_head(const Expr& h) const { return h / group; }
  // Row i keeps key j (constant 1 without a mask); `drops` is its complement.
  Expr keeps(const Expr& i, const Expr& j) const;
  Expr drops(const Expr& i, const Expr& j) const;
  // Row i keeps at least one key (constant 1 unless the mask is bottom-right: with
  // Sq > Sk its first Sq - Sk rows keep none; or paged: a sequence of no keys);
  // `empty_row` is its complement.
  Expr has_keys(const Expr& i) const;
  Expr empty_row(const Expr& i) const;
  // Keys [0, n) that rows [0, rows_end) keep between them: the causal bound of a
  // query block's key loop.
  Expr keys_for_rows(const Expr& rows_end) const;
};

// The tiling of attention's mma.sync kernel (t:012, k:012), from the knobs, checked:
// BLOCK_M query rows per CTA in WARPS warps of whole m16 atoms, BLOCK_N keys per step,
// KV_STAGES K/V buffers, Q_IN_REGS. Throws loom::Error naming the knob and the limit it breaks
// (the tile shape, shared memory, or the registers a thread would need).
struct AttentionTiles {
  int64_t block_m = 64, block_n = 64, warps = 4, kv_stages = 2;
  bool q_in_regs = true;         // Q's fragments loaded once (1) or per k-step from Q_s (0)
  // The articles' ladder (docs/attention.md, "The mma.sync kernel"):
  bool interleave_loads = true;  // INTERLEAVE_LOADS: K/V fragments per k-step (1) or the
                                 // whole block's first (0)
  int64_t frag_buffers = 1;      // FRAG_BUFFERS: 2 loads k-step s+1's fragments before s's mmas
  bool softmax_exp2 = true;      // SOFTMAX=exp2 (scale folded into one FFMA) or exp
  bool zero_init_mma = true;     // ZERO_INIT=mma: S's first k-step takes a zero C operand
  bool stage_output = false;     // STAGE_OUTPUT=1: O through Q_s, 16-byte row stores
  int64_t head_dim = 0;          // D, a constant multiple of 16
  int64_t row_atoms = 1;         // m16 atoms per warp: BLOCK_M / (16 WARPS)
  int64_t smem_bytes = 0;        // Q + KV_STAGES (K + V) blocks, 16-bit
  int64_t fragment_regs = 0;     // estimated 32-bit registers of live fragments per thread
};
struct CompileState;
AttentionTiles attention_tiles(CompileState& s, const AttentionLoops& a);
// Whether attention defaults to the mma.sync kernel on sm_90a for decode's sake: a decode
// shape (Sq <= 64, paged KV included), varlen with max_seqlen_q <= 64, or SPLIT_KV > 1 or
// GQA_PACK=1 set, neither of which the wgmma kernel has (attention_decode.cpp).
bool attention_wants_mma_sync(const CompileState& s);
// BLOCK_N's default: 64, or 16 for head dims above 128 (the registers D = 256 needs).
int64_t default_block_n(const AttentionLoops& a);
// The decode shapes' (Sq <= 64) tile defaults over these (attention_decode.cpp): BLOCK_M
// the packed rows Sq x group rounded up to m16 atoms, BLOCK_N at most 16 copies of K per
// thread and block; 64 and default_block_n(a) otherwise.
int64_t default_block_m(CompileState& s, const AttentionLoops& a);
int64_t default_block_n(CompileState& s, const AttentionLoops& a, int64_t block_m);
// KV_STAGES of the mma.sync kernel (k:012): 2, or for decode kDecodeKvStages (the ring
// that keeps a short split's blocks in flight). Read by t:012 and by the split default
// (its shared-memory estimate), so every level sizes the same ring.
int64_t default_kv_stages(CompileState& s, const AttentionLoops& a);

// Names of the tensors the attention forms add. The output O is `out` like every
// result; the optional log-sum-exp is `lse`.
inline constexpr const char* kLseTensor = "lse";
// Paged KV's integer lets: sequence b's key count and the page of key j.
inline constexpr const char* kKvLenVar = "kv_len";
inline constexpr const char* kKvPageVar = "kv_page";
// Varlen's integer lets: the sequence's rows in Q and K.
inline constexpr const char* kQStartVar = "q_start";
inline constexpr const char* kQEndVar = "q_end";
inline constexpr const char* kKvStartVar = "kv_start";
inline constexpr const char* kKvEndVar = "kv_end";

// `body` under `cond`, without an If when the condition is the constant 1, and nothing
// when it is the constant 0.
Block guarded(const Expr& cond, Block body);

// The end of one query row of the online-softmax forms (l:005, t:012), over the row's
// statistics m (log2 units) and l: `row` (the key loop and O's write) followed, with
// `lse`, by LSE = m·ln 2 + log l; a row that keeps no key writes O = 0 and LSE = -inf
// instead. Returns both branches under their index conditions (has_keys / empty_row).
Block finish_row(const AttentionLoops& a, Block row, const Expr& b, const Expr& h,
                 const Expr& i);

// A name not yet used by a tensor or a symbol of `p`.
std::string fresh_tensor_name(const ProgramBase& p, const std::string& base);

// l:000's part: declares the temps (and `lse`) and appends the three ops of the unfused
// form, scores -> softmax -> pv, to `p` (whose `out` and inputs are declared).
void lower_attention(const AttentionLoops& a, LoopProgram& p);

}  // namespace loom
