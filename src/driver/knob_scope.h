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
// defaults or a tuning record, `tuned` says which) and `atom` the atom that will run. The
// kernel families' declarations (src/passes/families/) say what each kernel reads:
//  - GEMM knobs (no attention family reads them) on a program with attention and no
//    contraction, and attention knobs on one with a contraction and no attention;
//  - knobs that only another GEMM family reads than the one serving `atom`: wgmma's
//    organization (warp specialization, register split, consumers, clusters, wgmma's
//    operand and zeroing, the TMA-store epilogue) when the atom is not wgmma, mma.sync's
//    fragments (LDMATRIX, FRAG_BUFFERS) when it is not mma.sync; each family's message.
void refuse_inapplicable_knobs(const Graph& g, const CompileOptions& opt, const Knobs& base,
                               bool tuned, const std::string& atom);

// After the pipeline ran: the knobs of a family's variant (EPI_BUFFERS, STMATRIX and
// EPI_SYNC shape only the TMA-store epilogue, k:053) are refused when a pass recorded
// another value for the variant's selector (k:054 records the epilogue that ran).
void refuse_knobs_of_other_variants(const CompileOptions& opt, const CompileState& s);

}  // namespace loom
