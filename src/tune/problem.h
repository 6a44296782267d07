// The contraction a tuning run is for, the compute atoms that can run it, and what one
// knob set makes of a thread block: the space, the pruning rules and the cost model read
// these instead of re-deriving them from the graph and the knob strings.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "atoms/atoms.h"
#include "ir/dtype.h"
#include "ir/graph.h"
#include "passes/knobs.h"

namespace loom::tune {

struct TuneProblem {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  size_t out_rank = 2;     // the contraction result's rank: 2, 3 (bmm) or 4
  DType in = DType::F32;   // A's element type
  DType out = DType::F32;  // the result's element type
  bool epilogue = false;   // elementwise ops fused after the contraction
  bool a_transposed = false, b_transposed = false;  // given as A.T / B.T (graph.h)
  double flops() const { return 2.0 * double(batch) * double(M) * double(N) * double(K); }
};

// Throws loom::Error for a graph without a contraction or with a size left symbolic
// (the tuner tunes one shape: bind the sizes first, bind_sizes in driver/run.h).
TuneProblem tune_problem(const Graph& g);

// One value of the ATOM knob and the atom-table entry it selects.
struct AtomChoice {
  std::string knob;  // "fma", "mma_bf16", "wgmma_bf16", ...
  // The table entry: for wgmma the m64n256 one of the operand type (its n is the widest
  // an atom may be; a candidate's own n is BN / (WN x FN)).
  const AtomDef* atom = nullptr;
  bool mma() const { return knob != "fma"; }  // mma.sync or wgmma: tensor-core atoms
  bool wgmma() const { return knob.rfind("wgmma_", 0) == 0; }
};

// The ATOM values that can run `p` on compute capability `cc` (x10), read from the
// registry's ATOM choices and the atom table: fma always; an mma_<type> choice when the
// table has a 32-lane atom of that operand type with f32 accumulation (ACC=f16 changes
// the numeric contract, so the tuner never picks it) that the target has, and the
// operands are of that type (f32 operands also run as tf32: the multiply rounds them);
// a wgmma_<type> choice likewise from the 128-thread (warpgroup) atoms, on sm_90a targets
// (`arch_accelerated`: wgmma and setmaxnreg exist only there).
std::vector<AtomChoice> atom_choices(const TuneProblem& p, int cc, bool arch_accelerated = true);

// The GEMM the kernel computes: `p`, or with SWAP_AB=1 its transpose C^T = B^T A^T (M and
// N exchanged: BM then tiles N and BN tiles M). Rules and the cost model read this one.
TuneProblem as_computed(const TuneProblem& p, const Knobs& k);

// What a knob set makes of one thread block. Knobs left unset take the values the
// passes would (docs/knobs.md); the space only builds candidates that set them all.
struct BlockShape {
  int64_t BM = 0, BN = 0, BK = 0;  // block tile and slab depth
  int64_t FM = 0, FN = 0;          // cells per thread (fma), atoms per warp (mma) or warpgroup
  int64_t WM = 0, WN = 0;          // warps (mma), warpgroups (wgmma); fma: 0 = no warp tier
  int64_t atom_n = 0;              // wgmma: N of each atom, BN / (WN x FN)
  int64_t consumer_warpgroups = 0;  // wgmma: WM x WN (the producer warpgroup comes on top)
  bool warp_specialized = false;    // wgmma: WARP_SPECIALIZE=1
  int64_t cluster_m = 1;            // wgmma: CLUSTER_M
  int64_t cluster_k = 1;            // wgmma: CLUSTER_K (CTAs of a cluster splitting K)
  bool a_regs = false;              // wgmma: WGMMA_A=regs
  std::string epilogue = "direct";  // EPILOGUE
  int64_t epi_buffers = 0;          // EPI_BUFFERS (EPILOGUE=tma_store)
  bool persistent = false;          // PERSISTENT=1
  int64_t threads = 0;
  int64_t stages = 1;
  std::string stage;  // direct | sync | cp_async | tma
  int64_t split_k = 1;
  int64_t pad = 0;  // PAD_SMEM
  std::string swizzle = "none";
  bool a_kouter = false;     // A's slab is [BK][BM] (SIMT: 16-byte fragment reads)
  int64_t accumulators = 0;  // accumulator registers per thread
};

BlockShape block_shape(const Knobs& k, const AtomChoice& a);

// Shared bytes of the mainloop's ring (both slabs, STAGES deep, padded rows), or of the
// staged epilogue tile when EPILOGUE=smem needs more: what t:050 and k:054 allocate, up
// to the 128-byte alignment of each piece; plus epilogue_smem_bytes.
int64_t mainloop_smem_bytes(const BlockShape& b, const TuneProblem& p, const Knobs& k);

// Shared bytes beside the ring: EPILOGUE=tma_store's output tile or strip buffers (k:053)
// and CLUSTER_K's f32 partial tile (k:057).
int64_t epilogue_smem_bytes(const BlockShape& b, const TuneProblem& p);

// A TMA-store strip is a 128-byte slice of each tile row (64 columns of a 16-bit output,
// 32 of f32), as k:053 cuts them; EPI_BUFFERS=N holds N strips (up to a tile's, or whole
// tiles' strips in a persistent tile loop: the ring across tiles).
constexpr int64_t kEpiStripBytes = 128;
// Columns of padding per row of CLUSTER_K's partial tile (k:057).
constexpr int64_t kClusterPartialPad = 8;

}  // namespace loom::tune
