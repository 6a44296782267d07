// Static pruning: reasons a candidate is not worth measuring, found without a GPU, each a
// sentence a person can act on. Three stages, cheapest first:
//  1. knob rules, before anything is built: divisibility, threads per block, accumulator
//     registers, tile against problem size, staging legality, estimated shared memory
//     against the device's opt-in limit, TMA box limits, split-K where the grid is full,
//     and the cluster knobs as the passes themselves refuse them (PassRefusals);
//  2. the Kernel IR the pipeline built: exact shared memory, and the bank-conflict model
//     (fragment reads at max_read_conflict or worse are pruned; milder conflicts only
//     raise the cost model's shared-memory time — SmemFactors);
//  3. ptxas' report after NVRTC: spills, and registers x threads over the SM's register
//     file (no block could be resident).
// A pipeline error (loom::Error) is a reason of its own; the space records its message.
#pragma once
#include <map>
#include <string>

#include "ir/graph.h"

#include "passes/pass.h"
#include "runtime/device.h"
#include "tune/compile_pool.h"
#include "tune/cost_model.h"
#include "tune/problem.h"

namespace loom::tune {

// Stage 1, group by group (the space checks a tiling once, before its stagings), and all
// four. Each is empty when the knobs pass its rules; else why they do not.
std::string tiling_violation(const TuneProblem& p, const AtomChoice& atom, const Knobs& k);
std::string staging_violation(const TuneProblem& p, const AtomChoice& atom, const Knobs& k,
                              const DeviceInfo& dev);
std::string split_violation(const TuneProblem& p, const AtomChoice& atom, const Knobs& k,
                            const DeviceInfo& dev);
// The "other" knobs against each other and the tile (the refusals of the passes that read
// them): EPILOGUE=tma_store takes a plain 2-D output tile written once (k:053),
// EPI_BUFFERS one warpgroup column (k:053), WGMMA_A=regs a K-major A (k:026). The space
// picks each base's values to pass these, and prunes the variants that do not. The
// cluster knobs are not here: PassRefusals asks the passes themselves.
std::string other_violation(const TuneProblem& p, const AtomChoice& atom, const Knobs& k);

// tf32 wgmma on TMA slabs, unswapped: an operand given M-/N-major (A.T, B [K, N]) is read
// K-major through k:015's transposing stage, which SLAB_A / SLAB_B = kinner ask for; sets
// them on `k` where they apply (the staging group's candidates, before its rules).
void tf32_transposing_slabs(const TuneProblem& given, const AtomChoice& atom, Knobs& k);

std::string knob_rule_violation(const TuneProblem& p, const AtomChoice& atom, const Knobs& k,
                                const DeviceInfo& dev);

// The cluster knobs' refusals, from the passes that decide them rather than a copy of
// their limits: the pipeline of `g` run up to t:010_partition_loops (l:020 and l:022
// refuse split and CLUSTER_K combinations, t:010 cluster shapes — CLUSTER_M x CLUSTER_N,
// sizes, a cluster over tiles or over K, CLUSTER_K with PERSISTENT or a staged epilogue).
// Through the loop passes and one tile pass it costs a few milliseconds, nothing like a
// stage-2 build, and each knob set is asked once. Used only for sets with a cluster
// (CLUSTER_M, CLUSTER_N or CLUSTER_K above 1): the others have nothing for it to refuse.
class PassRefusals {
 public:
  PassRefusals(const Graph& g, const Target& t) : g_(g), target_(t) {}
  // Empty when the passes accept `k` (or it has no cluster); else the pass's message.
  std::string operator()(const Knobs& k);
  size_t probes() const { return cache_.size(); }

 private:
  const Graph& g_;
  Target target_;
  std::map<std::string, std::string> cache_;
};

bool has_cluster(const Knobs& k);

// Stage 1 in full: the knob rules, then the passes' cluster refusals.
std::string stage1_violation(const TuneProblem& p, const AtomChoice& atom, const Knobs& k,
                             const DeviceInfo& dev, PassRefusals& refusals);

// Stage 2, for a state the pipeline has run to Kernel IR.
struct KernelVerdict {
  std::string reason;  // empty: keep
  SmemFactors smem;    // wavefronts / ideal of the contraction kernel's shared accesses
};
KernelVerdict check_kernel_ir(const CompileState& s, const DeviceInfo& dev,
                              double max_read_conflict = 4.0);

// Stage 3. Empty when no kernel spills, ptxas serialized no kernel's wgmma, and each can
// be resident.
std::string resource_violation(const CompiledCandidate& c, const DeviceInfo& dev);

}  // namespace loom::tune
