// The tuner's cost model: a predicted time for a knob set without a GPU, good at ranking
// candidates (which of two tiles is faster), not at absolute time. The successive-halving
// strategy measures the best-ranked ones; the model only decides which get measured.
//
// Model (one contraction kernel; docs/tuning.md has the reasoning):
//  - per tile, the SM's cycles are bounded by the atom's peak rate (fma, mma.sync f16/bf16,
//    tf32), by issue slots the shared loads take from the FFMAs (SIMT), by shared-memory
//    wavefronts (fragment reads + slab writes, times the bank-conflict factors) and by
//    L2->SM bytes of the A and B slabs; the largest bound plus a fifth of the next;
//  - latency hiding: warps per scheduler w give w / (w + 0.5) of those rates, and a slab
//    copy whose latency the ring (STAGES - 1 slabs of math ahead) does not cover is exposed,
//    shared among the blocks resident on the SM;
//  - residency from estimated registers (accumulators, fragments, prefetch), shared bytes,
//    threads and MIN_BLOCKS; waves of tiles over the SMs, the last wave quantized;
//  - DRAM: A, B and C once (1.3x without GROUP_M when they overflow L2), split-K's combine
//    traffic and extra launches, and a fixed launch cost;
//  - wgmma tiles: the larger of math and L2 (TMA), per-slab hand-off, the CTA's start
//    unless persistent, and the epilogue: direct stores, the TMA store (overlapped in a
//    persistent kernel) or CLUSTER_K's DSMEM reduction of the partial tile; SPLITK and
//    CLUSTER_K both divide K.
#pragma once
#include <string>

#include "passes/knobs.h"
#include "runtime/device.h"
#include "tune/problem.h"

namespace loom::tune {

// Shared-memory wavefronts per ideal of the kernel's fragment reads and slab writes, from
// the bank-conflict model (1 = conflict-free). The space fills them in once the pipeline
// has built the kernel; before that they are 1.
struct SmemFactors {
  double reads = 1, writes = 1;
};

struct CostEstimate {
  double us = 0;               // predicted time
  double tile_cycles = 0;      // one tile on one SM, resident blocks sharing it
  int blocks_per_sm = 0;       // 0: the block cannot be resident (see `limiter`)
  int registers = 0;           // estimated per thread
  double wave_efficiency = 0;  // tiles / (waves x resident slots)
  std::string limiter;         // what bounds the tile: "math", "issue", "smem", "l2", "dram"
  std::string unresident;      // blocks_per_sm == 0: why, with the numbers
};

// Registers per thread the kernel needs (accumulators, fragments or cells, the register
// prefetch of STAGE=sync, addresses), rounded up to 8 and at most 255; no MIN_BLOCKS cap.
int estimate_registers(const BlockShape& b, const AtomChoice& a, const Knobs& k,
                       const TuneProblem& p);

// Peak multiply-add FLOP per clock per SM of ATOM `atom` on compute capability `cc` (x10).
double peak_flop_per_clk(const AtomChoice& atom, int cc);

CostEstimate predict(const TuneProblem& p, const AtomChoice& atom, const Knobs& knobs,
                     const DeviceInfo& dev, const SmemFactors& smem = {});

}  // namespace loom::tune
