#include "passes/attention_wgmma_tiles.h"

#include "ir/error.h"
#include "ir/f32_constant.h"
#include "ir/register_file.h"
#include "passes/families/family.h"
#include "passes/pass.h"

namespace loom {

bool attention_wgmma_head_dim(int64_t D) { return D > 0 && D % 8 == 0 && D <= 256; }

std::vector<AttentionSpan> attention_spans(int64_t D) {
  const int64_t padded = (D + 15) / 16 * 16;
  std::vector<AttentionSpan> spans;
  int64_t col = 0;
  auto add = [&](int64_t width) {
    spans.push_back({col, width, std::min(width, D - col)});
    col += width;
  };
  if (padded >= 64) add(padded / 64 * 64);
  if (padded - col >= 32) add(32);
  if (padded - col >= 16) add(16);
  return spans;
}

// The default: wgmma wherever it applies — an sm_90a target and a head dim that is a
// multiple of 8 up to 256 — measured 1.2-1.9x FlashAttention-2 on the H100 at D = 64, 128
// and 256 where the mma.sync kernel was 0.87-1.02x (docs/attention.md); mma_sync elsewhere.
bool attention_uses_wgmma(CompileState& s) {
  bool fits = false;
  if (s.target.arch == "sm_90a" && s.graph.attention()) {
    const AttentionLoops a(s.graph);
    fits = a.D.is_const() && attention_wgmma_head_dim(a.D.const_value());
  }
  // Decode shapes and the split/packed forms are the mma.sync kernel's (attention_decode.h).
  const std::string mma =
      s.knobs.get_str("ATTN_MMA", fits && !attention_wants_mma_sync(s) ? "wgmma" : "mma_sync");
  s.used_knobs["ATTN_MMA"] = mma;
  if (mma != "wgmma") return false;
  if (s.target.arch != "sm_90a")
    throw Error("ATTN_MMA=wgmma: wgmma.mma_async and the TMA loads it reads need sm_90a; the "
                "target is " + s.target.arch + ": use ATTN_MMA=mma_sync (or --target sm_90a)");
  return true;
}

// ATTN_PERSISTENT's default (the tiling `t` chosen so far): on wherever the walk applies
// (the producer warpgroup, dense attention). Measured on the H100 (2026-11-28, D = 128,
// bf16, 16k tokens; loom/cuDNN): 1k non-causal 0.765x -> 0.822x, 4k 0.974x -> 0.996x (with
// the TMA store below 0.837x and 1.007x). Causal with the dynamic schedule (the GPU
// checkpoint, H200, 2026-11-28 09:57, 16k tokens; one CTA per query block -> the walk):
// D = 128 1k 0.813x -> 0.852x, 4k 0.950x -> 1.024x; D = 256 0.806x -> 0.920x, 0.902x ->
// 1.025x; D = 96 0.924x -> 1.182x, 1.121x -> 1.265x (before the unpadded stream and the
// work counter the static, padded walk measured slower: 1k 0.730x -> 0.695x). Not causal
// with an explicit ATTN_OVERLAP=1 (unmeasured; at D = 256 the walk's unit registers
// spilled 8 B at the overlap's 240).
// With the overlap under a causal mask only in the shape where the two measured together
// (causal_walk_overlap_shape, below); elsewhere a causal overlap runs one CTA per query
// block, as before.
// Varlen: the walk (dynamic schedule, its default there) under a causal mask in the tile
// where it was measured, 3 x 112 at 113..128 stored columns (the wgmma kernel's 16-bit
// operands; bf16 measured). H200 (2026-11-28 16:25, attention_bench.py --varlen, Hq = Hkv
// = 16, D = 128, bf16, cold L2; vs_pad = varlen time / (padded batch time x real/padded
// work); one CTA per query block / static walk / dynamic walk), causal: lengths
// 4096,2048,..,128 ~1.36 / - / 1.304 (201.4 us); 1023,777,3001,129,2048,1500 1.534
// (191.9 us) / 1.594 / 1.333 (166.8 us); 8192 + 512 x 7 1.300 (549.3 us) / 1.795 / 1.219
// (514.8 us): the dynamic walk 0.87-0.94x the default's time at every mix. Not without a
// mask: there the dynamic walk measured 1-5 % slower (vs_pad min / median / max 1.267 /
// 1.289 / 1.331 -> 1.327 / 1.359 / 1.409; 294.5 -> 300.8 us, 1015.9 -> 1064.2 us) and the
// static walk 1.47-1.79. Other tiles and head dims: unmeasured, off.
static bool varlen_walk_shape(const AttentionLoops& a, const AttentionWgmmaTiles& t) {
  return a.varlen && !a.paged && a.causal != Causal::None && t.warpgroups == 3 &&
         t.block_n == 112 && t.padded_dim > 112 && t.padded_dim <= 128 && !t.overlap;
}
// Varlen without a mask at 113..128 stored columns: the dense form's tile (FlashAttention-3's
// 2 x 64 rows by 128 keys with the overlap and the ping-pong; varlen_overlap_dims) under the
// dynamic walk in packed order (k:013: sequence by sequence, each head's query blocks
// fastest, at most one skipped unit per sequence and head) with the peeled mask. Measured on
// the H200 (2026-11-28 21:07, attention_bench.py --varlen --masks false --no-db, Hq = Hkv =
// 16, D = 128, bf16, cold L2; vs_pad, bar <= 1.10), the 3 x 112 tile one CTA per query block
// (the default before) / the overlap tile peeled, one CTA per query block / the same under
// the static walk / under the dynamic walk: 8192 1.206 / 1.024 / 1.035 / 1.038;
// 4096,2048,..,128 1.295 / 1.130 / 1.222 / 1.125; 1023,777,3001,129,2048,1500 1.330 / 1.311 /
// 1.278 / 1.308; 8192 + 512 x 8 1.258 / 1.100 / 1.118 / 1.098; 1024 x 8 1.556 / 1.166 /
// 1.184 / 1.109; 128 x 48 2.880 / 1.562 / 2.057 / 1.388; twelve lengths 1..2000 1.707 /
// 1.652 / 1.825 / 1.556. The dynamic walk is best or within 1.5 % at every mix.
// Causal varlen at 113..128 stored columns takes the same tile under the dynamic walk (in
// the longest-first box order, k:013's lpt_order; peeled), as dense causal attention does
// from 512 keys since the overlap won there (causal_walk_overlap_shape): measured on the
// H200 (2026-11-29 05:45, the command above with --masks true, vs_pad), the 3 x 112 tile
// under the dynamic walk (varlen_walk_shape, the default before) / the overlap tile:
// 4096,2048,..,128 1.267 / 1.199; 1023,777,3001,129,2048,1500 1.272 / 1.244; 8192 + 512 x 8
// 1.139 / 1.167; 1024 x 8 1.363 / 1.195 (939 us for the four mixes against 955).
static bool varlen_overlap_dims(const AttentionLoops& a, int64_t Dp) {
  return a.varlen && !a.paged && Dp > 112 && Dp <= 128;
}
static bool varlen_overlap_walk_shape(const AttentionLoops& a, const AttentionWgmmaTiles& t) {
  return varlen_overlap_dims(a, t.padded_dim) && t.overlap && t.warpgroups == 2 &&
         t.block_n == 128;
}
// Varlen under the walk by default: either of the measured shapes above (the 3 x 112 tile
// now only where its knobs are given: ATTN_OVERLAP=0 at D = 113..128).
static bool varlen_walk_default(const AttentionLoops& a, const AttentionWgmmaTiles& t) {
  return varlen_walk_shape(a, t) || varlen_overlap_walk_shape(a, t);
}
static bool causal_walk_overlap_shape(const AttentionLoops& a, int64_t Dp);
// Paged prefill at D = 113..128 in the overlap tile (paged_overlap, below) walks by default:
// the producer reads each unit's key count and hands it over with the unit (k:013), as
// varlen's walk does its lengths. Measured on the H200 (2026-11-29 22:19, `attention_bench.py
// --paged P --sq 2048 --sk 2048 --batches 2 8 --kv-heads 8 --ab ATTN_PERSISTENT=1`,
// paged / contiguous time, one CTA per query block -> the static walk), no mask: page 16
// 1.100 / 1.090 -> 1.082 / 1.065 (four issuing warps under the walk too), 32 1.093 / 1.093
// -> 1.062 / 1.050, 64 1.093 / 1.093 -> 1.039 / 1.031, 256 1.092 / 1.080 -> 1.041 / 1.030.
// `tile_known` false: asked before the overlap is decided (which itself asks whether a
// causal mask walks), where the overlap tile is the one to assume.
static bool paged_walk_default(const AttentionLoops& a, const AttentionWgmmaTiles& t, bool tile_known) {
  return a.paged && !a.varlen && t.producer && t.padded_dim > 112 && t.padded_dim <= 128 &&
         (!tile_known || (t.overlap && t.warpgroups == 2 && t.block_n == 128));
}
static bool persistent_by_default(const AttentionLoops& a, const AttentionWgmmaTiles& t,
                                  bool tile_known = true) {
  if (a.varlen) return t.producer && varlen_walk_default(a, t);
  if (a.paged) return paged_walk_default(a, t, tile_known);
  return t.producer &&
         (a.causal == Causal::None || !t.overlap || causal_walk_overlap_shape(a, t.padded_dim));
}

// The overlap under the causal walk by default: dense, causal, a constant Sk, and above 224
// stored columns (D = 232..256) from kWalkOverlapKeys keys on, or 113..128 (below). Measured on the H200
// (2026-11-28 12:40, 16k tokens, bf16, loom/cuDNN, both with ATTN_PEEL_MASK=1): D = 256
// causal, the walk alone (64 keys) against the walk with the overlap (80 keys), 1k 0.918x
// -> 0.908x, 4k 1.020x -> 1.076x. At 1k a unit is 4-16 blocks of 64-80 keys, and the
// overlap's fill and drain (block 0's S alone, the last P V alone) are a larger share than
// what it hides. Since the producer loads K one block ahead of V (its wait for K was the
// fill's largest part) it wins there too: H200, 2026-11-29 05:21, the walk alone against
// the walk with the overlap (both peeled), 1k 0.913x -> 0.930x, 2k 0.979x -> 1.045x, 4k
// 1.118x -> 1.121x; hence from kWalkOverlapKeys = 1024 keys (512: unmeasured, off). The
// peeled mask comes with it (the form that was measured; see ATTN_PEEL_MASK's default).
// D = 113..128 (FlashAttention-3's tile there: 2 x 64 rows by 128 keys with the ping-pong)
// from kWalkOverlapKeys128 keys on: measured on the H200 (2026-11-29 00:49, 16k tokens,
// bf16, loom/cuDNN), the default then (the short tile, 2 x 64 by 128 without the overlap, up
// to 1536; 3 x 112 past it) against the walk with the overlap, peeled / not peeled: 1k
// 0.895x -> 0.952x / 0.958x, 2k 0.974x -> 1.028x / 1.020x, 4k 1.015x -> 1.052x / 1.039x, 8k
// 1.075x -> 1.072x / 1.057x (the static walk with it: 0.83-0.85x — the causal units differ).
// At D = 128 the overlap's fill and drain are one 128-key block each, a smaller share of a
// 1k unit than at D = 256 (where a unit's S is half the tile's registers).
static constexpr int64_t kWalkOverlapKeys = 1024;
static constexpr int64_t kWalkOverlapKeys128 = 512;
static bool causal_walk_overlap_shape(const AttentionLoops& a, int64_t Dp) {
  if (a.causal == Causal::None || a.varlen || a.paged || !a.Sk.is_const()) return false;
  const int64_t sk = a.Sk.const_value();
  return (Dp > 224 && sk >= kWalkOverlapKeys) || (Dp > 112 && Dp <= 128 && sk >= kWalkOverlapKeys128);
}

// ATTN_SCHEDULE's default under the walk: dynamic causal (the work counter hands the
// longest unit left to the SM that frees first; the static walk, unpadded, measured D = 128
// 0.713x / 1.005x, D = 256 0.683x / 0.656x, D = 96 1.124x / 1.236x at 1k / 4k against the
// numbers above), static without a mask (every unit alike: D = 128 0.939x / 1.000x against
// dynamic's 0.874x / 0.976x; the fetch and the hand-off cost what the order cannot win).
// Varlen under the walk: dynamic too — its units differ in length with or without a mask
// (each sequence its own keys). Measured on the H200 (2026-11-28 16:25, D = 128, vs_pad
// min / median / max): causal dynamic 1.219 / 1.304 / 1.333, static 1.594 / 1.695 / 1.795;
// no mask (the box order then) dynamic 1.327 / 1.359 / 1.409, static 1.466 / 1.557 / 1.788;
// no mask in the packed order on the overlap tile (21:07, seven mixes) dynamic 1.038-1.556,
// static 1.035-2.057 (varlen_overlap_walk_shape).
// Paged KV causal under the walk: dynamic where a key block is one to three pages, static
// from four (16- and 32-key pages under 128-key blocks), where the static walk's four issuing
// warps (ATTN_LOAD_WARPS, which the dynamic schedule's single fetching thread rules out) pay
// more than the balance: H200, 2026-11-29 22:24, Sq = Sk = 2048, B 2 / 8, Hkv 8, paged /
// contiguous time, dynamic / static: page 16 1.298 / 1.060, 1.343 / 1.082; 32 1.068 / 1.048,
// 1.098 / 1.056; 64 1.032 / 1.047, 1.052 / 1.054; 256 1.021 / 1.038, 1.042 / 1.049 (one CTA
// per query block: 1.231-1.235, 1.153-1.159).
static const char* schedule_by_default(const AttentionLoops& a, const AttentionWgmmaTiles& t) {
  if (t.persistent && a.paged && a.causal != Causal::None)
    return t.block_n / attention_page_rows(a, t.block_n) >= 4 ? "static" : "dynamic";
  return t.persistent && (a.causal != Causal::None || a.varlen) ? "dynamic" : "static";
}

// ATTN_TMA_STORE's default: with the walk (D = 128: 0.822x -> 0.837x at 1k, 0.996x -> 1.007x
// at 4k when O went by 4-byte stores), also where O takes Q's slot (D = 256), and without
// the walk at D <= 64. Since O reaches its buffer by stmatrix (ATTN_STMATRIX, H200
// 2026-11-29, loom/cuDNN against the fragments' stores to global memory): D = 256 no mask
// 1k / 2k / 16k 0.959 / 0.986 / 1.097 -> 0.990 / 1.013 / 1.117, causal 0.934 / 1.049 /
// 1.185 -> 0.980 / 1.069 / 1.201; D = 64 (no walk) 1k 1.042 -> 1.070, causal 1.023 ->
// 1.060. Without the walk above D = 64 (the small grids, paged) unmeasured: left as they
// were.
static bool tma_store_by_default(const AttentionLoops& a, const AttentionWgmmaTiles& t) {
  if (a.varlen) return false;
  return t.persistent || (t.head_dim <= 64 && !a.paged);
}

// ATTN_STMATRIX's default: with the TMA store (its O buffer is written either way; stmatrix
// won at every point measured, see tma_store_by_default), and for varlen and paged KV, which
// do not take the TMA store: stmatrix and the threads' copy-out against the fragments' 4-byte
// stores (H200, 2026-11-29 14:37, D = 128, 16 heads, `attention_bench.py --varlen --ab
// ATTN_STMATRIX=1`, varlen time with / without) 0.941-0.994 at all nine mixes, no mask
// 0.983 / 0.974 / 0.990 and causal 0.963 / 0.969 / 0.968 at the three default mixes,
// 1023 x 8 0.941; paged prefill (the 3 x 96 tile, Sq = Sk = 2048, page 64, paged /
// contiguous time in two runs) 1.325 / 1.328 / 1.252 / 1.275 -> 1.262 / 1.253 / 1.225 /
// 1.207. The dense kernels without the walk (small grids) unmeasured: as before.
static bool stmatrix_by_default(const AttentionLoops& a, const AttentionWgmmaTiles& t) {
  return t.tma_store || a.varlen || a.paged;
}

// ATTN_LOAD_WARPS's default: four issuing warps for paged KV where a key block is four or
// more pages (16- and 32-key pages under 128-key blocks: 8 and 4 boxes per 64-column chunk
// and half block), one otherwise. Under ncu (H200, 2026-11-29, Sq = Sk = 2048, B 2, Hq 32 /
// Hkv 8, D 128, the overlap tile) page 16 ran 1.257x the contiguous form against page 64's
// 1.094x: the producer never waited for a slot (its retry loop ran 0 times) while the
// consumers' waits for a full slot rose from 5.4 % to 12.5 % of their stall samples, and the
// producer's samples sat in the 32 box issues a block, each ~15 dependent instructions
// (stall_wait 1139 of 2227), not in the table reads (stall_long_sb 95).
static int64_t load_warps_by_default(const AttentionLoops& a, const AttentionWgmmaTiles& t) {
  if (!a.paged || !t.producer || (t.persistent && t.dynamic)) return 1;
  return t.block_n / attention_page_rows(a, t.block_n) >= 4 ? 4 : 1;
}

// Registers: the S and O accumulators are f32, BLOCK_N/2 + D/2 per thread (a warpgroup's
// m64nN accumulator spreads 64 x N over 128 threads; D rounded up to 16, the spans'
// columns); P's bf16 pairs are packed from S at each wgmma, the row statistics, addresses
// and the loop take ~50 more. 255 per thread at most (ATTN_WG = 2 is 256 threads: 255 x
// 256 fits the 64k register file).
AttentionWgmmaTiles attention_wgmma_tiles(CompileState& s, const AttentionLoops& a) {
  AttentionWgmmaTiles t;
  if (!a.D.is_const())
    throw Error("attention's GPU kernel needs a numeric head dim D (the O accumulator is a "
                "register array sized by it); D is " + a.D.str());
  t.head_dim = a.D.const_value();
  const int64_t D = t.head_dim;
  if (D > 256)
    throw Error("ATTN_MMA=wgmma takes head dims up to 256 (O += P V's wgmma N stops at 256, "
                "and O's D/2 f32 accumulators per thread live in registers); D = " +
                std::to_string(D) + ": no attention kernel of Loom takes it (the mma.sync "
                "kernel stops at 256 too); use a head dim of at most 256");
  if (!attention_wgmma_head_dim(D)) {
    const std::string scale = shortest_text(a.scale);
    throw Error("ATTN_MMA=wgmma takes head dims that are multiples of 8 (Q, K and V arrive "
                "by TMA, whose rows are multiples of 16 bytes); D = " + std::to_string(D) +
                ": pad the head dim to " + std::to_string((D + 7) / 8 * 8) + " with zero "
                "columns in Q, K and V (Q K^T is unchanged; O's extra columns are zero) and "
                "keep this attention's scale with scale=" + scale);
  }
  t.padded_dim = (D + 15) / 16 * 16;
  t.spans = attention_spans(D);
  const int64_t Dp = t.padded_dim;
  // Packed sequences refuse STAGE_OUTPUT on both kernels (k:012: their rows are [T, H, D]):
  // the only fix is to drop it.
  if (a.varlen && s.knobs.has("STAGE_OUTPUT") && s.knobs.get_int("STAGE_OUTPUT", 0) != 0)
    throw Error("STAGE_OUTPUT=1 copies a block's rows of O out as one contiguous [BLOCK_M, D] of "
                "one head, and packed sequences' rows are [T, H, D] (a row stride of H·D); no "
                "attention kernel stages them: drop STAGE_OUTPUT");
  // The other attention kernels' own knobs mean nothing here: refused rather than ignored.
  // Which knobs those are comes from the families' declarations (src/passes/families/): what
  // the mma.sync kernel or decode's split form reads and this family neither reads nor
  // honours (attention_loops.cpp refuses the converse on the mma.sync kernel).
  static const KernelFamily* const self = find_family("attention_wgmma");
  static const KernelFamily* const mma_sync = find_family("attention_mma_sync");
  static const KernelFamily* const decode = find_family("attention_decode");
  LOOM_CHECK(self && mma_sync && decode, "the attention families are registered");
  for (const auto& [knob, value] : s.knobs.values()) {
    if (self->accepts(knob, value) || !(mma_sync->reads_knob(knob) || decode->reads_knob(knob))) continue;
    // (Decode's split form is the mma.sync kernel over a KV split: named for its own knobs.)
    const bool split_only = !mma_sync->reads_knob(knob);
    throw Error(knob + " is a knob of " +
                (split_only ? "decode attention's split form (the mma.sync kernel over a KV split, "
                              "SPLIT_KV > 1)"
                            : "attention's mma.sync kernel (k:012)") +
                ", and this one is the wgmma kernel (k:013; ATTN_MMA=wgmma, the default on sm_90a)" +
                (split_only ? ", which does not split the keys" : "") + ": add ATTN_MMA=mma_sync, or drop " +
                knob);
  }
  const bool has_m = s.knobs.has("BLOCK_M");
  // ATTN_OVERLAP's default: on for dense attention above 224 stored columns (D = 232..256),
  // where the two consumer warpgroups and the producer are the defaults, unless a given
  // knob rules it out (thread 0 issuing, three warpgroups, ATTN_PACK_P=0). Measured on the
  // H200 (2026-11-28, 16k tokens, loom/cuDNN, K and V released apart): D = 256 non-causal
  // 1k / 4k 0.915 / 0.979x against 0.92 / 0.94x without it, causal 0.826 / 0.983x against
  // 0.81 / 0.90x. Paged KV keeps it off at D = 256 (unmeasured there; varlen and paged
  // prefill at D = 113..128 take it: varlen_overlap_dims, paged_overlap), and so does a causal
  // mask under the persistent walk below 1024 keys (causal_walk_overlap_shape, above: the
  // walk with the overlap measured 0.913x -> 0.930x at 1k, 0.979x -> 1.045x at 2k once K ran
  // ahead of V; it spilled 4 B at D = 256 until the consumers bound their thread lets after
  // setmaxnreg).
  // (Given or the walk's default with the producer: kept in step if the default changes.)
  AttentionWgmmaTiles with_producer;
  with_producer.producer = true;
  with_producer.padded_dim = Dp;
  const bool causal_walk =
      a.causal != Causal::None &&
      s.knobs.get_int("ATTN_PERSISTENT", persistent_by_default(a, with_producer, false) ? 1 : 0) != 0;
  const int64_t wg_given = s.knobs.has("ATTN_WG") ? s.knobs.get_int("ATTN_WG", 2)
                           : has_m ? s.knobs.get_int("BLOCK_M", 128) / 64 : 2;
  // D = 113..128 (FlashAttention-3's D = 128 tile, 2 x 64 rows by 128 keys with the
  // ping-pong, below): measured on the H200 (checkpoint 2026-11-28 09:57, 16k tokens,
  // loom/cuDNN, 1k / 4k) 0.961 / 1.011x non-causal and 0.847 / 0.983x causal against the
  // three-warpgroup tile's (2 x 128 at 1k) 0.939 / 1.002x and 0.815 / 0.949x; 176 keys
  // (FA3's non-causal) 0.937 / 0.995x, 0.780 / 0.974x. Not at D = 96 (3 x 144 without it
  // 1.22x / 1.12x at 4k against 1.07-1.09x) nor D = 64 (1.04x against 0.88-0.95x).
  // Nor where the keys are a constant that fits one 128-key block: no key loop to overlap
  // (the tiles without it are what those shapes were measured and compiled with).
  // Nor at two blocks (Sk <= 256): little to overlap, and with the persistent walk ptxas
  // spilled 72 B at 130 x 200 keys, D = 128 (none from 777 keys up).
  const bool one_block_keys = a.Sk.is_const() && a.Sk.const_value() <= 256;
  const bool overlap_dims = (Dp > 224 || (Dp > 112 && Dp <= 128)) && !one_block_keys;
  // An explicit dynamic schedule keeps it off too: its unit hand-off's registers with the
  // overlap spilled 4-8 B at D = 256 without a mask (NVRTC 13.0; found when the two merged;
  // no spill since the thread lets moved, but unmeasured without a mask). Not in the causal
  // walk's overlap shape, where the dynamic schedule is the default and was measured.
  // Varlen at D = 113..128, with or without a mask (varlen_overlap_dims: the tile its walk
  // was measured with, the dynamic schedule its default); elsewhere off (unmeasured).
  const bool varlen_overlap = varlen_overlap_dims(a, Dp);
  // Paged prefill at D = 113..128 likewise (first measured with one CTA per query block, before
  // the walk took paged KV; under the walk since, paged_walk_default, and causal there with
  // the overlap as the dense causal walk: walk_overlap). Measured on the H200 (2026-11-29 15:20, `attention_bench.py --paged 64 --sq 2048
  // --sk 2048`, B 2 / 8, Hq 32, Hkv 8 / 32, paged / contiguous time, both with O by stmatrix):
  // 1.269 / 1.259 / 1.198 / 1.187 on the 3 x 96 tile -> 1.093 / 1.094 / 1.082 / 1.076 on the
  // overlap tile (2 x 64 rows by 128 keys, the ping-pong); 16-key pages (B 2, Hkv 8) 1.307
  // -> 1.275; 256-key pages (B 2 / 8, Hkv 8) paged time 272 / 967 us -> 233 / 878 us (1.09 /
  // 1.07 of contiguous). Only at its 128 keys: with a given BLOCK_N=112 the overlap's
  // registers spilled 72 B under the page-piece addressing (the 3 x 112 tile then, as before).
  const bool paged_overlap = a.paged && !a.varlen && Dp > 112 && Dp <= 128 &&
                             s.knobs.get_int("BLOCK_N", 128) == 128;
  const bool walk_overlap = causal_walk && (causal_walk_overlap_shape(a, Dp) || varlen_overlap || paged_overlap);
  const bool dynamic_given = s.knobs.get_str("ATTN_SCHEDULE", "") == "dynamic";
  const bool overlap_default = overlap_dims && (!a.varlen || varlen_overlap) && (!a.paged || paged_overlap) &&
                               (!causal_walk || walk_overlap) &&
                               (!dynamic_given || walk_overlap || varlen_overlap) && wg_given < 3 &&
                               s.knobs.get_int("ATTN_PRODUCER", 1) != 0 &&
                               s.knobs.get_int("ATTN_PACK_P", 1) != 0;
  t.overlap = s.knob("ATTN_OVERLAP", overlap_default ? 1 : 0) != 0;
  // FlashAttention-3's tile for head dims up to 96, 192 query rows (three consumer
  // warpgroups at 160 registers, the producer at 24) by 144 keys: measured on the H100
  // at D = 96 (16k tokens), 1.22x / 1.30x cuDNN non-causal / causal against 1.00x / 1.05x
  // for two warpgroups by 128 keys — one warpgroup's softmax runs under the others' MMAs,
  // and K and V are read once per 192 rows. Taken from 72 to 112 stored columns, where
  // it fits: 72 + 48 accumulators (D = 96) or 64 + 56 (D = 112 at 128 keys, the most its
  // 160 registers hold) plus ~40, the same 160 as at the measured point; D = 80 takes
  // the measured D = 96 tile (FA3's for every head dim up to 96). D = 128 at 112 keys
  // (56 + 64 + ~40 = 160): measured on the H100 (2026-11-27, 16k tokens) 0.97x / 1.00x
  // cuDNN non-causal at seqlen 4k / 16k and 0.93x / 1.02x causal, against 0.87x / 0.84x
  // and 0.89x / 0.92x for two warpgroups by 128 keys (96 keys: 0.94 / 0.97 / 0.93 / 1.01;
  // 80: 0.92 / 0.93 / 0.88 / 0.95; a third K/V stage: no gain). D = 64 keeps two
  // warpgroups (three measured 0.95-1.09x against its 1.04-1.05x). Not with ATTN_OVERLAP
  // (S, P's 16-bit pairs and O do not fit 160), nor where BLOCK_M or ATTN_WG is given, nor
  // with a given BLOCK_N whose accumulators do not fit 160 registers (two warpgroups
  // then, as before this tile: an explicit BLOCK_N=176 at D = 128 stays legal).
  const bool n_fits_wg3 = !s.knobs.has("BLOCK_N") || s.knobs.get_int("BLOCK_N", 0) / 2 + Dp / 2 + 40 <= 160;
  // Short sequences (dense, Sq a constant up to kShortQueries) take two warpgroups by 128
  // keys instead (ATTN_PINGPONG on at D = 128, below): 192-row query blocks pad 1024 rows to 1152 (11 % of
  // the work on rows that do not exist) and give each head a third fewer CTAs. Measured
  // on the H100 (2026-11-28, 16k tokens, loom/cuDNN): D = 128 at 1k 0.833x -> 0.937x
  // non-causal and 0.725x -> 0.810x causal (with the ping-pong below), at 4k the three
  // warpgroups still win (1.002x / 0.947x against 0.975x / 0.890x); D = 96 causal at 1k
  // 0.831x -> 0.925x, at 2k 1.029x against 0.986x. Checkpoint (06:30): 1k +6-12 % at D 96
  // and 128, 2k even or worse, so 1536 rows.
  // Only where the keys are short too (Sk a constant up to kShortQueries; measured at
  // Sq = Sk): against many keys (a chunk of queries over a long cache) the three
  // warpgroups' longer key loop won at 4k-16k by more than the 11 % of padding. The
  // serving forms keep the three warpgroups (unmeasured there).
  const bool short_q = !a.varlen && !a.paged && a.Sq.is_const() &&
                       a.Sq.const_value() <= kShortQueries && a.Sk.is_const() &&
                       a.Sk.const_value() <= kShortQueries;
  const bool fa3_range = Dp > 64 && Dp <= 128 && !t.overlap;
  const bool short_tile = fa3_range && short_q && !has_m && !s.knobs.has("ATTN_WG");
  const bool fa3_tile = fa3_range && n_fits_wg3 && !short_tile;
  t.warpgroups = s.knob("ATTN_WG", has_m ? std::max<int64_t>(1, s.knobs.get_int("BLOCK_M", 128) / 64)
                                         : fa3_tile ? 3 : 2);
  if (t.warpgroups < 1 || t.warpgroups > 3)
    throw Error("ATTN_WG=" + std::to_string(t.warpgroups) + ": the wgmma kernel has 1 to 3 "
                "consumer warpgroups (384 threads at most)");
  t.block_m = 64 * t.warpgroups;
  if (has_m && s.knobs.get_int("BLOCK_M", 0) != t.block_m)
    throw Error("BLOCK_M=" + std::to_string(s.knobs.get_int("BLOCK_M", 0)) + " with ATTN_MMA=wgmma: "
                "each warpgroup owns 64 query rows, so BLOCK_M = 64 x ATTN_WG = " +
                std::to_string(t.block_m) + "; set BLOCK_M to a multiple of 64 up to 192 and "
                "leave ATTN_WG out, drop BLOCK_M, or use ATTN_MMA=mma_sync");
  s.used_knobs["BLOCK_M"] = std::to_string(t.block_m);
  if (s.knobs.has("WARPS") && s.knobs.get_int("WARPS", 0) != 4 * t.warpgroups)
    throw Error("WARPS=" + std::to_string(s.knobs.get_int("WARPS", 0)) + " with ATTN_MMA=wgmma: "
                "the kernel has 4 warps per warpgroup, " + std::to_string(4 * t.warpgroups) +
                " for ATTN_WG=" + std::to_string(t.warpgroups) + "; drop WARPS, or use ATTN_MMA=mma_sync");
  // Defaults measured on the H100 (docs/attention.md): the producer warpgroup from D = 128
  // on (+2 to +10 % at D = 128, +4 to +19 % at D = 256 over thread 0 issuing), not at
  // D = 64 (-6 to -15 %); ATTN_OVERLAP above 224 stored columns (its default, above).
  // Between the measured dims, by the reason behind them: at D = 64 two CTAs share an SM
  // (80 KiB of shared memory, 122 registers x 256 threads), and the producer's 128 more
  // threads at 168 registers leave room for one; from D = 80 on (stored as 64 + 16
  // columns) one CTA of the default shape has the SM to itself anyway — 130+ registers
  // (the O accumulator's 8 more) x 256 threads pass 64k at two CTAs, and D = 96 and 112
  // need 120 and 140 KiB of shared memory — so the producer costs no occupancy there, as
  // at D = 128. Hence the producer above 64 padded columns.
  // Three warpgroups take the producer only in the tile above (thread 0 issuing measured
  // 0.94x / 0.99x cuDNN at D = 96 against the producer's 1.00x / 1.05x).
  const bool wg3_tile = fa3_tile && t.warpgroups == 3;
  t.producer =
      s.knob("ATTN_PRODUCER", Dp > 64 && (t.warpgroups < 3 || wg3_tile) ? 1 : 0) != 0;
  // BLOCK_N: 144 / 128 / 112 in the three-warpgroup tile above; otherwise 128 up to 160 stored
  // columns, then 64, what the registers allow
  // (below). D = 160 at 128 keys keeps 64 + 80 accumulators plus ~72, 216 of the
  // consumers' 240, no spills, and measured 1.08x / 1.17x cuDNN against 64 keys' 1.02x /
  // 1.11x (H100, 16k tokens); 64 stays D = 192's and 256's measured choice (D = 256 at 176
  // accumulators spilled).
  // With ATTN_OVERLAP: 128 up to 160 stored columns, 80 above (FlashAttention-3's D = 256
  // tile): S (BLOCK_N/2), P's 16-bit pairs (BLOCK_N/4) and O fit 240 registers there.
  // D = 256 without a mask: 80 keys (40 + 128 accumulators + ~72 = the consumers' 240
  // registers; 224 KiB of shared memory) measured on the H100 (2026-11-28, 16k tokens) 0.919x / 0.930x cuDNN at 1k / 4k against 64 keys'
  // 0.880x / 0.899x; causal mixed (0.805x / 0.914x against 0.816x / 0.904x): 64 there.
  const bool wide_80 = t.overlap || (Dp > 224 && a.causal == Causal::None);
  const int64_t wide_n = Dp > 160 ? (wide_80 ? 80 : 64) : 128;
  // Paged KV at D = 128: 96 keys, not 112. A key block is gcd(BLOCK_N, page)-row TMA
  // boxes over the pool (k:013), and 112 keys are seven 16-row pieces at every page size;
  // 96 are three of 32. Measured on the H100 (2026-11-27, B = 8, Hq 32 / Hkv 8, 2048 x
  // 2048, page 256, one run): paged 1046 us at 96 keys against 1090 at 112, the contiguous
  // form 915 and 910 (64 keys, one box per block over 64-key pages: paged 1098).
  const int64_t wg3_n = Dp <= 96 ? 144 : Dp <= 112 ? 128 : a.paged ? 96 : 112;
  t.block_n = s.knob("BLOCK_N", wg3_tile ? wg3_n : wide_n);
  if (t.block_n % 16 != 0 || t.block_n < 16 || t.block_n > 256)
    throw Error("BLOCK_N=" + std::to_string(t.block_n) + " with ATTN_MMA=wgmma: S = Q K^T is one "
                "m64nNk16 wgmma with N = BLOCK_N and O += P V steps k16 over it: a multiple of "
                "16 from 16 to 256");
  t.kv_stages = s.knob("KV_STAGES", 2);
  if (t.kv_stages != 2 && t.kv_stages != 3)
    throw Error("KV_STAGES=" + std::to_string(t.kv_stages) + " with ATTN_MMA=wgmma: the TMA "
                "kernel keeps a ring of 2 or 3 K/V buffers (block kb+S-1 lands under block "
                "kb's math)");
  if (t.overlap && !t.producer)
    throw Error("ATTN_OVERLAP=1 needs ATTN_PRODUCER=1: with thread 0 issuing the loads after "
                "a block barrier, a slot is free only once the block after it was read, one "
                "block too late for the next block's S; add ATTN_PRODUCER=1");
  // ATTN_PINGPONG=1 (FlashAttention-3's inter-warpgroup ping-pong): named barrier 1 + w
  // hands warpgroup w the turn to issue its wgmmas; it needs two or more consumer
  // warpgroups that run apart from the producer (thread 0 issuing puts a block barrier in
  // every key block, which already lines the warpgroups up).
  // On by default in the short-sequence tile at D = 128 (113..128 stored columns): measured
  // 0.937x / 0.810x cuDNN at 1k non-causal / causal against 0.913x / 0.800x without (D = 96
  // causal: 0.910x against 0.925x, off there).
  // With the overlap at D = 113..128 too (FA3's tile: the measured 2 x 128 above).
  const bool pp_default = (short_tile || (t.overlap && t.warpgroups >= 2)) && Dp > 112 &&
                          Dp <= 128 && t.producer;
  t.pingpong = s.knob("ATTN_PINGPONG", pp_default ? 1 : 0) != 0;
  if (t.pingpong && t.warpgroups < 2)
    throw Error("ATTN_PINGPONG=1 with ATTN_WG=" + std::to_string(t.warpgroups) + ": the ping-pong "
                "hands the tensor cores between consumer warpgroups and needs 2 or 3 of them; "
                "set ATTN_WG=2 or 3 (or BLOCK_M=128 or 192), or drop ATTN_PINGPONG");
  if (t.pingpong && !t.producer)
    throw Error("ATTN_PINGPONG=1 needs ATTN_PRODUCER=1: with thread 0 issuing the loads every key "
                "block starts with a block barrier that lines the warpgroups up, so they cannot "
                "take turns; add ATTN_PRODUCER=1");
  // ATTN_PACK_P=1: P V reads P from a 16-bit register array the softmax's result is
  // converted into once (FlashAttention-3's tOrP), not packed from S's f32 accumulators at
  // each wgmma (where ptxas injects a warpgroup.arrive per k-step, C7519). The overlap
  // needs it (the next S overwrites S's array while P V runs). The default at D = 128
  // (113..128 stored columns): measured on the H100 (2026-11-27, 16k tokens, the 3 x 112
  // tile) 0.971x / 1.009x cuDNN non-causal at 4k / 16k and 0.947x / 1.067x causal,
  // against 0.963x / 0.986x / 0.927x / 1.026x packing at each wgmma. At D = 256 (2 x 64,
  // 4k non-causal) it measured the same (0.870x / 0.873x): left off there and elsewhere
  // until measured. Nor where the keys are a constant that fits one block: no key loop for
  // it to gain in, and there (causal, Sq > Sk: Sk = 17 or 100 at 1000 queries) ptxas
  // spilled 8 B with the array in the three warpgroups' 160 registers.
  const bool one_key_block = a.Sk.is_const() && a.Sk.const_value() <= t.block_n;
  t.pack_p = s.knob("ATTN_PACK_P",
                    t.overlap || (Dp > 112 && Dp <= 128 && !one_key_block) ? 1 : 0) != 0;
  if (t.overlap && !t.pack_p)
    throw Error("ATTN_OVERLAP=1 with ATTN_PACK_P=0: the overlap issues the next block's S into "
                "S's accumulators while P V still reads P, so P must live in its own 16-bit "
                "array; drop ATTN_PACK_P=0, or ATTN_OVERLAP");
  // ATTN_O_UNDER_S=1 (with the overlap; the default there): O's rescale by block kb's
  // alpha runs right after block kb + 1's S is issued, before P V of block kb, so its D/2
  // multiplies per thread run while S holds the tensor cores (FlashAttention-3's
  // rescale_o between its two gemms). 0: after P V of block kb - 1 retired, at the end of
  // the softmax's key block, where the tensor cores wait for it (the loop then waits for
  // K and issues S). The same products in the same order either way (O is rescaled
  // before the P V that adds block kb).
  t.rescale_under_s = s.knob("ATTN_O_UNDER_S", t.overlap ? 1 : 0) != 0;
  if (t.rescale_under_s && !t.overlap)
    throw Error("ATTN_O_UNDER_S=1 places O's rescale under the next block's S, which "
                "only ATTN_OVERLAP=1 issues before the softmax; without the overlap O is "
                "rescaled in the softmax: drop ATTN_O_UNDER_S, or add ATTN_OVERLAP=1");
  // ATTN_PEEL_MASK=1: the masked key blocks as their own loop after the unmasked ones. Where
  // BLOCK_N does not divide Sk (80 keys at D = 256: 1024 / 80) ptxas if-converted the last
  // block's mask into every block (40 FSEL and the compares per block, SASS of NVRTC 13.0),
  // and a causal mask's test ran in every block though only the diagonal's 1-3 blocks
  // mask anything. Any form takes it; the default is below, once the walk is known.
  // Without the overlap P's pairs take S's registers as each pair is converted (S is dead
  // after); with it S is busy again with the next block while P V reads P.
  t.acc_regs = (t.overlap ? t.block_n / 2 + t.block_n / 4 : t.block_n / 2) + Dp / 2;
  // Besides the accumulators: row statistics, addresses, P's packed pairs, the loop. ~40
  // up to D = 128, ~72 at D = 256 (192 accumulators there spilled 144 B, 176 spilled
  // 20 B, 160 none). With ATTN_OVERLAP, ~40 at every D, P's pairs counted in acc_regs
  // (NVRTC 13.0, sm_90a, no spill and no wgmma serialized: D = 128 at BLOCK_N = 176, 196
  // accumulators; D = 256 at 80, 188). Before P had its own 16-bit array the overlap kept
  // two f32 S arrays, and at D = 128, BLOCK_N = 128 (192 accumulators) ptxas serialized
  // every wgmma for want of registers (its C7512 "Potential Performance Loss", no spill):
  // what measured ATTN_OVERLAP=1 5-30 % slower at D = 128 (bench/NOTES.md).
  const int64_t overhead = t.overlap ? 40 : Dp > 128 ? 72 : 40;
  if (t.acc_regs + overhead > 255)
    throw Error("BLOCK_N=" + std::to_string(t.block_n) + " with D=" + std::to_string(D) +
                " and ATTN_MMA=wgmma keeps " + std::to_string(t.acc_regs) + " f32 accumulator "
                "registers per thread (S: BLOCK_N/2, and P's 16-bit pairs BLOCK_N/4 with ATTN_OVERLAP; "
                "O: D/2) plus ~" +
                std::to_string(overhead) + " more, past 255: use a smaller BLOCK_N");
  // The consumers' share of the register file beside a producer of `producer_regs`: what the
  // CTA was given at launch (setmaxnreg_pool: one CTA an SM) less the producer's, at most
  // 240. 24: 240 for one or two warpgroups, 160 for three (FlashAttention-3's split); 32:
  // 232 for two, the same for one and three.
  auto consumer_regs_beside = [&](int64_t producer_regs) {
    const int64_t pool = setmaxnreg_pool(128 * (t.warpgroups + 1), 1);
    return std::min<int64_t>(240, (pool - producer_regs * 128) / (128 * t.warpgroups) / 8 * 8);
  };
  auto check_consumer_regs = [&] {
    if (t.acc_regs + overhead > t.consumer_regs)
      throw Error("ATTN_WG=" + std::to_string(t.warpgroups) + " with ATTN_PRODUCER=1 leaves " +
                  std::to_string(t.consumer_regs) + " registers per consumer thread, and BLOCK_N=" +
                  std::to_string(t.block_n) + " with D=" + std::to_string(D) + " keeps " +
                  std::to_string(t.acc_regs) + " f32 accumulator registers plus ~" + std::to_string(overhead) + " more: lower "
                  "BLOCK_N, ATTN_WG, or use ATTN_PRODUCER=0");
  };
  if (t.producer) {
    t.consumer_regs = consumer_regs_beside(t.producer_regs);
    check_consumer_regs();
  }
  // MIN_BLOCKS (k:013 passes it to __launch_bounds__): more than one CTA an SM caps every
  // thread at its share of the file, which the producer's split (the consumers take what one
  // CTA holds) and, without it, the accumulators must fit — else ptxas stops with C7602
  // ("insufficient registers") or setmaxnreg waits forever.
  if (const int64_t min_blocks = s.knobs.get_int("MIN_BLOCKS", 1); min_blocks > 1) {
    const int64_t threads = 128 * (t.warpgroups + (t.producer ? 1 : 0));
    const int64_t per_thread = launch_regs_per_thread(threads, min_blocks);
    if (t.producer)
      throw Error("MIN_BLOCKS=" + std::to_string(min_blocks) + " asks for " + std::to_string(min_blocks) +
                  " CTAs of " + std::to_string(threads) + " threads an SM (" + std::to_string(per_thread) +
                  " registers a thread), and with ATTN_PRODUCER=1 the producer warpgroup hands its "
                  "registers to the consumers (setmaxnreg, " + std::to_string(t.consumer_regs) +
                  " a consumer thread) out of one CTA's whole register file: drop MIN_BLOCKS (this "
                  "kernel runs one CTA an SM), or use ATTN_PRODUCER=0");
    // Without the producer ptxas fits the rest in ~16 more registers under the cap (NVRTC
    // 13.0, thread 0 issuing, no overlap): accumulators 16 or more under it compiled (D 64
    // at 80 and 64 of 80 / 64, D 128 at 112 of 128), at the cap or over it ptxas stopped
    // (C7602, or every wgmma serialized: D 96 at 80 of 80, D 128 at 80 of 80 and 128 of
    // 128); one point at the cap compiled (D 96, 64 of 64) and is refused with them.
    constexpr int64_t kCappedOverhead = 16;
    if (t.acc_regs + kCappedOverhead > per_thread)
      throw Error("MIN_BLOCKS=" + std::to_string(min_blocks) + " leaves " + std::to_string(per_thread) +
                  " registers a thread for " + std::to_string(min_blocks) + " CTAs of " +
                  std::to_string(threads) + " threads an SM, and BLOCK_N=" + std::to_string(t.block_n) +
                  " with D=" + std::to_string(D) + " keeps " + std::to_string(t.acc_regs) +
                  " f32 accumulator registers plus ~" + std::to_string(kCappedOverhead) +
                  " more: lower MIN_BLOCKS or BLOCK_N");
  }
  t.smem_bytes = (t.block_m + 2 * t.kv_stages * t.block_n) * Dp * 2;
  // ATTN_PERSISTENT=1: the grid is ATTN_CTAS CTAs (default the SM count: the producer
  // kernel holds one CTA per SM, its setmaxnreg split of the whole register file) that
  // walk the work units; the producer starts the next unit's K/V and Q while the
  // consumers finish the current one. Dense and varlen (each unit binds its sequence's
  // lengths from cu_seqlens; units past their sequence's rows are skipped); not paged.
  t.persistent = s.knob("ATTN_PERSISTENT", persistent_by_default(a, t) ? 1 : 0) != 0;
  if (t.persistent && !t.producer)
    throw Error("ATTN_PERSISTENT=1 needs ATTN_PRODUCER=1: the producer warpgroup runs ahead into "
                "the next work unit's loads while the consumers finish the current one, and "
                "thread 0 issuing between block barriers cannot; add ATTN_PRODUCER=1 (or drop "
                "ATTN_PERSISTENT)");
  {
    const std::string schedule = s.knobs.get_str("ATTN_SCHEDULE", schedule_by_default(a, t));
    if (t.persistent || s.knobs.has("ATTN_SCHEDULE")) s.used_knobs["ATTN_SCHEDULE"] = schedule;
    // static means one fixed order, which the plain grid (one CTA per unit) has too; the
    // work counter needs the walk.
    if (schedule == "dynamic" && !t.persistent)
      throw Error("ATTN_SCHEDULE=dynamic hands the persistent walk's units out from a work "
                  "counter and ATTN_PERSISTENT is 0: add ATTN_PERSISTENT=1, or drop ATTN_SCHEDULE");
    t.dynamic = schedule == "dynamic";
  }
  // Paged KV under the causal or dynamic walk: the producer at 32 registers (24 spilled;
  // kPagedWalkProducerRegs), the consumers at what is left beside it.
  if (t.producer && t.persistent && a.paged && (t.dynamic || a.causal != Causal::None)) {
    t.producer_regs = kPagedWalkProducerRegs;
    t.consumer_regs = consumer_regs_beside(t.producer_regs);
    check_consumer_regs();
  }
  t.load_warps = s.knob("ATTN_LOAD_WARPS", load_warps_by_default(a, t));
  if (t.load_warps > 1 && !t.producer)
    throw Error("ATTN_LOAD_WARPS=" + std::to_string(t.load_warps) + " spreads the TMA issue over "
                "the producer warpgroup's warps and ATTN_PRODUCER is 0 (thread 0 issues between "
                "the consumers' work): add ATTN_PRODUCER=1, or drop ATTN_LOAD_WARPS");
  // Under the walk every issuing warp follows the static order on its own (each computes
  // the same units); the dynamic schedule's units come from one fetch and varlen's skips
  // from one thread's scan, which the other warps could not follow.
  if (t.load_warps > 1 && t.persistent && (t.dynamic || a.varlen))
    throw Error("ATTN_LOAD_WARPS=" + std::to_string(t.load_warps) + " spreads a key block's TMA "
                "issue over producer warps, each walking the units on its own, and " +
                std::string(a.varlen ? "varlen's walk skips units by one thread's scan"
                                     : "ATTN_SCHEDULE=dynamic hands the units out from one thread's fetch") +
                ": drop ATTN_LOAD_WARPS" + (a.varlen ? "" : ", or set ATTN_SCHEDULE=static") +
                " (or ATTN_PERSISTENT=0)");

  // ATTN_PEEL_MASK's default, where the H200 measured a win (2026-11-28 12:40, 16k tokens,
  // bf16, loom/cuDNN, defaults against ATTN_PEEL_MASK=1):
  //   D = 128 causal: 1k 0.849x -> 0.899x (the short tile: 2 x 64 rows by 128 keys, the
  //   ping-pong, the walk), 4k 1.023x -> 1.015x (3 x 112: neutral to a loss; there one
  //   warpgroup's softmax already runs under the others' wgmmas, so the FSEL/ISETP issue
  //   slots it frees are not on the critical path). Hence on in the short tile only, which
  //   is what bounds it: Sq and Sk constants up to kShortQueries (1536); past it the 3 x 112
  //   tile, where it measured neutral. Not at one key block (Sk <= BLOCK_N: every block is
  //   the diagonal, nothing to peel).
  //   D = 256 causal with the overlap under the walk at 4k and up: taken with it (the
  //   overlap was measured peeled, 1.076x; the walk alone peeled or not 1.019x / 1.021x).
  //   Not without a mask: D = 128 0.961x / 0.960x at 1k, 1.016x / 1.017x at 4k (128 keys
  //   divide Sk: the same kernel); D = 256 (80 keys, the ragged block) 1k 0.913x -> 0.905x,
  //   4k 1.007x -> 1.014x, 16k 1.051x -> 1.021x. Nor D = 256 causal under the walk alone
  //   (1k 0.922x / 0.919x, 4k 1.021x / 1.019x, 16k 1.047x / 1.046x), nor elsewhere
  //   (unmeasured).
  const bool peel_short = a.causal != Causal::None && short_tile && Dp > 112 && Dp <= 128 &&
                          !(a.Sk.is_const() && a.Sk.const_value() <= t.block_n);
  //   Varlen under its default walks (H200, 2026-11-28 20:56-21:07, vs_pad as above): causal
  //   in the 3 x 112 tile 1.305 / 1.335 / 1.233 -> 1.248 / 1.283 / 1.151 at the three default
  //   mixes; without a mask, the overlap tile (one CTA per query block) 1.035 / 1.155 /
  //   1.313 / 1.118 -> 1.023 / 1.143 / 1.311 / 1.098 at 8192 and the three mixes, and under
  //   the static walk 0.4-2.5 % better at six of seven mixes (128 x 48: 4.6 % worse). Each
  //   sequence's last key block is ragged there, its mask run-time.
  const bool peel_varlen = t.persistent && varlen_walk_default(a, t);
  const bool peel_walk_overlap = walk_overlap && t.overlap && t.persistent;
  t.peel_mask = s.knob("ATTN_PEEL_MASK", peel_short || peel_walk_overlap || peel_varlen ? 1 : 0) != 0;
  t.ctas = s.knob("ATTN_CTAS", 0);
  if (t.ctas != 0 && !t.persistent)
    throw Error("ATTN_CTAS sizes the persistent grid and ATTN_PERSISTENT is 0: add "
                "ATTN_PERSISTENT=1, or drop ATTN_CTAS");
  if (t.persistent && t.ctas == 0) {
    if (s.target.sm_count < 1)
      throw Error("ATTN_PERSISTENT=1 sizes the grid by the GPU's SM count, and the target has "
                  "none: compile for a probed GPU, or give ATTN_CTAS");
    t.ctas = s.target.sm_count;
  }
  // ATTN_TMA_STORE=1: O through shared memory and TMA stores (clipped at Sq and D by the
  // tensor map), into a buffer of its own when it fits beside Q and the ring (the next
  // unit's Q may then land while the store reads), else into Q's slot. Not for packed
  // sequences: a box past a sequence's rows would write the next sequence's.
  const bool o_fits = t.smem_bytes + t.block_m * Dp * 2 + 64 <= s.target.smem_per_block;
  t.tma_store = s.knob("ATTN_TMA_STORE", tma_store_by_default(a, t) ? 1 : 0) != 0;
  if (t.tma_store && a.varlen)
    throw Error("ATTN_TMA_STORE=1 stores O in boxes of 64 rows, and packed sequences' rows "
                "[T, H, D] run into the next sequence's past a sequence's end (only a tensor's "
                "end clips a box): drop ATTN_TMA_STORE for varlen attention");
  // ATTN_STMATRIX=1: O reaches that buffer by stmatrix.x4; without the TMA store it then
  // leaves by the threads' 16-byte row copies under the row test (the copy-out: varlen,
  // and the kernels without the walk).
  t.stmatrix = s.knob("ATTN_STMATRIX", stmatrix_by_default(a, t) ? 1 : 0) != 0;
  if (t.o_in_shared()) {
    t.o_in_q = !o_fits;
    if (!t.o_in_q) t.smem_bytes += t.block_m * Dp * 2;
  }
  if (t.smem_bytes + 64 > s.target.smem_per_block)
    throw Error("ATTN_WG=" + std::to_string(t.warpgroups) + ",BLOCK_N=" + std::to_string(t.block_n) +
                ",KV_STAGES=" + std::to_string(t.kv_stages) +
                " with D=" + std::to_string(D) + " and ATTN_MMA=wgmma needs " +
                std::to_string(t.smem_bytes) + " B of shared memory (Q + KV_STAGES K and V blocks); " +
                s.target.arch + " allows " + std::to_string(s.target.smem_per_block) +
                " B per block: lower BLOCK_N, KV_STAGES or ATTN_WG");
  return t;
}

AttentionTiles attention_wgmma_partition(CompileState& s, const AttentionLoops& a) {
  const AttentionWgmmaTiles w = attention_wgmma_tiles(s, a);
  AttentionTiles t;
  t.block_m = w.block_m;
  t.block_n = w.block_n;
  t.warps = 4 * w.warpgroups;
  t.kv_stages = w.kv_stages;
  t.head_dim = w.head_dim;
  t.row_atoms = 1;
  t.smem_bytes = w.smem_bytes;
  return t;
}

}  // namespace loom
