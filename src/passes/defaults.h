// Default knobs by shape class: what Loom compiles when nobody chose (explicit knobs and,
// later, the tuning database take precedence). Each rule records the measurement that
// justifies it in bench/NOTES.md.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/knobs.h"
#include "passes/pass.h"

namespace loom {

struct DefaultChoice {
  Knobs knobs;              // the SIMT schedule of the shape's class
  Knobs mma;                // what an explicit ATOM=mma_* gets instead
  Knobs wgmma;              // what an explicit ATOM=wgmma_* gets instead (sm_90a)
  std::string shape_class;  // "large", "medium", "small", "split-k", "symbolic"
};

// The mma schedule for 16-bit operands with M and N multiples of 128: 2x2 warps of 4x8
// atoms, BK=64, 2-stage cp.async, SWIZZLE=xor, 16-byte copies, staged epilogue (0.53x
// cuBLAS at 4096^3 f16 on H100).
Knobs mma_defaults_aligned();

// `as_if`: run-time sizes to choose the defaults for as if they had these values (a size
// range's kernel, below); the program still compiles with them symbolic.
DefaultChoice default_knobs(const Graph& g, const Target& t,
                            const std::map<std::string, int64_t>& as_if = {});

// A range of a run-time size that compiles a kernel of its own: `symbol` in [lo, hi]
// takes the defaults a bound value `as_if` gets (0: the run-time default itself,
// class "symbolic"). Each launch runs the range its size falls in (driver/size_variants.h).
struct SizeRange {
  std::string symbol;
  int64_t lo = 1, hi = 1;
  int64_t as_if = 0;
};

// The ranges of the defaults for `g`'s run-time sizes, lowest first, covering 1..2^63-1;
// empty where one kernel serves every size (the ranges are for a 16-bit GEMM on sm_90a
// whose run-time size is M alone: families/wgmma.cpp, kRuntimeMRangeTops, has the rule;
// the first family with a size_ranges hook that returns ranges gives them).
std::vector<SizeRange> runtime_size_ranges(const Graph& g, const Target& t);

// The knobs to compile with: `explicit_knobs` over the defaults, group by group — a
// person who sets any tiling knob (BM BN FM FN WM WN MIN_BLOCKS) gets none of the
// default tiling, so an explicit BM=64 is never combined with a default FM it does not
// divide (nor a bigger tile with the default tile's register cap); likewise for the
// staging (STAGE BK STAGES PIPELINE PAD_SMEM PAD_KOUTER SWIZZLE SLAB_KOUTER) and split-K
// (SPLITK SPLITK_MODE) groups.
// With an explicit ATOM other than fma, `mma_defaults` replace `defaults` (SIMT
// schedules) the same way.
//
// GroupMerge::keep narrows that: an explicit knob drops its group's defaults only when
// it is one of the group's leaders — the tile's shape (BM BN FM FN WM WN SWAP_AB), how
// slabs move (STAGE), the split counts (SPLITK CLUSTER_K) — which the rest of the group
// was chosen for; any other knob replaces just itself (STAGES=3 on the wgmma default keeps
// STAGE=tma, BK and SWIZZLE). compile_graph tries keep first and falls back to drop
// when the kept defaults do not build with the explicit knob.
enum class GroupMerge { drop, keep };
Knobs resolve_knobs(const Knobs& defaults, const Knobs& explicit_knobs,
                    const Knobs& mma_defaults = mma_defaults_aligned(),
                    GroupMerge merge = GroupMerge::drop);

// Whether an explicit `knob` drops its group's defaults under GroupMerge::keep.
bool is_group_leader(const std::string& knob);

// The atom resolve_knobs compiles: an explicit ATOM; else fma where any explicit SIMT
// tiling knob (BM BN FM FN WM WN MIN_BLOCKS) is given, since FM and FN count thread cells
// under fma and atoms under mma, so knobs written for the SIMT schedule keep their
// meaning; else the defaults' ATOM.
std::string resolved_atom(const Knobs& defaults, const Knobs& explicit_knobs);

// The explicit SIMT tiling knobs that made resolved_atom pick fma over the defaults'
// mma or wgmma atom ("BN,FM"), or "" when they did not (an explicit ATOM, or no tiling
// knob, or an fma default).
std::string tiling_knobs_choosing_fma(const Knobs& defaults, const Knobs& explicit_knobs);

}  // namespace loom
