// Decode attention (docs/attention.md, "Decode: split-KV and GQA packing"): the two knobs
// that shape attention's work when the query side is short — Sq = 1..64 new tokens
// against a long KV cache — and the combine that split-KV needs.
//
// GQA_PACK=1: the Hq/Hkv query heads that share a KV head become rows of one CTA's tile
// (packed row p of KV head hk is query p / group of head hk·group + p % group), so one
// CTA reads each K/V block once for the whole group instead of group times.
// SPLIT_KV=S: the key blocks of each (batch, head, query block) are cut into S runs of
// whole key blocks, one CTA each; every split writes its rows' normalized partial O and
// LSE (f32) to a workspace, and attention_combine weights the partials by
// exp(LSE_s - max_s LSE_s). A split that holds no key a row keeps writes O = 0 and
// LSE = -inf for that row, and the combine never reads it (an index condition: the
// masks keep a prefix of the keys, so whether split s holds one of row i's keys is
// s·keys_per_split < keys of row i).
#pragma once
#include <optional>

#include "ir/program.h"
#include "passes/attention_loops.h"

namespace loom {

struct CompileState;

struct AttentionDecode {
  int64_t splits = 1;  // SPLIT_KV, clamped so that no split starts past Sk (constant Sk)
  int64_t pack = 1;    // query heads per KV head packed into the rows (GQA_PACK=1: the group)
  int64_t block_n = 64;
  Expr split_blocks = Expr(1);  // key blocks per split: ceil(ceil(Sk / BLOCK_N) / splits)
  std::string part_o, part_lse;  // the workspace tensors (with splits > 1)
  // SPLIT_WARPS=W: W warps (groups of the row warps) share a CTA's rows, group k walking
  // key blocks k, k + W, .. of the split with its own K/V ring and (m, l, O), the groups
  // meeting in shared memory at the end (k:012).
  int64_t split_warps = 1;
  // COMBINE=last_cta (splits > 1): the split kernel's CTAs arrive on a per-row-set counter
  // and the last one combines the partials (k:012); kernel: k_attention_combine.
  bool combine_last_cta = false;

