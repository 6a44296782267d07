// The tuner's search space for one attention problem (asked for: "the knobs of the articles
// — query/key block sizes, warps, load tiles, double buffering, softmax variant — are
// tuner knobs"). The GEMM space (space.h) is built from the knob registry's search lists
// and the atom table; attention has two kernels whose knobs mean different things, so
// its space is a table of its own here, one family per kernel:
//
//   wgmma     (k:013, sm_90a): ATTN_MMA=wgmma x ATTN_WG x BLOCK_N x KV_STAGES x
//             ATTN_PRODUCER (x ATTN_OVERLAP where ATTN_PRODUCER=1);
//   mma_sync  (k:012, sm_80+): ATTN_MMA=mma_sync x BLOCK_M x BLOCK_N x WARPS x Q_IN_REGS x
//             KV_STAGES x SOFTMAX;
//
// plus one-knob variants of the mma.sync shipped default (the articles' remaining rungs:
// STAGE_OUTPUT, FRAG_BUFFERS, ZERO_INIT, MIN_BLOCKS). Each kernel refuses the other's
// knobs, so a family sets only its own. A value outside a knob's declared range prunes
// the point with Knobs::set's message (a table edited past a knob's range says so).
//
// Every surviving point is built through the pipeline to Kernel IR (stage 2 of prune.h):
// the passes' refusals — shared memory over the opt-in limit, a register estimate over
// 255, WARPS that do not divide BLOCK_M into 16-row atoms, a tile the kernel does not
// take — prune it with the pass's message, and the full knob set the passes used
// (defaults included) becomes the candidate, so two points that compile to one kernel
// are measured once. ptxas' spills prune later, as for GEMMs (tuner.cpp, stage 3).
//
// Ranking (a rank for the cap, not a promise): the attention FLOPs over a fraction of the
// atom's peak (measured: mma.sync kernels 0.30-0.33 of the dense bf16 peak on H100,
// FlashAttention-3's wgmma ~0.6), times the grid's wave quantization, times a per-key-
// block overhead (the online softmax's rescale, ~16 keys' worth of math per block).
// The cap takes each family's best in turn, so a model that favours one kernel still
// leaves the other measured.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "tune/space.h"

namespace loom::tune {

// One dimension of a family: a knob and its values in search order.
struct AttentionDim {
  std::string knob;
  std::vector<std::string> values;
};

// A condition on a dimension: `knob` is searched only where `on` has `value`, and left at
// its first value elsewhere (ATTN_OVERLAP needs ATTN_PRODUCER=1).
struct AttentionFamily {
  std::string name;  // "wgmma", "mma_sync"
  int min_cc = 80;
  bool needs_arch_accelerated = false;  // sm_90a (wgmma, setmaxnreg), not sm_90
  std::vector<AttentionDim> dims;       // the product
  struct Only {
    std::string knob, on, value;
  };
  std::vector<Only> only;
};

// The table, in enumeration order.
const std::vector<AttentionFamily>& attention_families();

// One-knob variants tried on top of each mma.sync shipped default (knob, values): the
// first value other than the default's own.
const std::vector<AttentionDim>& attention_default_variants();

// The points of `family` for `t` before any pass sees them: each a knob set, or the
// reason it cannot be one (a value outside its knob's range). Empty when the family does
// not apply to t.
struct AttentionPoint {
  Knobs knobs;
  std::string why_not;  // non-empty: pruned before building (a bad value)
  std::string family;
  std::string asked;  // every knob=value the table gave it, as written
};
std::vector<AttentionPoint> attention_points(const AttentionFamily& family, const Target& t);

// The ranking's predicted time of `k` (a full set the pipeline used) for attention graph
// `g` on `dev`.
double predict_attention_us(const Graph& g, const Knobs& k, const DeviceInfo& dev);

// The space: Space::kept are full knob sets (the shipped defaults first among equals,
// plain_default the one `loom run` compiles without knobs), Space::atoms the families
// enumerated. opt.atoms, when given, names the families to search ("wgmma",
// "mma_sync"). Throws loom::Error for a graph without attention or with symbolic sizes.
Space generate_attention_space(const Graph& g, const DeviceInfo& dev, const Target& t,
                               const SpaceOptions& opt = {});

// The family a full knob set belongs to: "wgmma" when ATTN_MMA=wgmma, else "mma_sync".
std::string attention_family_of(const Knobs& k);

}  // namespace loom::tune
