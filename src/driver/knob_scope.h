// Explicit knobs that the kernel about to be generated would not read: refused, naming the
// knobs, what makes them inapplicable, and the fix. A knob no pass reads used to be
// dropped silently (CONSUMERS=pingpong under the SIMT schedule, BM=64 on attention,
// EPI_BUFFERS without the TMA-store epilogue): the user believed a variant was measured
// that never ran. Only explicit knobs are checked — defaults and tuning records never set a
// knob for a kernel that does not read it — and a value that switches a feature off
// (CLUSTER_M=1, WARP_SPECIALIZE=0, ...) is honoured by every kernel, so it passes.
#pragma once
#include <string>

#include "ir/graph.h"
#include "passes/pass.h"

namespace loom {

struct CompileOptions;

// Before the pipeline runs. `base` is the knob set explicit knobs merge over (the class
// defaults or a tuning record, `tuned` says which) and `atom` the atom that will run.
//  - GEMM-only knobs (tiling, staging, epilogue, clusters, persistence) on a program with
//    attention and no contraction, and attention-only knobs (BLOCK_M, WARPS, ATTN_*, ...)
//    on one with a contraction and no attention;
//  - wgmma-only knobs (warp specialization, register split, consumers, clusters, wgmma's
//    operand and zeroing, the TMA-store epilogue) when the atom is not wgmma;
//  - mma.sync-only knobs (LDMATRIX, FRAG_BUFFERS) when it is not mma.sync.
void refuse_inapplicable_knobs(const Graph& g, const CompileOptions& opt, const Knobs& base,
                               bool tuned, const std::string& atom);

// After the pipeline ran: EPI_BUFFERS, STMATRIX and EPI_SYNC shape only the TMA-store
// epilogue (k:053); refused when the epilogue that ran (k:054 records it) is another.
void refuse_knobs_of_other_epilogues(const CompileOptions& opt, const CompileState& s);

}  // namespace loom