  bool split() const { return splits > 1; }
  // Rows of a (batch, KV-head slot): Sq · pack; slots: Hq / pack.
  Expr rows(const AttentionLoops& a) const;
  // The most rows any (batch, slot) has: rows(a), or varlen max_seqlen_q · pack (a grid's
  // extent; the rows of a sequence are rows(a), an expression of its lets).
  Expr rows_cap(const AttentionLoops& a) const;
  Expr heads(const AttentionLoops& a) const;
  // Packed row p: its query index and query head (head slot hh); the KV head of slot hh.
  Expr query(const Expr& p) const;
  Expr head(const Expr& hh, const Expr& p) const;
  Expr kv_head(const AttentionLoops& a, const Expr& hh) const;
  // Queries of packed rows [0, rows_end): ceil(rows_end / pack), at most Sq.
  Expr queries_of(const AttentionLoops& a, const Expr& rows_end) const;
  // Key blocks of split sp when the query block has `blocks`: the split's first block is
  // sp · split_blocks, and it has max(0, min(split_blocks, blocks - first)).
  Expr first_block(const Expr& sp) const { return sp * split_blocks; }
  Expr block_count(const Expr& sp, const Expr& blocks) const;
  // Row i keeps a key of split sp (implies a.has_keys(i)); `split_empty` the complement.
  Expr has_keys(const AttentionLoops& a, const Expr& i, const Expr& sp) const;
  Expr split_empty(const AttentionLoops& a, const Expr& i, const Expr& sp) const;
};

// Whether the decode defaults apply: a constant Sq of at most 64 (kDecodeRows).
inline constexpr int64_t kDecodeRows = 64;
// The mma.sync kernel's K/V ring for decode shapes (default_kv_stages): 3 measured equal
// to or faster than 2 at every B = 1 point of the H100 A/B (Sq = 1, 8k and 32k keys, Hkv
// 8 and 32: 0-4 %), 4 within noise of 3 and slower at two points (bench/NOTES.md).
inline constexpr int64_t kDecodeKvStages = 3;
// SPLIT_WARPS and COMBINE defaults for decode (bench/NOTES.md, "decode attention: fixed
// costs", H200 A/B): at most kDecodeSplitWarps groups, where each row set still gets
// kDecodeSplitWarpsMinSplits splits in one wave; the combine in the last CTA from
// kDecodeLastCtaWarps groups on (fewer partials per row). W = 4 with last_cta was equal to
// or 1-7 % faster than one group and the combine kernel at 10 of 12 points (B 1/8, Hkv
// 8/32, 1k-32k keys); last_cta alone lost 40 % at 64 splits (one warp reads them all).
inline constexpr int64_t kDecodeSplitWarps = 4;
inline constexpr int64_t kDecodeSplitWarpsMinSplits = 2;
inline constexpr int64_t kDecodeLastCtaWarps = 4;
// The last CTA's combine loses where it takes more than one pass over its row set (Sq = 4
// with GQA 4: 16 rows x 32 items over 128 threads) and, paged, over many splits; there the
// combine kernel (H200, 2026-11-30, attention_bench.py --decode / --paged 64, last CTA /
// kernel, µs): contiguous B = 1, Hkv = 8, Sq = 4 at 8k / 32k 18.8 / 17.6, 40.4 / 39.1, B = 8
// 16.7 / 16.2, 68.0 / 67.5 (one pass, Sq = 1: 16.3 / 16.9, 38.1 / 38.7); paged B = 1, Hkv = 8
// (16-32 splits) Sq = 1 1k / 8k / 32k 11.4 / 11.1, 20.6 / 18.5, 42.1 / 41.1, Sq = 4 8k / 32k
// 24.0 / 19.1, 46.3 / 41.7; paged with 2-4 splits (B = 8, Hkv = 8; B = 1, Hkv = 32) one pass:
// the last CTA ahead by 0.1-1.2 µs.
inline constexpr int64_t kPagedLastCtaMaxSplits = 8;
// Shared memory of one decode CTA of the mma.sync kernel: Q, `split_warps` K/V rings of
// `stages` blocks, and 1 KB of slack (the reduction of SPLIT_WARPS overlays the rings).
int64_t decode_cta_smem(int64_t block_m, int64_t block_n, int64_t head_dim, int64_t stages,
                        int64_t split_warps);
bool attention_is_decode(const AttentionLoops& a);
// attention_wants_mma_sync (declared in attention_loops.h, where the kernel choice reads
// it): a decode shape, or SPLIT_KV > 1 or GQA_PACK=1 set.
// default_block_m (attention_loops.h): 64, or for decode the packed rows rounded up to
// whole m16 atoms (at most 64; 64 above D = 128).
// default_block_n (attention_loops.h): default_block_n(a), and for decode at most 16
// 16-byte copies of K (and of V) per thread and key block: a one-warp CTA (BLOCK_M = 16)
// at D = 128 takes 32 keys. Its 64-key blocks had 32 cp.async each of K and V per thread
// whose addresses ptxas kept live across the key loop: 255 registers and 4-104 B of
// spills (NVRTC 13.0, sm_90a); 32 keys: no spill.
// SPLIT_KV and GQA_PACK (explicit or their defaults), checked; names the workspace
// tensors of `p` when it declares them. Every level reads the same values.
AttentionDecode attention_decode(CompileState& s, const AttentionLoops& a, int64_t block_m,
                                 int64_t block_n, const ProgramBase* p = nullptr);

// l:005's part with splits: declares the workspace [B, Hq, Sq, S, D] and [B, Hq, Sq, S]
// (f32 temps) in `p` and records their names in `d`.
void declare_split_workspace(const AttentionLoops& a, AttentionDecode& d, ProgramBase& p);
// The end of one query row of a split (l:005, t:012): `row` (its key loop and the write
// of its partial O) and its partial LSE = m·ln 2 + log l, when the split holds keys of
// the row; else O = 0 and LSE = -inf (the combine skips it).
Block finish_split_row(const AttentionLoops& a, const AttentionDecode& d, Block row,
                       const Expr& b, const Expr& h, const Expr& i, const Expr& sp);
// The combine as Loop IR (tier None) or Tile IR (grid over i, h, b; a thread per d):
// out = Σ_s w_s O_s / Σ_s w_s with w_s = exp(LSE_s - max LSE) over the splits that hold
// keys of the row, LSE = max + log Σ w_s; a row with no key gets O = 0, LSE = -inf.
Block attention_combine_body(const AttentionLoops& a, const AttentionDecode& d, bool tiled);
inline constexpr const char* kCombineOp = "attention_combine";
// The combine kernel (k:012's second kernel): one CTA per (i, h, b), G groups of a thread
// per d, each group folding every G-th split; declares its shared tensors in `p`.
// `groups`: G (COMBINE_GROUPS; combine_groups_default).
KernelOp attention_combine_kernel(const AttentionLoops& a, const AttentionDecode& d,
                                  KernelProgram& p, int64_t groups);
// ceil(splits / 8) groups, at most 1024 / D threads: each thread folds at most 8 splits.
int64_t combine_groups_default(int64_t splits, int64_t head_dim);

}  // namespace loom
