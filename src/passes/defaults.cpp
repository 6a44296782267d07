#include "passes/defaults.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

#include "passes/families/family.h"
#include "passes/families/gemm_shape.h"

namespace loom {

// The shape-class defaults are the kernel families' (src/passes/families/): the SIMT
// family classifies the shape and gives the class's SIMT schedule, every tensor-core
// family its own schedule for the shape (DefaultChoice::mma, ::wgmma), and the first
// family in registry order that claims the class sets its ATOM. A family with a schedule
// for run-time sizes (wgmma's run-time M) takes the shape before the SIMT "symbolic"
// class does.

// Rows of an odd number of 16-bit elements (a ragged N, K, or M of an operand given
// transposed) start only 2-byte aligned: neither TMA nor cp.async addresses them, and the
// threads' copies moved them one 2-byte element at a time (16 loads and 16 stores per
// thread per 32-deep slab at 128x128, 205 registers; 0.62x cuBLAS at 4096x4095x4096 bf16
// on H100, 0.46x with A's rows odd, bench/NOTES.md, 2026-11-27, wgmma without TMA).
// REALIGN=1 moves them as aligned 16-byte chunks shifted into place (k:015, ir/realign.h):
// 2 loads and 1 store per 8 elements, 116 registers at 4096x4095x4096 (115 with A's rows
// odd; the mma.sync default at 1000x333x777 f16 128 -> 75), no spills. Measured on H100
// against cuBLAS (`loom run --bench`, bench/NOTES.md, 2026-11-27, ragged rows): 4096x4095x4096
// bf16 0.62x -> 1.63x, 4096x4096x4095 0.46x -> 1.70x, f16 1000x333x777 (mma.sync) 0.44x ->
// 1.29x. The rest of each schedule stays: BK=64 on the wgmma ring measured 1.28-1.30x (161
// registers, one CTA per SM, against BK=32's two), and the 64x64 wgmma ring at
// 1000x333x777 0.99x (mma.sync's 1.29x). Every schedule that copies through the threads
// takes it on sm_90 and newer: the wgmma ring, mma.sync's, SIMT's. Not on sm_80-sm_89: there ptxas spilled 4 B (8 B of stack) in mma.sync's
// unpipelined 3-stage ring with both operands realigned at 1000x777x333 f16 with a gelu
// epilogue (test_compile_kernels), which sm_90a compiles without spills; REALIGN=1 stays
// available there explicitly.
static void realign_odd_rows(DefaultChoice& c, const GemmShape& s, const Target& t) {
  if (!s.odd_rows || (s.in != DType::F16 && s.in != DType::BF16) || t.compute_capability() < 90)
    return;
  for (Knobs* k : {&c.knobs, &c.mma, &c.wgmma}) k->set("REALIGN", "1");
}

static DefaultChoice class_defaults(const Graph& g, const Target& t) {
  DefaultChoice c;
  const GemmShape s = gemm_shape_of(g);
  const KernelFamily* classifier = nullptr;
  bool decode = false;
  for (const auto& f : kernel_families()) {
    if (f.op != FamilyOp::gemm) continue;
    if (f.schedule && f.schedule_slot) c.*f.schedule_slot = f.schedule(s, t);
    if (f.classify) classifier = &f;
    if (s.known && f.decodes && f.decodes(s, t)) decode = true;
  }
  if (!s.known)
    for (const auto& f : kernel_families())
      if (f.op == FamilyOp::gemm && f.symbolic && f.symbolic(g, t, c)) return c;
  c.shape_class = classifier->classify(s, t, decode, c.knobs);
  for (const auto& f : kernel_families()) {
    std::string atom;
    if (f.op == FamilyOp::gemm && f.claims && f.claims(s, t, c.shape_class, atom)) {
      c.knobs.set("ATOM", atom);
      break;
    }
  }
  return c;
}

DefaultChoice default_knobs(const Graph& g, const Target& t,
                           const std::map<std::string, int64_t>& as_if) {
  if (!as_if.empty()) {
    DefaultChoice c = default_knobs(bound_as_if(g, as_if), t);
    for (const auto& [sym, v] : as_if) c.shape_class += " as if " + sym + " = " + std::to_string(v);
    return c;
  }
  DefaultChoice c = class_defaults(g, t);
  realign_odd_rows(c, gemm_shape_of(g), t);
  return c;
}

std::vector<SizeRange> runtime_size_ranges(const Graph& g, const Target& t) {
  for (const auto& f : kernel_families())
    if (f.size_ranges)
      if (auto ranges = f.size_ranges(g, t); !ranges.empty()) return ranges;
  return {};
}

bool is_group_leader(const std::string& knob) {
  // What the rest of a group was chosen for: the tile's shape, how slabs move, how many
  // ways K is split (SPLITK across launches' CTAs, CLUSTER_K within a cluster).
  static const std::vector<std::string> leaders = {"BM", "BN",      "FM",    "FN",
                                                   "WM", "WN",      "SWAP_AB", "STAGE",
                                                   "SPLITK", "CLUSTER_K"};
  return std::find(leaders.begin(), leaders.end(), knob) != leaders.end();
}

namespace {

// The tiling knobs whose explicit values mean SIMT thread cells (resolved_atom).
std::string simt_tiling_knobs(const Knobs& explicit_knobs) {
  std::string out;
  for (const char* k : {"BM", "BN", "FM", "FN", "WM", "WN", "MIN_BLOCKS"})
    if (explicit_knobs.has(k)) out += (out.empty() ? "" : ",") + std::string(k);
  return out;
}

}  // namespace

std::string resolved_atom(const Knobs& defaults, const Knobs& explicit_knobs) {
  if (explicit_knobs.has("ATOM")) return explicit_knobs.get_str("ATOM", "fma");
  return simt_tiling_knobs(explicit_knobs).empty() ? defaults.get_str("ATOM", "fma") : "fma";
}

std::string tiling_knobs_choosing_fma(const Knobs& defaults, const Knobs& explicit_knobs) {
  if (explicit_knobs.has("ATOM") || defaults.get_str("ATOM", "fma") == "fma") return "";
  return simt_tiling_knobs(explicit_knobs);
}

// A transport's organization (the wgmma family's: its producer warpgroup, cluster
// multicast and TMA-store epilogue ride on TMA slabs, families/wgmma.cpp) drops from the
// defaults when an explicit STAGE picks another transport (cp_async, sync) instead of
// failing on knobs the person never wrote (k:030 refuses WARP_SPECIALIZE=1 without TMA).
// What they set explicitly stays, and gets the pass's error.
static void drop_other_transports(Knobs& out, const Knobs& explicit_knobs) {
  if (!explicit_knobs.has("STAGE")) return;
  const std::string stage = explicit_knobs.get_str("STAGE", "");
  const std::string atom = out.get_str("ATOM", "fma");  // named: see operand_layout (atoms.h)
  const KernelFamily& family = gemm_family_of_atom(atom);
  for (const Transport& t : family.transports) {
    if (t.stage == stage) continue;
    Knobs kept;
    for (const auto& kv : out.values()) {
      // Named copies, not a structured binding: clang before 16 refuses a binding captured
      // by the lambda (the fuzz target's build).
      const std::string& name = kv.first;
      const auto& value = kv.second;
      const bool rides = std::any_of(t.knobs.begin(), t.knobs.end(), [&](const KnobUse& u) {
        return u.name == name && u.covers(value);
      });
      if (!rides || explicit_knobs.has(name)) kept.set(name, value);
    }
    out = kept;
  }
}

// The tf32 defaults read an operand that is not K-major through k:015's transposing stage
// (SLAB_A / SLAB_B = kinner under STAGE=tma, families/wgmma.cpp). An explicit knob that
// picks another way — the register forms (SWAP_AB=1, WGMMA_A=regs) or another transport
// (STAGE) — leaves the defaults' slab layouts behind with the form they were chosen for.
static void drop_default_transposes(Knobs& out, const Knobs& base, const Knobs& explicit_knobs) {
  const bool other_form = explicit_knobs.get_int("SWAP_AB", 0) == 1 ||
                          explicit_knobs.get_str("WGMMA_A", "smem") == "regs" ||
                          explicit_knobs.get_str("STAGE", "tma") != "tma";
  if (!other_form) return;
  Knobs kept;
  for (const auto& [name, value] : out.values())
    if ((name != "SLAB_A" && name != "SLAB_B") || explicit_knobs.has(name) || !base.has(name))
      kept.set(name, value);
  out = kept;
}

Knobs resolve_knobs(const Knobs& defaults, const Knobs& explicit_knobs,
                    const Knobs& mma_defaults, GroupMerge merge) {
  static const std::vector<std::vector<std::string>> groups = {
      // MIN_BLOCKS caps registers for the default tile: a bigger explicit tile under the
      // same cap spilled 3.5 KiB (128x256, bench/NOTES.md), so it goes with the tiling.
      // GROUP_M and EPILOGUE too: the defaults pick them for the default tile (the staged
      // epilogue's shared tile overlays that tile's slabs; GROUP_M=8 was measured with
      // it), and they leaked 4 B of spills into explicit ragged tiles on sm_80.
      // The Hopper organization knobs shape the block too (its warpgroups, its grid): an
      // explicit tile starts from none of them (the ladder's rung 1 inherited the default's
      // warp specialization and persistence before they joined the group).
      // SWAP_AB too: it changes what BM and BN tile (N and M), so an explicit tile keeps
      // the orientation it was written for.
      {"BM", "BN", "FM", "FN", "WM", "WN", "MIN_BLOCKS", "GROUP_M", "EPILOGUE", "WARP_SPECIALIZE",
       "PRODUCER_REGS", "CONSUMER_REGS", "PERSISTENT", "PERSISTENT_CTAS", "STREAM_K", "CLUSTER_M",
       "CLUSTER_N",
       "SWAP_AB",
       "CONSUMERS",
       // The epilogue operand's TMA load (k:056) is sized for the default tile's ring.
       "EPI_LOAD", "EPI_LOAD_BUFFERS"},
      {"STAGE", "BK", "STAGES", "PIPELINE", "PAD_SMEM", "PAD_KOUTER", "SWIZZLE", "SLAB_KOUTER"},
      {"SPLITK", "SPLITK_MODE", "CLUSTER_K"}};
  // The shape classes' schedules are SIMT schedules. An mma atom gets its own tile and
  // staging defaults, and split-K only where its schedule says (mma_defaults_for and
  // wgmma_defaults_for say why and what they measured); a knob of a group given
  // explicitly drops the rest of that group's defaults.
  Knobs out;
  // A default mma atom (16-bit operands) yields to an explicit tile (resolved_atom); a
  // split count means the same on both paths.
  const std::string atom = resolved_atom(defaults, explicit_knobs);
  const bool mma = atom != "fma";
  if (mma && !explicit_knobs.has("ATOM")) out.set("ATOM", atom);
  const Knobs& base = mma ? mma_defaults : defaults;
  for (const auto& [name, value] : base.values()) {
    if (name == "ATOM") continue;  // decided above
    bool touched = false;
    for (const auto& g : groups)
      if (std::find(g.begin(), g.end(), name) != g.end())
        for (const auto& k : g)
          touched |= explicit_knobs.has(k) && (merge == GroupMerge::drop || is_group_leader(k));
    if (!touched) out.set(name, value);
  }
  out.merge(explicit_knobs);
  // Split-K's atomic and fixup combines add partial sums into global memory, which the
  // staged epilogue (a copy of finished values) cannot do: a default EPILOGUE=smem yields.
  if (out.get_int("SPLITK", 1) > 1 && out.get_str("SPLITK_MODE", "reduce") != "reduce" &&
      out.get_str("EPILOGUE", "direct") == "smem" && !explicit_knobs.has("EPILOGUE"))
    out.set("EPILOGUE", "direct");
  drop_other_transports(out, explicit_knobs);
  drop_default_transposes(out, base, explicit_knobs);
  // A cluster spans the output tiles or K, not both: an explicit CLUSTER_M or CLUSTER_N
  // drops a default CLUSTER_K (the decode and split-K schedules' K clusters).
  if (!explicit_knobs.has("CLUSTER_K") && out.get_int("CLUSTER_K", 1) > 1 &&
      (explicit_knobs.get_int("CLUSTER_M", 1) > 1 || explicit_knobs.get_int("CLUSTER_N", 1) > 1))
    out.set("CLUSTER_K", "1");
  // The defaults gave a BN = 256 schedule's fourth stage to the epilogue operand's buffers
  // (wgmma.cpp, epilogue_operand_by_tma, which then sets EPI_LOAD_BUFFERS): explicit knobs
  // that drop the operand's load (EPI_LOAD=direct, an explicit tile) get the stage back,
  // and an explicit deeper ring drops the default load it leaves no room for.
  if (base.get_str("EPI_LOAD", "direct") == "tma" && base.has("EPI_LOAD_BUFFERS")) {
    if (explicit_knobs.has("STAGES")) {
      if (!explicit_knobs.has("EPI_LOAD") && explicit_knobs.get_int("STAGES", 3) > 3)
        out.set("EPI_LOAD", "direct");
    } else if (out.get_str("EPI_LOAD", "direct") != "tma" && out.get_int("STAGES", 4) == 3) {
      out.set("STAGES", "4");  // (EPI_LOAD_BUFFERS is read only with EPI_LOAD=tma)
    }
  }
  return out;
}

}  // namespace loom
