// The wgmma GEMM (ATOM=wgmma_f16, wgmma_bf16, wgmma_tf32; sm_90a): warpgroups of m64nNk16
// (tf32: k8) atoms reading shared slabs by descriptor, fed by TMA (a producer warpgroup,
// multicast clusters, the TMA-store epilogue) or by the threads' copies (ragged rows,
// transposed tf32 operands).
#include "passes/families/family.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>

#include "ir/error.h"
#include "passes/defaults.h"
#include "passes/families/gemm_knobs.h"
#include "passes/families/gemm_shape.h"
#include "passes/families/wgmma_candidates.h"

namespace loom {

// Whether a known GEMM has at least half a wave of 128x256 wgmma tiles that TMA can
// load: every operand row a multiple of 16 bytes (M, N, K multiples of 8), no batch.
// Half a wave: 2048^3 (128 tiles on 132 SMs) ran 0.80x cuBLAS with it on H100 against
// 0.57-0.58x for the tuned mma.sync schedule (bench/NOTES.md, 2026-11-22, wgmma); 1024^3 (32
// tiles) keeps mma.sync.
static bool wgmma_large(const GemmShape& s, int sm_count) {
  return s.known && s.batch == 1 && s.M % 8 == 0 && s.N % 8 == 0 && s.K % 8 == 0 &&
         2 * ((s.M + 127) / 128) * ((s.N + 255) / 256) >= sm_count;
}

// A 16-bit GEMM with the large class's wave of tiles whose operands TMA can load but
// whose output rows it cannot store (N not a multiple of 8: the 50257-column GPT-2 LM
// head, rows of 100514 bytes): the large schedule with the direct epilogue (the TMA store
// needs 16-byte row strides; wgmma_defaults_for leaves it out by the output's row bytes).
// Until 2026-11-28 these ran mma.sync's 128x64 tiles (2048 x 50257 x 768 bf16: 1.21x
// torch, 116 TFLOP/s: cuBLAS has no TMA kernel for the odd ldc either), whose K = 768
// makes every CTA re-read a 128-row A slab and a 64-row B slab for 12 slabs of math.
static bool wgmma_large_ragged_out(const GemmShape& s, int sm_count) {
  return s.known && s.batch == 1 && !s.f32_operands && s.tma_rows && s.M % 8 == 0 &&
         s.K % 8 == 0 && s.N % 8 != 0 && 2 * ((s.M + 127) / 128) * ((s.N + 255) / 256) >= sm_count;
}

// A batched 16-bit GEMM (bmm, rank 4) that TMA can load (every operand row a multiple of
// 16 bytes; rank-3 boxes of one entry, so edge tiles zero-fill per entry) with half a wave
// of 128x256 (batch, tile) units and a K deep enough to hide the tile's epilogue: the large
// schedule, its persistent grid walking the units (t:027). Each entry at least 128 x 128,
// so a 128-row tile is mostly rows of its entry; smaller entries keep mma.sync (unmeasured).
// The K bound, from H100 (2026-11-27, bench/NOTES.md, batched GEMM on wgmma): 32 x 1024^3
// bf16 ran 0.75x cuBLAS on this schedule against 0.54x on mma.sync, but 64 x 512x512x64
// f16 (one slab per tile) 0.36x against 0.81x. A persistent tile costs about 10 us of
// direct epilogue and turnover (48.1 us for 4 rounds of one slab) plus 0.45 us per 64-deep
// slab (136 us for 8 rounds of 16); the mma.sync schedule's many small CTAs overlap their
// stores with other CTAs' math and ran 364 TFLOP/s at 1024^3, 0.024 us per K element of
// a 128x256 tile's work on one SM. Equal at K = 10 / (0.024 - 0.007) ~ 600: from 640 (ten
// slabs) wgmma. The attention-shaped K = 64 and 128 keep mma.sync.
// That bound holds for the direct epilogue. A bmm's [B, M, N] output leaves through the
// rank-3 TMA store (k:053), which overlaps the tile's store with the next tile's mainloop:
// then every K takes wgmma (H100, 2026-11-27, bench/NOTES.md, the model-shape suite:
// Q.K^T-shaped 512 x 512x512x64 f16 0.94x cuBLAS, 64 x 2048x2048x128 bf16 1.05x, against
// 0.68-0.85x on mma.sync; 8 x 512x28672x4096 1.03x against 0.94x with direct stores).
// Rank-4 outputs ([B, H, M, N]) keep the direct epilogue and the bound.
constexpr int64_t kBatchedWgmmaMinK = 640;
constexpr int64_t kClusteredBatchMaxK = 1024;  // wgmma_defaults_for: clusters below it
static bool batched_tma_store(const GemmShape& s) {
  return s.batch > 1 && s.out_rank == 3 && s.N * dtype_bytes(s.out) % 16 == 0;
}
// Tiles' worth of TMA-store strip buffers in a short-K bmm's ring (see wgmma_defaults_for).
constexpr int64_t kShortBatchedRingTiles = 4;
// DRAM bandwidth from which a card counts as fast (H200: 4.8 TB/s; H100 SXM: 3.35 TB/s):
// output-streaming tiles then want a deeper mainloop ring rather than a deeper store ring.
constexpr int64_t kFastDramBytesPerS = 4'000'000'000'000;
static bool fast_dram(const Target& t) { return t.dram_bytes_per_s >= kFastDramBytesPerS; }
static bool wgmma_batched(const GemmShape& s, int sm_count) {
  return s.known && s.batch > 1 && !s.f32_operands && s.tma_rows && s.M >= 128 && s.N >= 128 &&
         (s.K >= kBatchedWgmmaMinK || batched_tma_store(s)) &&
         2 * s.batch * ((s.M + 127) / 128) * ((s.N + 255) / 256) >= sm_count;
}

// Decode on sm_90a: a few rows (M <= 64) against a weight of N >= 1024 columns, operands
// TMA can load. wgmma's M is 64 rows per warpgroup, so the GEMM runs swapped (SWAP_AB,
// l:015): C^T = B^T A^T puts the weight's N on wgmma's M and the small M on its N.
// Up to 95 rows: at 77 x 4096 x 4096 f16 the swapped schedule's M > 32 form (two CTAs
// of BN = 40 per weight slab) ran 1.07x cuBLAS on H100 against 0.47x for mma.sync and
// 0.73x for an unswapped 64x128 wgmma tile (bench/NOTES.md, 2026-11-27, the model-shape
// suite). From 96 rows the one-row medium schedule below takes over (128 x 4096 x 4096:
// the swapped BN = 64 form 0.78x, the one-row 128x32 tile 0.96x).
// Narrower weights down to N = 128 (a KV projection of a few 128-wide heads: 4 heads,
// N = 512, in a 2048-wide Llama) take it too at up to 32 rows and K below the split-K
// class's 4096 (which keeps the longer ones), their few 64-row CTAs multiplied by
// CLUSTER_K (wgmma_decode_defaults): until 2026-11-27 they fell past every tensor-core
// class to the "small" SIMT kernel (1 x 512 x 2048: 8 CTAs of 16 threads), which took
// most of a decode step's GPU time under torch.compile (bench/NOTES.md, "dynamic shapes
// under the loom backend").
constexpr int64_t kSwappedDecodeMaxM = 95;
constexpr int64_t kNarrowDecodeMaxM = 32, kNarrowDecodeMinN = 128, kNarrowDecodeMaxK = 4095;
static bool wgmma_decode(const GemmShape& s) {
  const bool narrow = s.M <= kNarrowDecodeMaxM && s.N >= kNarrowDecodeMinN && s.K <= kNarrowDecodeMaxK;
  return s.known && s.batch == 1 && !s.f32_operands && s.tma_rows &&
         s.M <= kSwappedDecodeMaxM && (s.N >= 1024 || narrow);
}

// The swapped decode schedule. Streaming the weight (N*K*2 bytes, read once) is the whole
// cost, so: 64-row CTAs of one consumer warpgroup (N/64 CTAs: 64 at N = 4096, the most a
// 64-row atom gives without splitting K), one m64nBNk16 atom with BN = M rounded up to the
// atom's step of 8 (no idle columns but the ragged edge), fed by a producer warpgroup
// through a ring of 64-deep slabs as deep as fits in about 200 KiB (16 stages of 10 KiB at
// M = 16).
// How many CTAs must stream: as many as the DRAM's peak needs at ~60 GB/s each. Measured
// (2026-11-23, scripts/probes/tma2d_roofline.cu, timed like `loom run`'s graph replay): a
// bare TMA ring reading the 4096x4096 weight in Loom's boxes from 64 CTAs streams 40 GB/s
// per CTA on H100 (12.9 us; 128 CTAs: 12.8 us) and 51 GB/s on H200 (10.3 us; 128 CTAs:
// 9.7 us). Loom's kernel, BK = 64 and 16 stages: 13.8 us from 64 CTAs on H100 against 14.8
// from 128 CTAs in 2-CTA clusters adding their K halves through distributed shared memory
// (the exchange and its cluster barriers cost more than the extra CTAs buy there), but on
// H200, whose HBM is 1.47x faster, 11.1 us from 64 CTAs against 10.9 from 128. So K is
// split among the c CTAs of a cluster (CLUSTER_K) until c * N/64 CTAs at 60 GB/s reach the
// peak (H100 3.35 TB/s: 56 CTAs, so none at N = 4096; H200 4.9 TB/s: 82, so c = 2). A
// cluster of 4 or 8 must leave room for GPC granularity: a cluster lives in one GPC, and
// H100's GPCs keep only 30 4-CTA clusters resident at this shared memory (120 CTAs, not
// 132: cudaOccupancyMaxActiveClusters), so 128 CTAs in 4-clusters ran in two waves (13.4 us
// at N = 2048, against 9.4 us in 2-clusters). BK = 128 with 8 stages, the earlier default:
// 14.2 us from 64 CTAs, 15.0 from 128.
// That is the M <= 32 schedule; M > 32: wgmma_wide_decode_defaults (below).
// The ring depth that keeps `per_sm` CTAs of `rows` x `bn` slabs (BK = 64) resident on one SM:
// the SM's shared memory split `per_sm` ways, 3 KB of each share left for the barriers, the
// alignment and the block's reservation; at most 16 slabs (deeper measured no gain).
static int64_t resident_depth(const Target& t, int64_t rows, int64_t bn, int64_t per_sm) {
  const int64_t slab = (rows + bn) * 64 * 2;
  return std::min<int64_t>(16, (t.smem_per_block / per_sm - 3072) / slab);
}

// Decode GEMMs of 33..95 rows (swapped: the rows are the wgmma's N), by how many 64-row
// tiles the weight makes against the SM count P:
// - tiles <= P/2: cuBLAS's decode tiling (nvjet_sm90_tst_64x32_64x16_1x2_h_bz_TNT, ncu on
//   H200: 13.0 us at 64x4096x4096 against our 15.5 us for one 64x64 tile per CTA, which
//   stalled 38% at a CTA barrier): the rows in two halves of BN = M/2 columns, 64-deep
//   slabs in a 16-deep ring (12-14 KB stages), 128 CTAs at N = 4096, no partial tiles to add.
//   cuBLAS also pairs the two CTAs of each weight slab in a cluster (CLUSTER_N=2, the slab
//   multicast); on H100 that measured slower than two independent CTAs reading the slab
//   twice through L2: 14.7 vs 13.8 us in graph replay (cuBLAS 14.4; 2026-11-22,
//   bench/NOTES.md), so the default leaves the cluster out.
// - more tiles: the halves at 16 deep were two waves (2 * tiles CTAs past P, one CTA per SM
//   at ~200 KB each): 0.65-0.81x cuBLAS on the H200 (77 x 6144, 40 x 8192, 80 x 8192,
//   48 x 6144, 33 x 10240, 64 x 14336, 64 x 28672; bench/NOTES.md, "decode GEMMs of 33 to
//   95 rows"). Measured there, each shape's best form within ~3 %:
//   - P/2 < tiles < 7/8 P: the halves with the ring cut to keep two CTAs per SM (one wave):
//     77 x 6144 0.65 -> 0.99x, 48 x 6144 0.77 -> 1.05x (one CTA per SM at full width: 0.95x,
//     0.91x — 96 CTAs stream too little of the DRAM's peak);
//   - 7/8 P <= tiles <= P: full width (BN = M), one 64-row CTA per SM, deep ring: 40 x 8192
//     0.78 -> 1.00x, 80 x 8192 0.77 -> 0.99x (the halves two per SM: 0.90x, 0.91x);
//   - tiles > P: 128-row CTAs (two consumer warpgroups) at full width, the ring cut to keep
//     all of them resident (ceil(N/128 / P) per SM): 33 x 10240 0.81 -> 1.13x, 64 x 14336 0.72 -> 1.00x,
//     64 x 28672 0.75 -> 0.99x.
static Knobs wgmma_wide_decode_defaults(const GemmShape& s, const Target& t) {
  const int64_t P = t.sm_count, full = (s.M + 7) / 8 * 8;
  const int64_t half = ((s.M + 1) / 2 + 7) / 8 * 8;
  const int64_t tiles = (s.N + 63) / 64, tiles128 = (s.N + 127) / 128;
  int64_t rows = 64, bn = half, depth = 0;
  if (2 * tiles <= P) {
    // As deep as the block's shared memory allows (16 at up to 95 rows): the ring of the
    // earlier ~200 KB budget was 15 slabs at 77 rows and 14 at 95, and 16 measured 0.94-0.95x
    // -> 1.06x cuBLAS at 77 x 4096 x 4096 (H200, two runs; 14 slabs 0.92-0.96x, 12 0.88x).
    depth = resident_depth(t, 64, half, 1);
  } else if (8 * tiles < 7 * P) {
    depth = resident_depth(t, 64, half, (2 * tiles + P - 1) / P);
  } else if (tiles <= P) {
    bn = full;
    depth = resident_depth(t, 64, full, 1);
  } else {
    rows = 128, bn = full;
    depth = resident_depth(t, 128, full, (tiles128 + P - 1) / P);
  }
  Knobs k = Knobs::parse("SWAP_AB=1,WM=" + std::to_string(rows / 64) + ",WN=1,FM=1,FN=1,BN=" +
                         std::to_string(bn) + ",STAGE=tma,SWIZZLE=128B,BK=64,STAGES=" +
                         std::to_string(depth) + ",EPILOGUE=direct,WARP_SPECIALIZE=1");
  // Two consumer warpgroups of a few columns need few registers: no split (as below).
  if (rows == 128) k.set("CONSUMER_REGS", "0");
  return k;
}

static Knobs wgmma_decode_defaults(const GemmShape& s, const Target& t) {
  // M > 32: the halves, full-width or 128-row forms by the tile count (above).
  if (s.M > 32) return wgmma_wide_decode_defaults(s, t);
  // 128-row CTAs (two consumer warpgroups) where 64-row ones would take more than one
  // wave but 128-row ones fit in one: at N = 10240 160 CTAs of 64 rows ran 0.95-0.97x
  // cuBLAS on H100 and 0.92-0.93x on H200, 80 of 128 rows 1.03x and 1.06-1.08x (M = 1 and
  // 16, K = 8192); past two waves (N = 28672) it changed nothing, and within one wave
  // (N = 6144) the 64-row CTAs won (bench/NOTES.md, short-K bmm and 128-row linears).
  const int64_t rows64 = (s.N + 63) / 64, rows128 = (s.N + 127) / 128;
  const bool tall = rows64 > t.sm_count && rows128 <= t.sm_count;
  const int64_t BN = (s.M + 7) / 8 * 8, BM = tall ? 128 : 64, BK = 64;
  const int64_t stage_bytes = (BM + BN) * BK * 2;
  int64_t stages = std::min<int64_t>(16, 200 * 1024 / stage_bytes);
  // Tall CTAs on a fast-DRAM card over at most 3/4 of the SMs: an 8-slab ring, not the 10
  // or 11 that fit. H200, 2026-11-29 (bench/results/2026-11-29-h200-paged-load-warps/,
  // tall-sweep-*.txt; loom/torch, two runs each, STAGES 4 / 6 / 8 / 10 against the
  // default): N = 10240 (80 CTAs) +5-12 % at M = 1, 16, 32 and K = 4096, 8192; N = 11008
  // (86) +2-11 %; N = 14336 (112) and 16384 (128) within -2..+3 %; 4 and 6 slabs lost or
  // tied everywhere. Why fewer slabs in flight win where a third of the SMs idle is not
  // measured (a guess: shallower DRAM queues finish the CTAs' streams more evenly). The
  // H100 (3.35 TB/s) was not measured: it keeps the deepest ring.
  if (tall && fast_dram(t) && 4 * rows128 <= 3 * int64_t(t.sm_count))
    stages = std::min<int64_t>(stages, 8);
  // 64-row CTAs past two waves and up to four (N = 28672 on 132 SMs: 448 CTAs), on a
  // fast-DRAM card: a ring shallow enough for two CTAs per SM (at most 10 slabs), so the
  // waves overlap. H200, 2026-11-29 (wide-sweep-*.txt there; loom/torch, two runs, 16
  // slabs / 10 / 8): M = 1 and 16 at K = 4096 0.963 / 1.050 / 1.010 and 0.954 / 1.049 /
  // 1.034; M = 32 (12 KiB slabs: 10 do not fit twice, 8 do) 0.942 / 0.952 / 1.045; K = 8192
  // +0.5..4 %. Past four waves (N = 57344) it measured -3..+2 %: not there.
  const int64_t half_smem_stages = (t.smem_per_block / 2 - 1024) / stage_bytes;
  if (!tall && fast_dram(t) && rows64 > 2 * int64_t(t.sm_count) && rows64 <= 4 * int64_t(t.sm_count))
    stages = std::min<int64_t>({stages, 10, half_smem_stages});
  Knobs k = Knobs::parse("SWAP_AB=1,WM=" + std::to_string(BM / 64) +
                         ",WN=1,FM=1,FN=1,BN=" + std::to_string(BN) +
                         ",STAGE=tma,SWIZZLE=128B,BK=" + std::to_string(BK) +
                         ",STAGES=" + std::to_string(stages) + ",EPILOGUE=direct,WARP_SPECIALIZE=1");
  // Two consumer warpgroups of a few columns need few registers: no split (ptxas ignores
  // setmaxnreg in them anyway, C7508; see wgmma_medium_defaults).
  if (tall) k.set("CONSUMER_REGS", "0");
  const int64_t tiles = (s.N + BM - 1) / BM;
  constexpr int64_t kCtaStreamBytesPerS = 60'000'000'000;
  // As a count of CTAs, not bytes per second: ctas * 6e10 overflows int64 from 1.5e8 CTAs
  // (a weight of N = 10^10 columns, which the 2^48-byte tensor limit allows).
  const int64_t ctas_needed = (t.dram_bytes_per_s + kCtaStreamBytesPerS - 1) / kCtaStreamBytesPerS;
  const auto streams_enough = [&](int64_t ctas) { return ctas >= ctas_needed; };
  const auto resident = [&](int64_t c) {  // clusters of 4 and 8: GPC granularity, above
    return c <= 2 ? tiles * c <= t.sm_count : 10 * tiles * c <= 9 * int64_t(t.sm_count);
  };
  int64_t c = 1;
  while (c < 8 && !streams_enough(tiles * c) && resident(c * 2) && s.K / (c * 2) >= 4 * BK) c *= 2;
  if (c > 1) k.set("CLUSTER_K", std::to_string(c));
  return k;
}

// Medium 16-bit GEMMs that TMA can load, no batch, too few 128x256 tiles for the large
// schedule, with enough columns for half a wave of 32-wide tiles. Until 2026-11-27 they ran
// mma.sync (512 x 4096 x 4096 0.45x cuBLAS) or the split-K schedule's 64x32 tiles without a
// split (128 x 4096 x 4096 0.69x). First measured up to 512 rows (four rows of 128-row
// tiles); from 2026-11-27 (evening) up to 2048 rows, which closes the gap to the large
// class: 1024-token projections of a 2048-wide model (1024 x 2048 x 2048: 8 x 16 tiles of
// 128 x 128, one wave) and 1024^3 ran mma.sync (0.90x at 1024^3), 2048 x 1024 x 4096
// 0.44x. bench/NOTES.md ("torch.compile on stock models") has the measurement.
constexpr int64_t kMediumMaxRows = 16;
static bool wgmma_medium(const GemmShape& s, int sm_count) {
  const int64_t rows = (s.M + 127) / 128;
  return s.known && s.batch == 1 && !s.f32_operands && s.tma_rows && s.M % 8 == 0 &&
         s.N % 8 == 0 && s.K % 8 == 0 && rows <= kMediumMaxRows && !wgmma_large(s, sm_count) &&
         2 * rows * ((s.N + 31) / 32) >= sm_count;
}

// The medium schedule's tile width: the multiple of 16 from 32 to 256 that minimizes
// rounds x (BN + 32), the rounds of 128 x BN tiles over the SMs, the 32 a tile's fixed
// cost (its A slab, prologue and epilogue) in columns' worth. H100, 2026-11-27, against
// cuBLAS (bench/NOTES.md, the model-shape suite): one row of tiles picks one wave of the
// widest tile, 128 x 4096 x 4096 BN = 32 0.96x (64: 0.91x), 128 x 10240 x 8192 BN = 80
// 1.00x (64: 0.82x, 1.2 waves), 128 x 6144 x 4096 BN = 48 1.00x; four rows pick two
// rounds of 160 at 512 x 10240 x 8192 (0.97x; 128: 0.78x, 192: 0.87x).
static int64_t medium_width(const GemmShape& s, int sm_count) {
  const int64_t rows = (s.M + 127) / 128;
  int64_t best = 256, best_cost = INT64_MAX;
  // An N-major B's slab rows are BN wide: 128-byte swizzle spans need multiples of 64.
  const int64_t step = s.b_k_major ? 16 : 64;
  for (int64_t bn = 256; bn >= 32; bn -= step) {
    const int64_t tiles = rows * ((s.N + bn - 1) / bn);
    const int64_t cost = (tiles + sm_count - 1) / sm_count * (bn + 32);
    if (cost < best_cost) best = bn, best_cost = cost;  // ties keep the wider tile
  }
  return best;
}

// One row of tiles (M <= 128): each CTA streams its BN rows of the weight once, so one
// wave of CTAs, non-persistent, as deep a ring as 216 KB holds (up to 8 slabs), stores
// straight from the accumulators. More rows: the large schedule's persistent form with
// the TMA-store epilogue (512 x 4096 x 4096 at BN = 128: 0.92x; with 2-CTA clusters 0.85x,
// both on a 4-deep ring), its ring as deep as the opt-in 227 KB holds beside the 32 KB of
// strip buffers, up to 6 slabs (medium_depth).
// Why deeper: a 128 x 128 x 64 slab is ~512 cycles of math for the two consumer
// warpgroups, half a 128 x 256 one's, so 4 slots give a refill ~1.5k cycles (3 slabs)
// to land, about one L2-loaded TMA round trip under load; cuBLAS runs this tile with 6
// (nvjet_sm90_tst_128x128_64x6_2x1: 213 KB, 25.4 us at 512 x 4096 x 4096 against our
// 29.0 us with 4, ncu on H100, 2026-11-28). A 2-CTA cluster couples the two CTAs' rings
// (a slot is refilled only when the consumers of both released it), so the slowest CTA's
// latency sets the pace: the shallow ring is what made clusters lose here.
// `smem` is the block's opt-in limit (Target::smem_per_block: 227 KB on sm_90a).
constexpr int64_t kMediumClusterMinK = 8192;
constexpr int64_t kMediumClusterMinKFastDram = 4096;  // see wgmma_medium_defaults
constexpr int64_t kMediumSplitMinK = 12288;  // one row of tiles: wgmma_medium_defaults
static int64_t medium_depth(int64_t bn, int64_t smem) {
  const int64_t strips = 32 * 1024, barriers = 1024;
  return std::clamp<int64_t>((smem - strips - barriers) / ((128 + bn) * 64 * 2), 2, 6);
}
// One row of tiles as pairs of 64-row CTAs sharing the weight: the M <= 128 form below on
// fast-DRAM cards where its tile is at least kPairMinWidth wide (see there), and the
// candidate GEMM_FORM=one_row_pairs everywhere else it applies.
// What cuBLAS runs on these shapes (torch.profiler / ncu, H200, 2026-11-28): nvjet names
// give cuBLAS's m first, which is our N for F.linear (C^T = W X^T), so
// `128x64_64x8_1x2` at 128 x 8192 -> 8192 and `96x64_64x10_1x2` at 128 x 4096 -> 6144 are
// BN = 128 / 96 columns by 64 rows, 8 / 10 slabs of 64, 2-CTA clusters along M: the two
// 64-row halves of X in one cluster, each CTA loading half of the W slab and multicasting
// it (Loom's CLUSTER_M=2 with BM=64), not pairs along N sharing X (CLUSTER_N=2, which
// measured 0.871x against 0.908x without a cluster at 128 x 8192 -> 8192 on H200).
// Why sharing W is the better pairing here: every CTA's W rows are read once, from DRAM
// (X, 1-2 MB, stays in L2). A pair advances at its slower CTA's pace (a slot is refilled
// only when both CTAs' consumers released it). Sharing W, both CTAs wait on the same
// DRAM-latency multicast and their private slab (X's 64 rows) comes from L2; sharing X,
// each CTA's private slab is its own W rows from DRAM, and the pair waits for the later
// of two independent DRAM latencies every slab. The L2 bytes are the same either way
// (at 128 x 8192 -> 8192: X 128 MB + W 128 MB, against 256 + 128 MB unpaired).
// Width: the widest tile (multiples of 16, of 64 for an N-major B) whose 2 x ceil(N/BN)
// CTAs fill the fewest rounds, weighed by (BN + 32) like medium_width: 4096 -> 64,
// 6144 -> 96, 8192 -> 128, 10240 -> 160, 128 CTAs each on 132 SMs. Ring: as many slabs of
// (64 + BN) x 64 as 200 KB holds, at most 12 (cuBLAS: 10 at 96, 8 at 128).
// One consumer warpgroup (WM=1): no producer/consumer register split.
constexpr int64_t kPairMinWidth = 128;
constexpr int64_t kPairRingBytes = 200 * 1024, kPairMaxStages = 12;

bool wgmma_one_row_pairs_apply(const GemmShape& s, const Target& t) {
  // 65..128 rows: two 64-row halves (fewer rows are the decode class's, which swaps).
  return s.known && s.batch == 1 && !s.f32_operands && s.tma_rows && s.M > 64 && s.M <= 128 &&
         s.M % 8 == 0 && s.N % 8 == 0 && s.K % 8 == 0 && t.sm_count >= 2;
}

Knobs wgmma_one_row_pairs(const GemmShape& s, const Target& t) {
  const int64_t slots = t.sm_count / 2 * 2;  // CTAs of 2-CTA clusters resident at once
  const int64_t step = s.b_k_major ? 16 : 64;
  int64_t bn = 256, best_cost = INT64_MAX;
  for (int64_t w = 256; w >= 32; w -= step) {
    const int64_t ctas = 2 * ((s.N + w - 1) / w);
    const int64_t cost = (ctas + slots - 1) / slots * (w + 32);
    if (cost < best_cost) bn = w, best_cost = cost;  // ties keep the wider tile
  }
  const int64_t stages = std::clamp<int64_t>(kPairRingBytes / ((64 + bn) * 64 * 2), 2, kPairMaxStages);
  return Knobs::parse("BM=64,WM=1,WN=1,FM=1,FN=1,BN=" + std::to_string(bn) +
                      ",STAGE=tma,SWIZZLE=128B,BK=64,STAGES=" + std::to_string(stages) +
                      ",GROUP_M=1,EPILOGUE=direct,WARP_SPECIALIZE=1,CONSUMER_REGS=0,CLUSTER_M=2");
}

// GEMM_FORM: a candidate's knob set (ATOM included) in place of the class's defaults, for
// measuring it on the GPU where it is not the default (the H100, the narrow tiles); an
// error naming the candidate's reach where it does not take the shape.
Knobs wgmma_gemm_form(const std::string& form, const GemmShape& s, const Target& t) {
  if (form != "one_row_pairs")
    throw Error("GEMM_FORM=" + form + " is not a wgmma default candidate: use default or "
                "one_row_pairs");
  if (!tensor_core_operands(s, t) || t.arch != "sm_90a" || !s.known)
    throw Error("GEMM_FORM=" + form + " is a candidate of the wgmma GEMM: it needs a "
                "contraction (matmul, bmm, linear) with 16-bit operands of known sizes on "
                "sm_90a; use GEMM_FORM=default");
  if (!wgmma_one_row_pairs_apply(s, t))
    throw Error("GEMM_FORM=one_row_pairs takes one row of tiles as two 64-row halves: 65 to "
                "128 rows (M is " + std::to_string(s.M) + "), no batch, M, N and K multiples of "
                "8 with TMA-loadable rows; use GEMM_FORM=default");
  Knobs k = wgmma_one_row_pairs(s, t);
  k.set("ATOM", atom_16bit(s, "wgmma"));
  return k;
}

static Knobs wgmma_medium_defaults(const GemmShape& s, const Target& t) {
  const int sm_count = t.sm_count;
  const int64_t bn = medium_width(s, sm_count);
  const auto tile_of = [](int64_t width) {
    return "WM=2,WN=1,FM=1,FN=1,BN=" + std::to_string(width) +
           ",STAGE=tma,SWIZZLE=128B,BK=64,WARP_SPECIALIZE=1,";
  };
  const std::string tile = tile_of(bn);
  // No register split (CONSUMER_REGS=0): these tiles need few registers, and ptxas
  // ignores setmaxnreg in them anyway (C7508: their count at entry is not the cap).
  if (s.M <= 128) {
    // A long K (>= 12288) is split in two (SPLITK=2, the reduce kernel as the split
    // kernel's programmatic dependent) over tiles twice as wide: the same wave of CTAs,
    // but every CTA of one row of tiles reads all of X's K range, so at 128 x 4096 x 14336
    // (BN = 32) the 128 CTAs read X 128 times, 470 MB through L2 against W's 117 MB once.
    // Halving each CTA's K halves that; doubling BN keeps the CTA count. H100 / H200
    // against cuBLAS (bench/NOTES.md, short-K bmm and 128-row linears per card): 128 x
    // 4096 x 14336 0.96x / 0.82x -> 1.06x / 1.01x (BN 32 -> 64), 128 x 8192 x 28672 1.02x /
    // 0.91x -> 1.07x / 1.02x (BN 64 -> 128); at K = 8192 the split lost (128 x 8192 x 8192
    // 1.01x / 0.91x -> 0.93x / 0.90x), the partial sums' round trip then weighing more.
    const bool split = s.K >= kMediumSplitMinK && bn <= 128;
    // The one-row pairs (wgmma_one_row_pairs) where their tile is at least 128 wide, on
    // fast-DRAM cards, linears (a K-major W). H200 against torch (2026-11-28, bench/NOTES.md,
    // 2-CTA pairs sharing W): 128 x 8192 -> 8192 (BN 128, 8 slabs) 0.950x / 0.876x (a
    // repeat) -> 0.994x / 0.958x, 128 x 8192 -> 10240 (BN 160, 7 slabs) 0.963x -> 1.036x;
    // narrower tiles lost or tied: 128 x 4096 -> 4096 (BN 64) 0.971x -> 0.920x, 128 x 4096
    // -> 6144 (BN 96) 0.910x -> 0.919x. The H100 (3.35 TB/s) keeps this form until the
    // pairs are measured there (GEMM_FORM=one_row_pairs); the split long K keeps its split.
    if (!split && s.b_k_major && fast_dram(t) &&
        wgmma_one_row_pairs_apply(s, t)) {
      Knobs pairs = wgmma_one_row_pairs(s, t);
      if (pairs.get_int("BN", 0) >= kPairMinWidth) return pairs;
    }
    const int64_t width = split ? 2 * bn : bn;
    const int64_t depth = std::min<int64_t>(8, 216 * 1024 / ((128 + width) * 64 * 2));
    Knobs k = Knobs::parse(tile_of(width) + "STAGES=" + std::to_string(depth) +
                           ",EPILOGUE=direct,CONSUMER_REGS=0");
    if (split) {
      k.set("SPLITK", "2");
      k.set("SPLITK_MODE", "reduce");
    }
    return k;
  }
  Knobs k = Knobs::parse(tile + "STAGES=" + std::to_string(medium_depth(bn, t.smem_per_block)) +
                         ",GROUP_M=8,EPILOGUE=tma_store,EPI_BUFFERS=2,PERSISTENT=1");
  // On the deep ring 2-CTA clusters along M (pairs sharing W's slab) pay where K is long:
  // H100 against cuBLAS, no cluster -> CLUSTER_M=2: 512 x 4096 x 14336 0.93x -> 0.95x,
  // 1024 x 2048 x 8192 0.96x -> 0.97x, but 512 x 4096 x 4096 0.99x -> 0.97x (the pair's
  // start and end cost per tile, the halved L2 traffic per slab). Along N (sharing X, as
  // cuBLAS pairs them): 0.79-0.86x, unexplained (bench/NOTES.md, 2026-11-28).
  // On fast-DRAM cards the pairs pay from K = 4096: H200 against torch (2026-11-28,
  // bench/NOTES.md, 2-CTA pairs sharing W) 512 x 4096 -> 4096 0.944x -> 0.972x; below it
  // they lost (1024 x 2048 -> 2048 1.007x -> 0.938x). The H100 keeps K >= 8192.
  const int64_t cluster_min_k = fast_dram(t)
                                    ? kMediumClusterMinKFastDram : kMediumClusterMinK;
  if (s.K >= cluster_min_k) k.set("CLUSTER_M", "2");
  return k;
}

// Batches of 16-bit GEMMs with few rows per entry (M <= 128: mixture-of-experts layers,
// 16-512 tokens per expert) or few columns (N <= 128: attention's P.V, N = head dim) and
// a K long enough to stream (640 and 512: ten and eight slabs). H100, 2026-11-27 (bench/
// NOTES.md, the model-shape suite), against cuBLAS: 8 x 16 x 4096 x 28672 bf16 on 64x256
// tiles of one consumer warpgroup 0.99x (mma.sync 0.80x), 8 x 64 x 14336 x 4096 0.99x
// (0.63x); 8 x 128 x 4096 x 28672 on 128x128 tiles 0.95x (the persistent 128x256 one:
// 0.79x); 512 x 512 x 64 x 512 f16 (P.V) on 128x64 tiles 1.01x (mma.sync 0.76x), 64 x
// 2048 x 128 x 2048 bf16 0.94x (128x192 persistent: 0.83x). Non-persistent, warp-
// specialized, direct stores, 5-6 slabs deep.
static bool wgmma_batched_thin(const GemmShape& s) {
  return s.known && s.batch > 1 && !s.f32_operands && s.tma_rows &&
         ((s.M <= 128 && s.N >= 256 && s.K >= 640) || (s.N <= 128 && s.M >= 128 && s.K >= 512));
}
// With a bmm's rank-3 output the few-row and few-column forms store through TMA (k:053):
// 8 x 16..64 x 4096 x 28672 0.98-1.00x (direct 0.97-1.00x), P.V 0.96-1.03x (0.94-1.03x).
// The 128x128 form is measured with direct stores only and keeps them.
static Knobs wgmma_batched_thin_defaults(const GemmShape& s, const Target& t) {
  const std::string common = ",WN=1,FM=1,FN=1,STAGE=tma,SWIZZLE=128B,BK=64,WARP_SPECIALIZE=1";
  const std::string direct = common + ",EPILOGUE=direct";
  const std::string store = batched_tma_store(s) ? common + ",EPILOGUE=tma_store,EPI_BUFFERS=2"
                                                 : direct;
  if (s.M <= 64)
    return Knobs::parse(batched_tma_store(s) ? "WM=1,BN=256,STAGES=4" + store
                                             : "WM=1,BN=256,STAGES=5" + direct);
  // On a card with fast DRAM (H200: 4.8 TB/s) the weight streams fast enough that the
  // X slab's reuse across 256 columns pays more than the deeper ring: 8 x 128 x 14336 x
  // 4096 bf16 0.943/0.956x -> 1.003/0.978x torch, 8 x 128 x 4096 x 28672 0.933/0.930x ->
  // 0.955/0.952x with BN = 256 and 4 stages (two H200 runs; bench/NOTES.md, 2026-11-28,
  // GEMM defaults on the H200). The H100 keeps the 128-wide form (0.955-0.994x there; the
  // wide form is not measured on it).
  const bool fast = fast_dram(t);
  // Two consumer warpgroups of small tiles: no register split (see wgmma_medium_defaults).
  if (s.M <= 128)
    return Knobs::parse(std::string(fast ? "WM=2,BN=256,STAGES=4" : "WM=2,BN=128,STAGES=6") +
                        ",CONSUMER_REGS=0" + direct);
  // Few columns (P.V: N = head dim): one tile spans them (BN = N rounded up to 64). At N =
  // 128 two 64-wide tiles read each P slab twice: 128 x 128 ran 1.03x cuBLAS on H100 and
  // 0.98-0.99x on H200 (64 x 2048 x 2048 x 128, 32 x 4096 x 4096 x 128) against 0.97x /
  // 0.78-0.80x at 128 x 64 (bench/NOTES.md, short-K bmm and 128-row linears per card).
  // A 64-wide P.V on the H200 wants a 4-deep ring: 512 x 512 x 512 x 64 f16 0.961x ->
  // 1.006x torch (an earlier H200 run: 1.009x; H100 at 6 stages 1.034x, 4 not measured).
  const int64_t bn = s.N > 64 ? 128 : 64;
  const char* stages = bn == 64 && fast ? "4" : "6";
  return Knobs::parse("WM=2,BN=" + std::to_string(bn) + ",STAGES=" + stages + ",CONSUMER_REGS=0" +
                      store);
}

// Whether a known 16-bit GEMM that TMA can load (rows multiples of 16 bytes, no batch)
// has too few 128x128 tiles to fill half the SMs and a long K: split-K on wgmma tiles.
static bool wgmma_split_k(const GemmShape& s, int sm_count) {
  return s.known && s.batch == 1 && !s.f32_operands && s.M % 8 == 0 && s.N % 8 == 0 &&
         s.K % 8 == 0 && 2 * ((s.M + 127) / 128) * ((s.N + 127) / 128) < sm_count && s.K >= 4096;
}

// wgmma (sm_90a). Large grids: the persistent warp-specialized schedule — two consumer
// warpgroups of one m64n256 atom each (128x256 blocks), a producer warpgroup feeding a
// 4-deep TMA ring of 64-deep slabs (tf32: 32) in 128-byte swizzle spans, min(tiles, SMs)
// CTAs. 0.89x cuBLAS at 4096^3 bf16 on H100 (194-196 us; the mma.sync schedule: 0.52x),
// the hopper ladder's rung 4 (bench/NOTES.md, 2026-11-22, wgmma); tf32 0.96x. With two waves of
// tiles or more, 2-CTA clusters share each B slab by TMA multicast (what cuBLAS's kernel
// does): within 1% at 4096^3, 8192^3, 4096x14336x4096 and K = 16384 on H100, where the
// kernel is not L2-bound, and -4% at 2048^3 (one wave), so only from two waves (bench/
// NOTES.md, 2026-11-22, the cluster slowdown); it halves the B traffic the tuner's model charges. Otherwise (an explicit ATOM=wgmma_* on a smaller
// grid): two warpgroups of one m64n128 atom each, every thread waiting on the ring
// (0.68x at 4096^3: rung 1 of the first ladder).
static Knobs wgmma_defaults_for(const GemmShape& s, const Target& t);

// An epilogue operand of the output's shape (a residual, a SwiGLU gate) arrives by TMA
// during the mainloop (k:056, EPI_LOAD=tma) in the persistent TMA-store schedules (the
// large one and the medium one past a row of tiles: wgmma_schedule), instead of 2-byte
// global loads after it. Its 128-row strips of 128 bytes take 16 KB each, beside
// the ring's STAGES x (128 + BN) x 64 x 2 B and the output's two 16 KB strip buffers.
// H100, 2026-11-28 (bench/NOTES.md, "epilogue operands by TMA during the mainloop"), Loom
// direct -> TMA, the plain linear in brackets:
//  - the whole tile beside the schedule's ring (1024 x 2048 x 8192, BN = 128, 4 stages):
//    residual 53.7 -> 51.9 us, gate 59.0 -> 55.4 (51.0);
//  - BN = 256 leaves no room beside 4 stages: 3 stages and 2 operand strip buffers,
//    residual 57.0 -> 55.7, gate 84.3 -> 66.0 at 1024 x 8192 x 2048 (48.4); 195.6 -> 190.3,
//    242.0 -> 209.9 at 4096^3 (179.5); 747.8 -> 729.1, 969.9 -> 807.0 at 16384 x 4096 x
//    4096 (689.2). The stage costs the plain mainloop 2-3% at K <= 4096 (49.9, 183.5,
//    702.1 us at STAGES=3) but 51 -> 77 us at 1024 x 2048 x 8192: a longer K keeps its
//    stages and the direct reads.
static void epilogue_operand_by_tma(Knobs& k, const GemmShape& s, const Target& t) {
  const int64_t bn = k.get_int("BN", 256), stages = k.get_int("STAGES", 4);
  const int64_t strips = (bn + 63) / 64, strip_bytes = 128 * 128;
  auto fits = [&](int64_t ring, int64_t buffers) {
    return ring * (128 + bn) * 64 * 2 + (2 + buffers) * strip_bytes + 1024 <= t.smem_per_block;
  };
  if (fits(stages, strips)) {
    k.set("EPI_LOAD", "tma");
    return;
  }
  if (s.K > 4096 || stages != 4) return;  // (measured from a 4-deep ring only)
  k.set("EPI_LOAD", "tma");
  k.set("STAGES", "3");
  // Set whenever the stage went to the operand: resolve_knobs gives it back when explicit
  // knobs drop the operand's load (passes/defaults.cpp).
  k.set("EPI_LOAD_BUFFERS", fits(3, strips) ? "0" : strips % 2 == 0 ? "2" : "1");
}

// The persistent grid's rounds over 128 x bn tiles: clusters of 2 along M from two waves
// of tiles up (the rule below), P = the SMs they fill.
// A batch multiplies both: t:027 walks (batch, tile) units.
static int64_t persistent_rounds(const GemmShape& s, int sm_count, int64_t bn) {
  const int64_t tiles = s.batch * ((s.M + 127) / 128) * ((s.N + bn - 1) / bn);
  const int64_t cm = tiles >= 2 * int64_t(sm_count) ? 2 : 1;
  const int64_t clusters = s.batch * ((s.M + 128 * cm - 1) / (128 * cm)) * ((s.N + bn - 1) / bn);
  const int64_t slots = std::max<int64_t>(1, sm_count / cm);
  return (clusters + slots - 1) / slots;
}

// The large schedule's tile width: 256 columns (one m64n256 atom per warpgroup), or 192
// where 256 leaves the last round of the persistent grid mostly idle. The time is the
// rounds times the tile's mainloop (about proportional to its width at these sizes):
// 3072 x 3072 x 4096 bf16 is 2.18 rounds of 256-wide tiles (3 rounds, 0.78x cuBLAS on
// H100) and 2.91 of 192-wide ones (3 rounds of 3/4 the work: 0.99-1.01x); 2560 x 2304 x
// 8192 1.36 -> 1.82 (0.79x -> 0.99-1.01x) (bench/NOTES.md, 2026-11-23, stream-K). 192 only when it
// predicts 5% or more: at 8192^3 (16 rounds of 256 against 21 of 192, 1.6% predicted) the
// 256-wide tile keeps its measured 1.03x, and at 4096 x 14336 x 4096 (14 against 19) 192
// tied (2026-11-23, the last wave).
// 160 joined the candidates on 2026-11-27: 512 x 10240 x 8192 bf16 is 1.21 rounds of
// 256-wide tiles, 1.64 of 192 and 1.94 of 160 (two rounds each): 0.87x cuBLAS at 192,
// 0.97x at 160 on H100 (bench/NOTES.md, the model-shape suite). A narrower tile must
// predict a gain over the widest kept so far: 5% for 192, 15% for 160, whose tiles do
// less work per slab: 512 x 14336 x 4096 (2 rounds of 256, 3 of 160, 6% predicted) ran
// 0.93x at 160 against 1.00x at 256.
// 128 joined on 2026-11-28 with the medium form's 6-deep ring (its tiles on 4 slots ran
// 10% slower): 512 x 28672 x 4096 bf16 is 5 rounds of 192 and 7 of 128 (6.7% predicted),
// 0.93x cuBLAS at 128 (6 slots, 2-CTA clusters) against 0.91x at 192 on H100 (bench/
// NOTES.md, 2-CTA clusters on medium and batched GEMMs).
// 224 joined on 2026-11-28 (K-major weights only: 224 is not a multiple of 64): 512 x
// 28672 x 4096 is 4 rounds of 224 (3.88 waves) against 7 of 128, 12.5% predicted over 256:
// 0.980x cuBLAS on H100 (4 slots, 2-CTA clusters, TMA-store strips of 32 columns) against
// 0.941x at 128 (bench/NOTES.md, the TMA store's ring across tiles). Only from 3 rounds of
// 256 (one or two rounds: 128 x 28672, 512 x 14336 x 4096 would take it, unmeasured).
static int64_t wave_width(const GemmShape& s, int sm_count) {
  int64_t best = 256, best_time = persistent_rounds(s, sm_count, 256) * 256;
  for (auto [bn, gain_pct] :
       {std::pair<int64_t, int64_t>{224, 5}, {192, 5}, {160, 15}, {128, 5}}) {
    if (bn % 64 != 0 && !s.b_k_major) continue;  // see medium_width
    if (bn == 224 && persistent_rounds(s, sm_count, 256) < 3) continue;  // measured at 4
    const int64_t time = persistent_rounds(s, sm_count, bn) * bn;
    if (time * 100 <= best_time * (100 - gain_pct)) best = bn, best_time = time;
  }
  return best;
}

// Operands the copy engine cannot load for wgmma: rows that are not whole 16-byte units
// (a ragged N or K of a 16-bit GEMM: TMA cannot address them), or 32-bit operands that
// are not K-major (wgmma reads tf32 K-major only, and a TMA box lands in storage order).
// The block's threads fill the slabs instead (STAGE=cp_async: t:040, k:015), in the
// layout the descriptors read, transposing tf32's N-major B (M-major A) on the way — where
// no TMA form comes first (wgmma_tf32_oriented, wgmma_tf32_transposing).
static bool wgmma_thread_copies(const GemmShape& s) {
  return s.known && s.batch == 1 &&
         (!s.tma_rows || (s.f32_operands && !(s.a_k_major && s.b_k_major)));
}

// Whether the threads' wgmma schedule has a wave of its 128x128 tiles. Below it the
// 64x64 one-warpgroup form ran far behind mma.sync on H100 (1000x333x777 f16: 0.18x
// cuBLAS against mma.sync's 0.44x, bench/NOTES.md, 2026-11-27, wgmma without TMA).
static bool wgmma_thread_copies_fill(const GemmShape& s, int sm_count) {
  return ((s.M + 127) / 128) * ((s.N + 127) / 128) >= sm_count;
}

// Whether the threads' 64x64 one-warpgroup form has a wave of tiles (a wave of 128x128
// tiles is wgmma_thread_copies_fill).
static bool wgmma_thread_copies_small_fill(const GemmShape& s, int sm_count) {
  return ((s.M + 63) / 64) * ((s.N + 63) / 64) >= sm_count;
}

// Ragged 16-bit GEMMs on sm_90a with a wave of 128x128 tiles: wgmma with the threads'
// copies. H100, against cuBLAS: 4096x4095x4096 bf16 0.63x (mma.sync 0.53x; Triton 1.17x),
// 4096x4096x4095 0.46x (mma.sync 0.30x), N = 4094 (4-byte cp.async) 0.95x.
// Since 2026-11-28 also with a wave of 64x64 tiles (the one-warpgroup form, BK = 64 and a
// 3-deep ring: wgmma_thread_copy_defaults): 1000x333x777 f16 on an H200, against torch,
// 1.05-1.08x (its old BK = 32, 4-deep form 0.99x; mma.sync's 64x64 tiles 1.18-1.27x, so
// the suite loses a little there, but every sm_90a suite shape now runs wgmma). Smaller
// grids, decode and split-K shapes keep their classes' mma.sync schedules (unmeasured).
static bool wgmma_ragged(const GemmShape& s, int sm_count) {
  return wgmma_thread_copies(s) && !s.f32_operands &&
         (wgmma_thread_copies_fill(s, sm_count) || wgmma_thread_copies_small_fill(s, sm_count));
}

// The schedule of wgmma_thread_copies: two consumer warpgroups of one m64n128 atom each
// (128x128 blocks; 64x64, one warpgroup, where 128x128 tiles would not fill the SMs: four
// times the blocks, and a 128-thread block holds half the staged elements per thread of
// a 64x128 one, which spilled 460 B at 1000x777x333 f16 with both slabs in registers),
// BK = one 128-byte span of K (64 16-bit elements, 32 tf32; 32 16-bit elements where an
// operand's odd rows go through registers: its staged elements live in registers across
// the math, 32 per thread at BK=64, and ptxas spilled 36-172 B at 1000x777x333 with
// both operands staged so, none at BK=32), a 4-deep ring filled by every thread: 16-byte cp.async for rows that allow it, 4-byte ones
// for tf32's transposed slab, loads and shared stores for rows of odd length, all in the
// ring of k:050 (cp.async S-1 slabs ahead, the register path one ahead). No warp
// specialization (its producer issues TMA; k:030) and no TMA-store epilogue (its output
// rows may be ragged too). 128 columns, not the TMA schedule's 256: the register path
// holds BK*BN/256 staged elements per thread (32 at 128 columns) beside the 64
// accumulators. Not yet measured: the GPU check of this branch records it
// (bench/NOTES.md, 2026-11-27, wgmma without TMA).
static Knobs wgmma_thread_copy_defaults(const GemmShape& s, int sm_count) {
  const bool tf32 = s.f32_operands;
  const bool fills = ((s.M + 127) / 128) * ((s.N + 127) / 128) >= sm_count;
  Knobs k = Knobs::parse(std::string(fills ? "WM=2,BN=128" : "WM=1,BN=64") +
                         ",WN=1,FM=1,FN=1,STAGE=cp_async,SWIZZLE=128B,STAGES=4,VECTORIZE=8,"
                         "GROUP_M=8,EPILOGUE=direct," +
                         (tf32 || s.odd_rows ? "BK=32" : "BK=64"));
  // The 64x64 16-bit form: BK = 64 in a 3-deep ring even with odd rows (156 registers, no
  // spill at 1000x333x777 or 1000x777x333: one warpgroup stages half the elements per
  // thread of the 128-row form). H200, 1000x333x777 f16 against torch: 1.05-1.08x, against
  // 0.99x at BK = 32 and 4 stages; BK = 128 0.84-0.88x, 6 stages 1.01x (bench/NOTES.md,
  // 2026-11-28, GEMM defaults on the H200).
  if (!fills && !tf32) {
    k.set("BK", "64");
    k.set("STAGES", "3");
  }
  return k;  // tf32's N-major B (M-major A) is transposed by t:040's default for wgmma_tf32
}

// tf32 operands that TMA can load (rows of whole 16-byte units), exactly one of them
// not K-major: wgmma reads tf32 shared operands K-major only (its descriptors transpose
// 16-bit types alone), but an A operand loaded into registers (WGMMA_A=regs, k:026's
// fills: one 32-bit ld.shared per value, src/passes/wgmma_fragment.cpp) may lie either
// way. So an M-major A (A.T) with a K-major B goes through registers, and an N-major B
// (B [K, N] as given) with a K-major A runs swapped, C^T = B^T A^T (SWAP_AB=1): B^T is
// wgmma's A, M-major, in registers, and A^T its B, K-major. Both keep TMA, warp
// specialization, persistence and clusters: the schedule is the K-major one of the
// problem as computed (the swapped one: N rows, M columns). Until 2026-11-27 these took
// the threads' transposing copies (4096^3 with B [K, N]: 0.42x cuBLAS TF32 on H100,
// bench/NOTES.md, wgmma without TMA). Both operands M-/N-major leave no orientation with
// a K-major B: those are transposed in shared memory (wgmma_tf32_transposing, below), and
// shapes the large schedule does not take as computed (a wave of 128x256 tiles, M, N, K
// multiples of 8) keep the threads' copies (wgmma_thread_copies), as before.
static GemmShape tf32_as_computed(const GemmShape& s);
static bool wgmma_tf32_oriented(const GemmShape& s, int sm_count) {
  return s.known && s.batch == 1 && s.f32_operands && s.tma_rows &&
         s.a_k_major != s.b_k_major && wgmma_large(tf32_as_computed(s), sm_count);
}

// The problem wgmma computes under wgmma_tf32_oriented: swapped for an N-major B, both
// operands then as the schedule sees them (K-major B; A K-major or in registers).
static GemmShape tf32_as_computed(const GemmShape& s) {
  GemmShape c = s;
  if (!s.b_k_major) std::swap(c.M, c.N);
  c.a_k_major = c.b_k_major = true;
  return c;
}

// Swapped, the kernel's tile is a tile of C^T: its consumer warpgroups, stacked along the
// swapped M, own column bands of C, which k:053's strips (rows of C, one strip per store
// statement) cannot follow, so the swapped form stores directly from the accumulators. At
// K = 4096 a 128x256 tile's 128 slabs of tf32 wgmma take ~130k cycles and its direct
// stores ~1-2k cycles of issue, so the TMA store's overlap is worth little there.
static Knobs wgmma_tf32_oriented_defaults(const GemmShape& s, const Target& t) {
  Knobs k = wgmma_defaults_for(tf32_as_computed(s), t);
  k.set("WGMMA_A", "regs");
  if (!s.b_k_major) {
    k.set("SWAP_AB", "1");
    k.set("EPILOGUE", "direct");
    k.set("EPI_BUFFERS", "0");
  }
  return k;
}

// tf32 operands TMA can load, one or both not K-major, transposed in shared memory (k:015's
// transposing TMA stage, SLAB_A / SLAB_B = kinner with STAGE=tma): TMA lands each such box
// as it lies in a staging slab, the consumer warpgroups write it K-major into the swizzled
// slab, fence and meet at a named barrier, and the shared-A wgmma reads both operands from
// shared memory — the K-major schedule of the problem as given (128x256 tiles, persistent,
// 2-CTA clusters, the TMA store), unswapped. A staged operand's slab is held twice per ring
// slot, so the ring takes the most slots that fit beside the TMA store's 32 KB.
//
// Measured (H100, 2026-11-28, bench/NOTES.md, TF32 with an N-major B: transposing in
// shared memory; Loom / cuBLAS TF32 at 4096^3): the transpose costs about 0.12 cycles per
// element on top of the K-major mainloop (it did not overlap the tensor work), and with 2
// slots the copy's latency as well. B [K, N]: 0.45x at 128x256x32 with 2 slots, 0.58x at
// BK = 16 with 4, against the swapped register form's 0.87x; A.T: 0.81x with 3 slots
// against A in registers' 0.88x; neither K-major: 0.64x with 2 slots against the threads'
// copies' 0.44x. So only neither-K-major takes it, at BK = 16 (64-byte swizzle) with 4
// slots of 48 KB: the depth that took B [K, N] from 0.45x to 0.58x (2048x8192x4096: 0.55x
// to 0.70x).
constexpr bool kTf32TransposeB = false, kTf32TransposeA = false, kTf32TransposeBoth = true;

static bool wgmma_tf32_transposing(const GemmShape& s, int sm_count) {
  GemmShape c = s;
  c.a_k_major = c.b_k_major = true;
  const bool chosen =
      s.a_k_major ? kTf32TransposeB : s.b_k_major ? kTf32TransposeA : kTf32TransposeBoth;
  return chosen && s.known && s.batch == 1 && s.f32_operands && s.tma_rows &&
         !(s.a_k_major && s.b_k_major) && wgmma_large(c, sm_count);
}

static Knobs wgmma_tf32_transposing_defaults(const GemmShape& s, const Target& t) {
  GemmShape c = s;
  c.a_k_major = c.b_k_major = true;
  Knobs k = wgmma_defaults_for(c, t);
  k.set("WGMMA_A", "smem");
  k.set("SWAP_AB", "0");
  if (!s.a_k_major) k.set("SLAB_A", "kinner");
  if (!s.b_k_major) k.set("SLAB_B", "kinner");
  const int64_t bk = 16, eb = 4;  // 16 tf32 = 64-byte K-major rows: the 64-byte swizzle
  k.set("BK", std::to_string(bk));
  k.set("SWIZZLE", "64B");
  const int64_t bm = 128, bn = k.get_int("BN", 256);
  const int64_t slot = (bm * bk * (s.a_k_major ? 1 : 2) + bn * bk * (s.b_k_major ? 1 : 2)) * eb;
  const int64_t epilogue = k.get_str("EPILOGUE", "direct") == "tma_store" ? 32 * 1024 : 0;
  const int64_t fit = (t.smem_per_block - epilogue - 1024) / slot;  // 1 KB: barriers, alignment
  k.set("STAGES", std::to_string(std::clamp<int64_t>(fit, 2, 6)));
  return k;
}

static Knobs wgmma_defaults_for(const GemmShape& s, const Target& t) {
  const int sm_count = t.sm_count;
  const bool tf32 = s.f32_operands;
  if (wgmma_tf32_transposing(s, sm_count))
    return wgmma_tf32_transposing_defaults(s, t);
  if (wgmma_tf32_oriented(s, sm_count)) return wgmma_tf32_oriented_defaults(s, t);
  if (wgmma_decode(s)) return wgmma_decode_defaults(s, t);
  if (wgmma_thread_copies(s)) return wgmma_thread_copy_defaults(s, sm_count);
  if (wgmma_batched_thin(s)) return wgmma_batched_thin_defaults(s, t);
  if (wgmma_medium(s, sm_count)) return wgmma_medium_defaults(s, t);
  const std::string slab = std::string("STAGE=tma,SWIZZLE=128B,STAGES=4,") + (tf32 ? "BK=32" : "BK=64");
  if (wgmma_large(s, sm_count) || wgmma_batched(s, sm_count) ||
      wgmma_large_ragged_out(s, sm_count)) {
    // A bmm with a short K (Q.K^T: K = head dim) stores more than it multiplies: 128x128
    // tiles (0.94-1.05x) stream their stores better than 128x256 ones (0.89-0.97x).
    const bool short_batched = s.batch > 1 && s.K < kBatchedWgmmaMinK;
    // ... except from two slabs a tile (K = 128: 64 x 2048 x 2048 x 128, 32 x 4096 x 4096 x
    // 128), where a 128 x 256 tile's A slab serves twice the columns: H100 1.03x / 0.96x
    // cuBLAS against 0.86x / 0.96x at 128 x 128; H200 0.91-1.03x against 0.74x / 0.82x
    // (short_batched_ring below; bench/NOTES.md, short-K bmm and 128-row linears per card).
    const bool short_batched_wide = short_batched && s.K > 64;
    const int64_t bn = tf32 ? 256
                       : short_batched ? (short_batched_wide ? 256 : 128)
                                       : wave_width(s, sm_count);
    Knobs k = Knobs::parse("WM=2,WN=1,FM=1,FN=1,BN=" + std::to_string(bn) + "," + slab +
                           ",GROUP_M=8,EPILOGUE=direct,WARP_SPECIALIZE=1,PERSISTENT=1");
    // A 128-wide tile of wave_width takes the medium form's deep ring (medium_depth).
    if (bn == 128 && !tf32 && !short_batched)
      k.set("STAGES", std::to_string(medium_depth(bn, t.smem_per_block)));
    const int64_t tiles = s.batch * ((s.M + 127) / 128) * ((s.N + bn - 1) / bn);
    // Batches through the TMA store were measured without clusters (above), except a
    // short reduction (10-15 slabs: the ragged 8 x 1000 x 776 x 1000 bmm, cuBLAS's
    // nvjet 128x256_64x4_2x1 kernel): 2-CTA clusters along M took it from 0.85x to 0.97x
    // cuBLAS on H100 (along N: 0.87x). Its tiles stream their A and B slabs once for
    // little math each, L2-bound (ncu: 81% L2 throughput), and the pair's multicast
    // halves the B traffic (bench/NOTES.md, 2-CTA clusters on medium and batched GEMMs).
    const bool short_k_batch = batched_tma_store(s) && s.K >= kBatchedWgmmaMinK &&
                               s.K < kClusteredBatchMaxK && s.M > 128;
    if ((tiles >= 2 * int64_t(sm_count) && !batched_tma_store(s)) ||
        (short_k_batch && tiles >= int64_t(sm_count)))
      k.set("CLUSTER_M", "2");
    // The TMA-store epilogue (k:053) overlaps the tile's store with the next tile's
    // mainloop. Its first form (2026-11-22) kept the whole 64 KB C tile in shared memory, which cost the
    // fourth stage: +3 to +20% for K <= 4096 (8192x8192x1024 0.71x -> 0.91x, 2048^3 0.79x
    // -> 0.94x on H100 bf16) but -3% at 8192^3 (0.97x -> 0.94x), and a 4-byte output's
    // 128 KB tile did not fit at all. Streamed through 2 strip buffers per consumer
    // warpgroup (EPI_BUFFERS=2, 32 KB for any output type) it keeps STAGES=4 for every K
    // and f32 outputs; 16-bit strips are written with stmatrix. To be confirmed on the GPU.
    // k:053 takes outputs whose rows are whole 16-byte units (a tensor map's stride), 2-D
    // or a bmm's [B, M, N] (rank-4 batches keep the direct epilogue).
    if ((s.batch == 1 && s.N * dtype_bytes(s.out) % 16 == 0) || batched_tma_store(s)) {
      k.set("EPILOGUE", "tma_store");
      k.set("EPI_BUFFERS", "2");
      // A short-K bmm's 128 x 128 16-bit tiles are two strips: 8 buffers are a ring of four
      // tiles' strips (k:053), so a strip waits for a store issued four tiles earlier, not
      // for this tile's first; the 2-slab mainloop ring (K = 64..128 is 1-2 slabs a tile)
      // leaves it the room (2 x 32 KB + 8 x 16 KB). H100 against cuBLAS (2026-11-28,
      // bench/NOTES.md, the TMA store's ring across tiles): 32 x 4096 x 4096 x 128 0.937x ->
      // 0.965x, 512 x 512 x 512 x 64 0.961x -> 0.986x; a ring of two tiles beside the
      // 4-deep mainloop ring changed nothing (0.934x, 0.963x).
      if (short_batched && bn == 128 && dtype_bytes(s.out) == 2) {
        k.set("EPI_BUFFERS", std::to_string(kShortBatchedRingTiles * 2));
        k.set("STAGES", "2");
      }
      // The 128 x 256 tiles of two slabs: which ring pays depends on the card's DRAM. On
      // the H100 (3.35 TB/s) the stores are the limit and a ring of four tiles' strips
      // (STAGES=2, EPI_BUFFERS=8) wins: 64 x 2048 x 2048 x 128 1.03x against 0.90x with a
      // 3-slab mainloop ring (STAGES=3, EPI_BUFFERS=4); on the H200 (4.8 TB/s) the stores
      // drain and the next tile's first slab landing under this tile's epilogue is what
      // pays: 1.00x / 1.03x with 3 slabs against 0.91x / 0.99x with the strip ring.
      if (short_batched_wide && dtype_bytes(s.out) == 2) {
        const bool fast = fast_dram(t);
        k.set("EPI_BUFFERS", fast ? "4" : "8");
        k.set("STAGES", fast ? "3" : "2");
      }
    } else if (s.batch == 1) {
      // Rows no tensor map can address (a 16-bit N not a multiple of 8: GPT-2's 50257-column
      // LM head): the same strips, copied out by each consumer warpgroup's threads along the
      // rows (k:053, EPILOGUE=smem), instead of the direct epilogue's scalar stores over 8
      // rows per warp instruction. H200 (2026-11-30, bench/NOTES.md, the model suite tuned):
      // the LM head 344 µs against 620 direct (4.88x torch against 2.72x).
      k.set("EPILOGUE", "smem");
      k.set("EPI_BUFFERS", "2");
    }
    return k;
  }
  // Few tiles, long K (128x128x16384: one tile). The 2026-11-22 schedule was the
  // warp-specialized 128x128 one with K split among c CTAs of a cluster (CLUSTER_K:
  // partials added through distributed shared memory, l:022/k:057) and S such clusters
  // (SPLITK, the two-kernel reduce), c the
  // largest power of two up to 8 with every CTA two slabs deep, and S such that the
  // clusters fill at most half the SMs. Half, not all: an H100 holds only 15 clusters of
  // 8 CTAs of this size at once (clusters do not straddle GPCs), so 16 clusters ran in two
  // waves — 25.1 us at 8 x 16 against 16.9 us at 8 x 8 and 17.8 us at 8 x 4 (H100,
  // 2026-11-22; before it, S = 64 without clusters: 17.6 us; cuBLAS 12.7 us).
  // cuBLAS's organization instead (nvjet_sm90_tst_64x32_64x16_2x4_h_bz_splitK, 6.98 us at
  // 128x128x16384 on H200 against our 9.3 us): 64x32 tiles of one consumer warpgroup,
  // 64-deep slabs in an 8-deep ring (96 KB: two CTAs fit an SM), K split S ways, the S
  // partial tiles summed by the reduce kernel (SPLITK_MODE=reduce), launched as the split
  // kernel's programmatic dependent (k:065). S: about two thirds of the SMs' worth of CTAs
  // (11 at 128x128 on 132 SMs: 88 CTAs, cuBLAS's count), each split at least 4 slabs deep.
  // cuBLAS also clusters the CTAs 2x4 over M and N (each slab multicast along a cluster row
  // and column); on H100 that measured slower than independent CTAs reading their slabs
  // through L2: 9.6 us in graph replay with the 2x4 clusters against 7.2-7.4 without
  // (cuBLAS 8.2; S = 11 or 12; S = 16: 8.2), and the one-launch last-CTA sum
  // (SPLITK_MODE=partials) 12.0-12.7 (2026-11-22, bench/NOTES.md). So no clusters.
  // The ring is 16 deep (192 KB), not cuBLAS's 8: with fewer CTAs than SMs nothing else
  // wants the shared memory, and a CTA that streams ~280 KB holds twice the bytes in
  // flight: 6.7 -> 6.3 us in graph replay on H100 (2026-11-23; S = 12 or 16, or 64x64
  // tiles, measured the same 6.3-6.5).
  if (wgmma_split_k(s, sm_count)) {
    const int64_t tiles = ((s.M + 63) / 64) * ((s.N + 31) / 32);
    const int64_t budget = std::max<int64_t>(1, (2 * sm_count + 1) / 3);
    const int64_t S = std::max<int64_t>(
        1, std::min((budget + tiles / 2) / tiles, s.K / (4 * 64)));
    Knobs k = Knobs::parse("WM=1,WN=1,FM=1,FN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=16,"
                           "EPILOGUE=direct,WARP_SPECIALIZE=1");
    if (S > 1) {
      k.set("SPLITK", std::to_string(S));
      k.set("SPLITK_MODE", "reduce");
    }
    return k;
  }
  return Knobs::parse("WM=2,WN=1,FM=1,FN=1,BN=128," + slab + ",GROUP_M=8,EPILOGUE=direct");
}

// `:tf32` operands (never plain f32, which stays exact on FFMA) run on the tensor cores
// in the large and medium classes: FFMA measured 0.06x cuBLAS TF32 at 4096^3 on H100,
// wgmma_tf32 0.96x (K-major B) and mma.sync tf32 0.43x (bench/NOTES.md). On sm_90a every
// majorness takes wgmma_tf32 where its schedules have the tiles (below): operands TMA can
// load the TMA schedules (one of them M-/N-major: in registers, swapped for an N-major B,
// wgmma_tf32_oriented), the rest (both M-/N-major, or rows TMA cannot address) the
// threads' copies, which transpose into the K-major slab wgmma reads
// (wgmma_thread_copy_defaults). Elsewhere, and on sm_80 to sm_89: mma.sync tf32
// (mma_defaults_for's tf32 tiles).
// wgmma_tf32 where a wgmma schedule has the tiles for it: the large TMA one (K-major
// operands TMA can load: 0.99x cuBLAS TF32 at 4096^3 on H100; oriented ones: the problem
// as computed), or the threads' copies with a wave of 128x128 tiles (B [K, N] at 4096^3:
// 0.42x, mma.sync tf32 0.38x). Other shapes, and batches (wgmma's schedules here take one
// GEMM), keep mma.sync tf32.
// Since 2026-11-27 an M-major A or an N-major B that TMA can load (one operand K-major)
// takes the large TMA schedule too, in registers or swapped (wgmma_tf32_oriented).
// (Elsewhere mma.sync tf32 claims them: mma_sync.cpp.)
static bool wgmma_takes_tf32(const GemmShape& s, const Target& t) {
  return t.arch == "sm_90a" && s.batch == 1 &&
         (wgmma_tf32_oriented(s, t.sm_count) ||
          (wgmma_thread_copies(s) ? wgmma_thread_copies_fill(s, t.sm_count)
                                  : wgmma_large(s, t.sm_count)));
}

// The single 2-D 16-bit contraction of `g` on sm_90a whose A is row-major: the GEMMs
// whose run-time sizes the wgmma kernel takes (below). nullptr for anything else.
static const Node* runtime_size_gemm(const Graph& g, const Target& t) {
  if (t.arch != "sm_90a") return nullptr;
  const Node* mm = nullptr;
  for (const auto& n : g.nodes)
    if (n.kind == OpKind::Matmul) {
      if (mm) return nullptr;  // one contraction per program
      mm = &n;
    }
  if (!mm || mm->shape.size() != 2) return nullptr;
  const Node& a = g.node(mm->inputs[0]);
  if (a.dtype != DType::F16 && a.dtype != DType::BF16) return nullptr;
  // A transposed stores rows of M, which a run-time M (any token count, 7 as often as
  // 4096) leaves unaddressable by TMA; a run-time N or K is a row length of B or the
  // output and must be a multiple of 8 at each launch (refused there, naming the knob).
  if (a.transposed && mm->shape[0].is_sym()) return nullptr;
  return mm;
}

// A 16-bit GEMM on sm_90a with run-time sizes (M: the token count of a linear layer; N
// and K: dynamic shapes under torch.compile): one kernel serves every size, so it gets
// the schedule that matters where the time goes, the large class's (persistent,
// warp-specialized, 2-CTA clusters along M sharing B by multicast, the strip-buffered TMA
// store) as M = 8192 rows would pick it, with BN = 256: wave_width trims BN to the tile
// rounds of a known M, which a run-time M does not have (it picks 256 at M = 4096 and 8192
// for N = 4096). The tensor maps take the sizes at launch and clip the edge tiles (a
// partial last K slab is zero-filled, so it adds nothing); t:027 sizes the grid min(tiles,
// SMs) from M and N; the K loop's trip count ceil(K / BK) reads K in the kernel.
// Small M on its own: a run-time M alone gets a kernel per range of M besides this one
// (runtime_size_ranges, below), picked at each launch.
// A run-time N or K is a row length (of B, the output, A): TMA needs it a multiple of 8
// 16-bit elements, which a launch checks (refused there naming STAGE=tma or
// EPILOGUE=tma_store and the fix). The realigned copies (REALIGN, k:015) would take any
// row, but as the threads' copies (no TMA, no producer warpgroup) on every size, the
// aligned ones torch.compile's dynamic shapes nearly always bring included, where the
// bound defaults pick the TMA kernel: not the default; bind a ragged size instead.
// The bound sizes must make the large class at a large M (a run-time N or K counted as
// 4096); anything else keeps the SIMT "symbolic" class. Returns false then.
static bool symbolic_wgmma_defaults(const Graph& g, const Target& t, DefaultChoice& c) {
  const Node* mm = runtime_size_gemm(g, t);
  if (!mm) return false;
  const Node& a = g.node(mm->inputs[0]);
  std::map<std::string, int64_t> as_if;
  if (mm->shape[0].is_sym()) as_if[mm->shape[0].sym] = 8192;
  for (const Dim& d : {mm->shape[1], a.shape.back()})
    if (d.is_sym() && !as_if.count(d.sym)) as_if[d.sym] = 4096;
  GemmShape s = gemm_shape_of(bound_as_if(g, as_if));
  if (!s.known || !s.tma_rows || !wgmma_large(s, t.sm_count)) return false;
  c.shape_class = "symbolic";
  c.knobs = Knobs::parse("BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=sync,STAGES=2");
  c.knobs.set("ATOM", s.in == DType::F16 ? "wgmma_f16" : "wgmma_bf16");
  c.wgmma = wgmma_defaults_for(s, t);
  c.wgmma.set("BN", "256");
  return true;
}

// The ranges of a run-time M (N and K bound) that compile a kernel of their own: each
// range takes the defaults a bound M at its upper end gets, the last (513 rows up) the
// large schedule above. Small M is where one schedule cannot serve: the large schedule's
// 128 x 256 tiles give 16 CTAs over N = 4096 whatever M <= 128 is, 2.4x the bound M's
// time at 128 rows and 1.6x at 512 (H100, bench/NOTES.md, symbolic sizes on the wgmma
// kernel). The breakpoints are those of the bound classes at N = K = 4096: the swapped
// decode's BN = M rounded up (16; in two halves of M / 2 rounded up to 8 columns from 33
// rows: 24 up to 48, 32 up to 64, 40 up to 80, 48 up to kSwappedDecodeMaxM = 95, the
// swapped form's last row count: 1.07x cuBLAS at 77 rows against 0.73x unswapped; one
// tile of 2 x 48 columns for 65..95 ran 1.15x the bound M's 2 x 40 at 80 rows), one row of
// 128-row tiles with BN from N (the medium class, one wave), the medium class's
// persistent form whose BN depends on the row count (2 rows: 64, 3: 96, 4: 128: a wider
// tile fills fewer SMs, 96 of 132 at 3 rows of 128-wide ones), then the large class. The
// upper end, not the middle: a tile sized for the range's largest M serves every smaller
// one (the tensor maps clip the rest), a tile sized for a smaller M would run more rounds
// at the top. bench/NOTES.md (run-time N and K, and small run-time M) has the times.
constexpr int64_t kRuntimeMRangeTops[] = {16, 48, 64, 80, kSwappedDecodeMaxM, 128, 256, 384, 512};

static std::vector<SizeRange> wgmma_size_ranges(const Graph& g, const Target& t) {
  const Node* mm = runtime_size_gemm(g, t);
  if (!mm || !mm->shape[0].is_sym()) return {};
  const Node& a = g.node(mm->inputs[0]);
  if (mm->shape[1].is_sym() || a.shape.back().is_sym()) return {};  // N and K bound
  DefaultChoice large;
  if (!symbolic_wgmma_defaults(g, t, large)) return {};
  const std::string m = mm->shape[0].sym;
  std::vector<SizeRange> out;
  int64_t lo = 1;
  for (int64_t top : kRuntimeMRangeTops) {
    out.push_back({m, lo, top, top});
    lo = top + 1;
  }
  out.push_back({m, lo, std::numeric_limits<int64_t>::max(), 0});
  return out;
}

// The default atom of the shape's class (defaults.cpp): decode shapes run swapped on
// wgmma (wgmma_decode_defaults) and so do batches of thin GEMMs (wgmma_batched_thin: a few
// tokens per expert); split-K shapes with a long K split on wgmma tiles, as do batches;
// in the large and medium classes a large aligned 16-bit GEMM, a medium one, one with few
// tiles and a long K, split, a batch of them, thin or not, and a ragged one whose rows TMA
// cannot address (wgmma_ragged: the threads fill the slabs); tf32 where a wgmma schedule
// has the tiles (wgmma_takes_tf32).
static bool wgmma_claims(const GemmShape& s, const Target& t, const std::string& shape_class,
                         std::string& atom) {
  if (s.in == DType::TF32 && (shape_class == "large" || shape_class == "medium")) {
    if (!wgmma_takes_tf32(s, t)) return false;
    atom = "wgmma_tf32";
    return true;
  }
  if (!tensor_core_operands(s, t) || t.arch != "sm_90a") return false;
  const int n = t.sm_count;
  bool claims = false;
  if (shape_class == "decode")
    claims = wgmma_decode(s) || wgmma_batched_thin(s);
  else if (shape_class == "split-k")
    claims = wgmma_split_k(s, n) || wgmma_batched(s, n) || wgmma_batched_thin(s);
  else if (shape_class == "large" || shape_class == "medium")
    claims = wgmma_large(s, n) || wgmma_medium(s, n) || wgmma_split_k(s, n) ||
             wgmma_batched(s, n) || wgmma_batched_thin(s) || wgmma_ragged(s, n) ||
             wgmma_large_ragged_out(s, n);
  if (claims) atom = atom_16bit(s, "wgmma");
  return claims;
}

// On sm_90a decode runs swapped on wgmma (its schedule: wgmma_decode_defaults).
static bool wgmma_decodes(const GemmShape& s, const Target& t) {
  return tensor_core_operands(s, t) && t.arch == "sm_90a" && wgmma_decode(s);
}

namespace {

// The knobs only wgmma kernels honour, each with the values every atom honours (the
// feature off). They shape the sm_90a organization around wgmma — the producer warpgroup
// and its register split (k:030), ping-pong consumers, TMA multicast and K clusters,
// wgmma's A operand and zeroing (k:026), the TMA-store epilogue (k:053) — and under fma or
// mma.sync some passes never read them (CONSUMERS=pingpong,BN=128,FM=2 ran the SIMT kernel
// as if it were not there) while others refused them without saying what chose the atom.
// The message names the knobs, the atom, what chose it (an explicit ATOM, explicit SIMT
// tiling knobs re-selecting fma over the base's atom, or the base's own atom) and the fix.
std::string refuse_organization_knobs(const RefusalContext& r) {
  const std::string base_atom = r.base.get_str("ATOM", "fma");
  const std::string whose = r.tuned ? "the tuning record's" : "the default";
  std::string why;
  if (r.explicit_knobs.has("ATOM")) {
    why = "the explicit ATOM=" + r.atom;
  } else if (const std::string tiling = tiling_knobs_choosing_fma(r.base, r.explicit_knobs);
             !tiling.empty()) {
    const bool one = tiling.find(',') == std::string::npos;
    why = "the explicit tiling knob" + std::string(one ? " " : "s ") + tiling + ", which without ATOM " +
          (one ? "selects" : "select") + " the SIMT schedule instead of " + whose + " ATOM=" + base_atom;
  } else {
    why = (r.tuned ? "the tuning record" : "the default schedule of this shape on " + r.target.arch);
  }
  const std::string wgmma =
      base_atom.rfind("wgmma_", 0) == 0 ? base_atom : atom_for_operands(r.graph, "wgmma");
  // f32 operands have no exact wgmma: say what the suggested tf32 atom changes.
  const std::string tf32 = wgmma == "wgmma_tf32" && base_atom != wgmma
                               ? "; its products round the operands to tf32" : "";
  std::string fix;
  if (r.target.arch != "sm_90a")
    fix = "drop " + r.bad + ": wgmma needs sm_90a (the target is " + r.target.arch + ")";
  else if (r.explicit_knobs.has("ATOM"))
    fix = "use ATOM=" + wgmma + " instead" + (tf32.empty() ? "" : " (" + tf32.substr(2) + ")") +
          ", or drop " + r.bad;
  else
    fix = "add ATOM=" + wgmma + " (FM and FN then count wgmma atoms per warpgroup" + tf32 +
          "), or drop " + r.bad;
  return r.bad + (r.count == 1 ? " needs" : " need") + " a wgmma atom (ATOM=wgmma_*), but the atom is " +
         r.atom + ", chosen by " + why + "; " + fix;
}

}  // namespace

// The wgmma entry ATOM names: its N is the warpgroup's columns per atom.
static const AtomDef* wgmma_atom_def(CompileState& s, const std::string& v) {
  const std::string acc = s.knobs.get_str("ACC", "f32");
  if (acc != "f32")
    throw Error("ACC=" + acc + " with ATOM=" + v + ": Loom's wgmma atoms accumulate in f32; "
                "use ACC=f32");
  const std::string in = v.substr(6);  // f16 | bf16 | tf32
  const int64_t WN = s.knob("WN", 1), FN = s.knob("FN", 1), BN = s.knob("BN", 128);
  if (WN < 1 || FN < 1 || BN % (WN * FN) != 0)
    throw Error("BN=" + std::to_string(BN) + " with WN=" + std::to_string(WN) + ",FN=" +
                std::to_string(FN) + ": with ATOM=" + v + " each of the WN warpgroups covers "
                "FN atoms of BN/(WN*FN) columns; choose BN as a multiple of WN*FN");
  const int64_t n = BN / (WN * FN);
  const std::string id = "wgmma_m64n" + std::to_string(n) + (in == "tf32" ? "k8" : "k16") +
                         "_f32_" + in;
  const AtomDef* a = find_atom(id);
  if (!a)
    throw Error("ATOM=" + v + " with BN=" + std::to_string(BN) + ",WN=" + std::to_string(WN) +
                ",FN=" + std::to_string(FN) + " needs a wgmma of N=" + std::to_string(n) +
                " columns; wgmma's N is a multiple of 8 from 8 to 256 (choose BN/(WN*FN) so)");
  s.used_knobs["ACC"] = acc;
  return a;
}

// The family's schedule: the shape's defaults, then the epilogue operand's TMA load where
// they are a cooperative persistent TMA-store schedule (what it was measured on). The
// run-time-M schedule (symbolic_wgmma_defaults) keeps the direct reads: it widens BN after.
static Knobs wgmma_schedule(const GemmShape& s, const Target& t) {
  Knobs k = wgmma_defaults_for(s, t);
  if (s.mn_operand && !s.f32_operands && s.batch == 1 &&
      k.get_str("EPILOGUE", "") == "tma_store" && k.get_int("WARP_SPECIALIZE", 0) == 1 &&
      k.get_int("PERSISTENT", 0) == 1 && k.get_int("SWAP_AB", 0) == 0 &&
      k.get_int("CLUSTER_K", 1) == 1 && k.get_int("STREAM_K", 0) == 0 &&
      k.get_str("CONSUMERS", "cooperative") == "cooperative")
    epilogue_operand_by_tma(k, s, t);
  return k;
}

KernelFamily wgmma_family() {
  KernelFamily f;
  f.name = "wgmma";
  f.summary = "wgmma GEMM: warpgroups of m64nNk16 / k8 atoms on descriptor-read slabs, fed by "
              "TMA (producer warpgroup, clusters, TMA-store epilogue) or the threads' copies "
              "(ATOM=wgmma_*), sm_90a";
  f.op = FamilyOp::gemm;
  f.serves_atom = [](const std::string& atom) { return atom.rfind("wgmma_", 0) == 0; };
  f.reads = concat({{"WARP_SPECIALIZE"}, {"PRODUCER_REGS"}, {"CONSUMER_REGS"}, {"CONSUMERS"},
                    {"CLUSTER_M"},       {"CLUSTER_N"},     {"CLUSTER_K"},     {"WGMMA_A"},
                    {"WGMMA_ZERO"},      {"EPILOGUE"},      {"EPI_BUFFERS"},   {"STMATRIX"},
                    {"EPI_SYNC"},        {"EPI_LOAD"},      {"EPI_LOAD_BUFFERS"},
                    {"TF32_ROUND"},      {"WGMMA_FILLS"},     {"GEMM_FORM"}},
                   gemm_common_knobs());
  f.honours = {{"LDMATRIX", {"0"}}, {"FRAG_BUFFERS", {"1"}}};
  f.schedule_slot = &DefaultChoice::wgmma;
  f.schedule = wgmma_schedule;
  f.claims = wgmma_claims;
  f.decodes = wgmma_decodes;
  f.symbolic = symbolic_wgmma_defaults;
  f.size_ranges = wgmma_size_ranges;
  f.atom_def = wgmma_atom_def;
  f.refusal = refuse_organization_knobs;
  // The tuner searches ATOM=wgmma_* on sm_90a-style targets only (tune/problem.cpp); the
  // per-knob values it tries are the registry's (passes/knobs.cpp, .searched "wgmma").
  f.tuner_min_cc = 90;
  f.tuner_needs_accelerated = true;
  // EPI_BUFFERS, STMATRIX and EPI_SYNC shape only k:053's shared strips: the TMA-store
  // epilogue's, and the staged epilogue's of a warp-specialized kernel (EPILOGUE=smem).
  f.variants = {{"EPILOGUE", "tma_store|smem", "the shared strips of the TMA-store or staged epilogue", "k:053",
                 {"EPI_BUFFERS", "STMATRIX", "EPI_SYNC"},
                 "k:053 stages warp-specialized wgmma kernels; k:054 stages the others through "
                 "the mainloop's bytes; add WARP_SPECIALIZE=1, or"}};
  // The producer warpgroup (k:030 refuses WARP_SPECIALIZE=1 without TMA), its register
  // split and consumers, multicast clusters and the TMA-store epilogue ride on TMA slabs;
  // the threads' copies (STAGE=cp_async) take none of them.
  f.transports = {{"tma",
                   {{"WARP_SPECIALIZE"}, {"PRODUCER_REGS"}, {"CONSUMER_REGS"}, {"CONSUMERS"},
                    {"CLUSTER_M"}, {"CLUSTER_N"}, {"EPI_BUFFERS"}, {"STMATRIX"}, {"EPI_SYNC"},
                    {"EPILOGUE", {"tma_store"}}, {"EPI_LOAD", {"tma"}}, {"EPI_LOAD_BUFFERS"}}}};
  return f;
}

}  // namespace loom
