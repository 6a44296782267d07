#include "tune/cost_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ir/register_file.h"

namespace loom::tune {
namespace {

// Cycles from a slab copy's issue to its data in shared memory (global -> L2 hit -> SM):
// the latency a ring of STAGES buffers hides by running STAGES - 1 slabs of math ahead.
constexpr double kCopyLatencyClk = 700;
// L2 -> SM bytes per clock per SM (H100: roughly 9 TB/s over 132 SMs at 1.75 GHz).
constexpr double kL2BytesPerClk = 40;
constexpr double kSmemBytesPerClk = 128;  // 32 banks x 4 B
constexpr double kLaunchUs = 3;           // launch + the tail of an empty GPU
constexpr double kBarrierClk = 40;        // per slab: barrier, loop and address overhead

// wgmma schedules (calibrated on the hopper ladder, 4096^3 bf16 on H100, bench/NOTES.md
// 2026-11-22, wgmma and the cluster slowdown: per-tile cycles of 67k / 53k / 76k for rungs 1 / 2 / 3-4).
// Share of the tensor cores' peak that consumer warpgroups keep busy: one warpgroup
// leaves gaps between its dependent wgmma groups that a second one fills.
constexpr double kOneWarpgroupBusy = 0.68;
constexpr double kTwoWarpgroupsBusy = 0.93;
// Per slab: without a producer warpgroup every thread waits on the full barrier and
// meets at bar.sync (rung 1 vs 2: ~290 cycles a slab); with one, the consumers only test
// a barrier that is usually complete and hand the slot back.
constexpr double kSlabSyncClk = 290;
constexpr double kSlabHandoffClk = 30;
// L2 -> SM bytes per clock per SM that TMA sustains: ~48 KB per 1100-cycle k-step at
// 128x256x64 is not the bound (clusters did not speed up 4096^3), so above that.
constexpr double kTmaL2BytesPerClk = 56;
// Register -> global bytes per clock per SM of the direct epilogue (its stores are not
// overlapped with math: the tensor cores wait).
constexpr double kDirectStoreBytesPerClk = 24;
// A CTA's start: launch, barrier init, and the first slab's TMA round trip.
constexpr double kCtaStartClk = 1500;
// EPILOGUE=tma_store: the tile goes to shared memory (stmatrix, 128 B/clk) and a TMA store
// takes it from there; in a persistent kernel the store runs under the next tile's
// mainloop (the epilogue cost 8% at 4096^3 before it: 0.91x -> 0.99x, bench/NOTES.md,
// 2026-11-22, the epilogue), otherwise the CTA waits for it at exit at about TMA's load rate.
constexpr double kTmaStoreBytesPerClk = 56;
// CLUSTER_K: each CTA stores every row slice of its f32 partial tile into the slice
// owner's shared memory over DSMEM (st.async, about a quarter of local shared-memory
// bandwidth), then waits for its peers' slices on an mbarrier (about one DSMEM round trip)
// and sums its 1/c of the rows from its own shared memory.
constexpr double kDsmemBytesPerClk = 32;
constexpr double kDsmemRoundTripClk = 400;

struct Rates {
  double clk_hz, dram_bytes_per_s;
};

Rates rates_of(const DeviceInfo& dev) {
  Rates r;
  r.clk_hz = (dev.clock_khz > 0 ? dev.clock_khz : 1755000) * 1e3;
  // Double data rate: two transfers per memory clock over the bus.
  r.dram_bytes_per_s = dev.mem_clock_khz > 0 && dev.mem_bus_width > 0
                           ? 2.0 * dev.mem_clock_khz * 1e3 * dev.mem_bus_width / 8
                           : 3.35e12;
  return r;
}


}  // namespace

int estimate_registers(const BlockShape& b, const AtomChoice& a, const Knobs& k,
                       const TuneProblem& p) {
  double regs = 0;
  if (a.wgmma()) {
    // Warp-specialized kernels launch with the register file split evenly (setmaxnreg then
    // moves registers from the producer to the consumers); otherwise accumulators,
    // descriptors and addresses.
    if (b.warp_specialized && b.threads > 0)
      return int(launch_regs_per_thread(b.threads, 1));
    regs = double(b.accumulators) + 40;
  } else if (a.mma()) {
    // Per atom step: A fragment m*k/32 values, B n*k/32, packed two per register for 16-
    // bit operands; FRAG_BUFFERS sets of them. Measured: 234 at 4x8 f16 atoms (bench/NOTES.md).
    const int per_reg = dtype_bytes(a.atom->a_type) == 2 ? 2 : 1;
    const double frag = double(b.FM * a.atom->m * a.atom->k + b.FN * a.atom->n * a.atom->k) /
                        WarpAtom::kLanes / per_reg;
    regs = double(b.accumulators) + frag * double(k.get_int("FRAG_BUFFERS", 1)) + 60;
  } else {
    // Accumulators, one k step's A and B cells, the next slab's elements held in
    // registers by STAGE=sync's double buffering (127 at 8x8 cells, 128x128, BK=16).
    double prefetch =
        b.stage == "sync" && b.stages >= 2
            ? double(b.BM + b.BN) * double(b.BK) / double(std::max<int64_t>(b.threads, 1))
            : 0;
    if (p.in != DType::F32) prefetch *= 1.5;  // converted on load
    regs = double(b.accumulators + b.FM + b.FN) + prefetch + 32;
  }
  return std::min(255, int(std::ceil(regs / 8) * 8));
}


double peak_flop_per_clk(const AtomChoice& atom, int cc) {
  if (!atom.mma()) return cc == 80 ? 128 : 256;  // FP32 lanes: 64 per SM on A100, 128 after
  const bool tf32 = atom.atom->a_type == DType::TF32;
  if (atom.wgmma()) return tf32 ? 2048 : 4096;  // dense wgmma on sm_90 (docs/benchmarking.md)
  // A100: 1024 dense f16 FMA per clock per SM, tf32 half. H100: mma.sync reaches about
  // 64% of wgmma's 4096 FLOP/clk (bench/NOTES.md, 2026-11-22, mma.sync), tf32 half of that.
  const double f16 = cc >= 90 ? 2620 : 2048;
  return tf32 ? f16 / 2 : f16;
}

CostEstimate predict(const TuneProblem& given, const AtomChoice& atom, const Knobs& k,
                     const DeviceInfo& dev, const SmemFactors& smem) {
  const TuneProblem p = as_computed(given, k);
  CostEstimate e;
  const BlockShape b = block_shape(k, atom);
  const Rates r = rates_of(dev);
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  const double elem = dtype_bytes(p.in);
  // SPLITK and CLUSTER_K both cut K: S x c CTAs per output tile.
  const int64_t S = std::max<int64_t>(1, b.split_k);
  const int64_t c = std::max<int64_t>(1, b.cluster_k);
  const double k_slice = std::ceil(double(p.K) / double(S * c));
  const double k_steps = std::max(1.0, std::ceil(k_slice / double(b.BK)));
  const double warps = double(b.threads) / WarpAtom::kLanes;

  // ---- residency -------------------------------------------------------------------
  e.registers = estimate_registers(b, atom, k, p);
  const int64_t min_blocks = k.get_int("MIN_BLOCKS", 0);
  if (min_blocks > 0 && b.threads > 0) {
    // __launch_bounds__ caps registers so that MIN_BLOCKS blocks fit (ptxas spills past it,
    // which pruning catches from the report).
    int cap = int(dev.regs_per_sm / (min_blocks * b.threads)) / 8 * 8;
    e.registers = std::max(16, std::min(e.registers, cap));
  }
  const int64_t smem_bytes = mainloop_smem_bytes(b, p, k);
  int64_t by_regs = b.threads > 0 ? dev.regs_per_sm / (int64_t(e.registers) * b.threads) : 0;
  // Each resident block also reserves 1 KiB of shared memory for the system (sm_80+).
  int64_t by_smem = smem_bytes > 0 ? dev.smem_per_sm / (smem_bytes + 1024) : 1 << 20;
  int64_t by_threads = b.threads > 0 ? dev.max_threads_per_sm / b.threads : 0;
  e.blocks_per_sm =
      int(std::min({by_regs, by_smem, by_threads, int64_t(std::max(1, dev.max_blocks_per_sm))}));
  if (e.blocks_per_sm <= 0) {
    e.limiter = by_regs == 0 ? "registers" : by_smem == 0 ? "shared memory" : "threads";
    e.unresident = by_regs == 0 ? "an estimated " + std::to_string(e.registers) + " registers x " +
                                      std::to_string(b.threads) + " threads exceed the SM's " +
                                      std::to_string(dev.regs_per_sm) + " registers"
                   : by_smem == 0
                       ? std::to_string(smem_bytes) + " B of shared memory exceed the SM's " +
                             std::to_string(dev.smem_per_sm) + " B"
                       : std::to_string(b.threads) + " threads exceed the SM's " +
                             std::to_string(dev.max_threads_per_sm);
    e.us = 1e30;
    return e;
  }

  // ---- one tile on one SM, with `resident` blocks sharing it -----------------------
  const double flops_tile = 2.0 * double(b.BM) * double(b.BN) * k_slice;
  double issue_eff = 1;
  double read_wavefronts = 0;  // per tile, fragment reads
  if (atom.mma()) {
    const double steps = k_slice / atom.atom->k;
    const double a_bytes = double(atom.atom->m * atom.atom->k) * elem;
    const double b_bytes = double(atom.atom->n * atom.atom->k) * elem;
    read_wavefronts =
        steps * warps * (double(b.FM) * a_bytes + double(b.FN) * b_bytes) / kSmemBytesPerClk;
  } else {
    // Per k step a thread issues FM x FN FFMA and its fragment loads: 16-byte loads of a
    // [BK][BM] A slab, scalar ones of an [BM][BK] A (cp.async and TMA copy in storage
    // order: 0.47-0.78x against 0.89x for sync at 4096^3, bench/NOTES.md).
    const double a_lds = b.a_kouter ? std::ceil(double(b.FM) / 4) : double(b.FM);
    const double b_lds = std::ceil(double(b.FN) / 4);
    const double ffma = double(b.FM * b.FN);
    issue_eff = ffma / (ffma + a_lds + b_lds + 1);
    if (k.get_int("INTERLEAVE_LOADS", 0) == 1) issue_eff = std::min(1.0, issue_eff * 1.01);
    // A warp's LDS costs a wavefront per 128 bytes requested, broadcasts or not.
    read_wavefronts =
        k_slice * warps * double(b.FM + b.FN) * 4 * WarpAtom::kLanes / kSmemBytesPerClk;
  }
  const double slab_bytes = double(b.BM + b.BN) * k_slice * elem;
  const double write_wavefronts = b.stage == "direct" ? 0 : slab_bytes / kSmemBytesPerClk;
  // Slab rows narrower than 128 bytes cost an L2 tag lookup per fewer sectors (BK=32 f16:
  // 86% of tag throughput, bench/NOTES.md, 2026-11-22, mma.sync).
  const double row_bytes = double(b.BK) * elem;
  const double l2_factor = row_bytes < 128 ? 1.0 + 0.25 * (128 / row_bytes - 1) : 1.0;

  // wgmma: the slabs arrive by TMA, decoupled from the math (a producer warpgroup, or a
  // ring the whole block waits on): the tile takes the larger of math and L2 time, plus
  // the per-slab synchronization, the epilogue (not overlapped) and the CTA's start.
  auto wgmma_tile_cycles = [&]() {
    const double busy = b.consumer_warpgroups >= 2 ? kTwoWarpgroupsBusy : kOneWarpgroupBusy;
    const double math = flops_tile / peak_flop_per_clk(atom, cc) / busy;
    // A cluster's CTAs share each B slab: each reads 1/CLUSTER_M of it from L2.
    const double l2_bytes =
        (double(b.BM) + double(b.BN) / double(std::max<int64_t>(1, b.cluster_m))) * k_slice * elem;
    const double l2 = l2_bytes / kTmaL2BytesPerClk;
    e.limiter = l2 > math ? "l2" : "math";
    double t = std::max(math, l2);
    t += k_steps * (b.warp_specialized ? kSlabHandoffClk : kSlabSyncClk);
    // WGMMA_A=regs: the consumers load A's slab into registers (ldmatrix) before issuing,
    // about half of it exposed.
    if (b.a_regs) t += 0.5 * double(b.BM) * k_slice * elem / kSmemBytesPerClk;
    const double tile_bytes = double(b.BM) * double(b.BN) * dtype_bytes(p.out);
    if (c > 1) {
      // The partial tile over DSMEM into its owners, summed from shared memory; each CTA
      // stores 1/c of the rows.
      const double partial = double(b.BM) * double(b.BN) * 4;
      t += partial / kDsmemBytesPerClk + kDsmemRoundTripClk + partial / kSmemBytesPerClk;
      t += tile_bytes / double(c) / kDirectStoreBytesPerClk;
    } else if (b.epilogue == "tma_store") {
      t += tile_bytes / kSmemBytesPerClk;
      if (!b.persistent) t += tile_bytes / kTmaStoreBytesPerClk;
    } else {
      t += tile_bytes / kDirectStoreBytesPerClk;
    }
    // A persistent CTA starts once and its producer runs ahead into the next tile.
    if (!b.persistent) t += kCtaStartClk;
    return t;
  };

  auto tile_cycles = [&](double resident) {
    if (atom.wgmma()) return wgmma_tile_cycles();
    const double w = resident * warps / 4;  // warps per scheduler
    const double hide = w / (w + 0.5);
    std::vector<std::pair<double, std::string>> bounds = {
        {flops_tile / peak_flop_per_clk(atom, cc) / hide, "math"},
        {flops_tile / peak_flop_per_clk(atom, cc) / issue_eff / hide, "issue"},
        {(read_wavefronts * smem.reads + write_wavefronts * smem.writes) / hide, "smem"},
        {slab_bytes * l2_factor / kL2BytesPerClk, "l2"}};
    std::sort(bounds.begin(), bounds.end(),
              [](const auto& x, const auto& y) { return x.first > y.first; });
    double t = bounds[0].first + 0.2 * bounds[1].first;
    e.limiter = bounds[0].second;
    // Copy latency per slab not covered by the ring: each slab's math takes `slab` cycles
    // of this block's share of the SM, STAGES - 1 of them run ahead (sync: the register
    // prefetch of STAGES=2 covers one slab).
    const double slab = t / k_steps * resident;
    const double ahead = b.stage == "sync"     ? double(std::min<int64_t>(b.stages, 2) - 1)
                         : b.stage == "direct" ? 0
                                               : double(b.stages - 1);
    const double exposed = std::max(0.0, kCopyLatencyClk - ahead * slab);
    t += k_steps * (exposed + kBarrierClk) / resident;
    return t;
  };

  const double tiles = double(p.batch) * std::ceil(double(p.M) / double(b.BM)) *
                       std::ceil(double(p.N) / double(b.BN)) * double(S * c);
  const double slots = double(e.blocks_per_sm) * dev.sm_count;
  const double full_waves = std::floor(tiles / slots);
  const double rest = tiles - full_waves * slots;
  double cycles = full_waves * tile_cycles(e.blocks_per_sm) * e.blocks_per_sm;
  if (rest > 0) {
    // The last wave: the busiest SM runs ceil(rest / SMs) blocks, with fewer warps.
    const double per_sm = std::ceil(rest / dev.sm_count);
    cycles += tile_cycles(per_sm) * per_sm;
  }
  e.tile_cycles = tile_cycles(e.blocks_per_sm);
  e.wave_efficiency = tiles / (std::ceil(tiles / slots) * slots);

  // ---- whole kernel: DRAM, combine, launches ---------------------------------------
  double us = cycles / r.clk_hz * 1e6;
  const double a_b_bytes = double(p.batch) * double(p.M * p.K + p.K * p.N) * elem;
  const double c_bytes = double(p.batch) * double(p.M * p.N) * dtype_bytes(p.out);
  double dram = a_b_bytes + c_bytes;
  // Row-major tile order re-reads B from DRAM once A and B outgrow L2 (GROUP_M=8: +1-2%
  // at 4096^3, 2-4% at 8192^3, bench/NOTES.md).
  if (k.get_int("GROUP_M", 1) <= 1 &&
      a_b_bytes > double(dev.l2_bytes > 0 ? dev.l2_bytes : 50 << 20))
    dram += 0.3 * a_b_bytes;
  const double dram_us = dram / r.dram_bytes_per_s * 1e6;
  if (dram_us > us) e.limiter = "dram";
  us = std::max(us, dram_us);
  if (S > 1) {
    // atomic: a zero fill then S partial sums added in L2; reduce: S partial tiles
    // written and read back by a second kernel.
    const double partial = double(S) * double(p.batch * p.M * p.N) * 4;
    const bool atomic = k.get_str("SPLITK_MODE", "reduce") == "atomic";
    us += kLaunchUs +
          (atomic ? partial / (r.dram_bytes_per_s * 2) : 2 * partial / r.dram_bytes_per_s) * 1e6;
  }
  // The direct mma epilogue writes half of each 32-byte sector per instruction.
  if (atom.mma() && k.get_str("EPILOGUE", "direct") == "direct")
    us += c_bytes / r.dram_bytes_per_s * 1e6 * 0.5;
  e.us = us + kLaunchUs;
  return e;
}

}  // namespace loom::tune
