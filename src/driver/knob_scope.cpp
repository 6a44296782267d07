#include "driver/knob_scope.h"

#include <algorithm>
#include <vector>

#include "driver/compile.h"
#include "ir/error.h"
#include "passes/defaults.h"

namespace loom {

namespace {

// A knob some kernels never read, with the values every kernel honours (the feature off;
// none listed: any explicit value is refused where the knob is not read).
struct ScopedKnob {
  const char* name;
  std::vector<std::string> off;
};

// The explicit knobs of `list` set to a value outside their `off` values, comma-joined;
// `count` gets how many.
std::string explicit_on(const Knobs& knobs, const std::vector<ScopedKnob>& list, int& count) {
  std::string bad;
  count = 0;
  for (const auto& k : list) {
    if (!knobs.has(k.name)) continue;
    const std::string v = knobs.get_str(k.name, "");
    if (std::find(k.off.begin(), k.off.end(), v) != k.off.end()) continue;
    bad += (bad.empty() ? "" : ",") + std::string(k.name) + "=" + v;
    ++count;
  }
  return bad;
}

bool has_op(const Graph& g, OpKind kind) {
  for (const auto& n : g.nodes)
    if (n.kind == kind) return true;
  return false;
}

// Knobs only wgmma kernels honour, each with the values every atom honours (the feature
// off; none listed: no value means anything without wgmma). They shape the sm_90a
// organization around wgmma — the producer warpgroup and its register split (k:030),
// ping-pong consumers, TMA multicast and K clusters, wgmma's A operand and zeroing
// (k:026), the TMA-store epilogue (k:053) — and under fma or mma.sync some passes never
// read them (CONSUMERS=pingpong,BN=128,FM=2 ran the SIMT kernel as if it were not there)
// while others refused them without saying what chose the atom.
const std::vector<ScopedKnob>& wgmma_only_knobs() {
  static const std::vector<ScopedKnob> knobs = {
      {"WARP_SPECIALIZE", {"0"}}, {"PRODUCER_REGS", {}},         {"CONSUMER_REGS", {"0"}},
      {"CONSUMERS", {}},          {"CLUSTER_M", {"1"}},          {"CLUSTER_N", {"1"}},
      {"CLUSTER_K", {"1"}},       {"WGMMA_A", {}},               {"WGMMA_ZERO", {}},
      {"EPILOGUE", {"direct", "smem"}}, {"EPI_BUFFERS", {}},     {"STMATRIX", {}},
      {"EPI_SYNC", {}}};
  return knobs;
}

// The atom of `family` ("wgmma" or "mma") for the contraction's operands (f32 operands
// take tf32), for the fixes in the messages below.
std::string atom_for(const Graph& g, const std::string& family) {
  for (const auto& n : g.nodes)
    if (n.kind == OpKind::Matmul) {
      const DType in = g.node(n.inputs[0]).dtype;
      return family + (in == DType::F16 ? "_f16" : in == DType::BF16 ? "_bf16" : "_tf32");
    }
  return family + "_*";
}

// Refuses explicit wgmma-only knobs (above) when the atom that will run is not wgmma:
// names the knobs, the atom, what chose it (an explicit ATOM, explicit SIMT tiling knobs
// re-selecting fma over the base's atom, or the base's own atom) and the fix. Only
// explicit knobs are checked: the defaults and a tuning record never set these for
// another atom, and a record's neutral values (WARP_SPECIALIZE=0, ...) are all honoured.
void refuse_wgmma_only_knobs(const Graph& g, const CompileOptions& opt, const Knobs& base,
                             bool tuned, const std::string& atom) {
  if (atom.rfind("wgmma_", 0) == 0) return;
  if (!has_op(g, OpKind::Matmul)) return;
  int count = 0;
  const std::string bad = explicit_on(opt.knobs, wgmma_only_knobs(), count);
  if (bad.empty()) return;
  const std::string base_atom = base.get_str("ATOM", "fma");
  const std::string whose = tuned ? "the tuning record's" : "the default";
  std::string why;
  if (opt.knobs.has("ATOM")) {
    why = "the explicit ATOM=" + atom;
  } else if (const std::string tiling = tiling_knobs_choosing_fma(base, opt.knobs); !tiling.empty()) {
    const bool one = tiling.find(',') == std::string::npos;
    why = "the explicit tiling knob" + std::string(one ? " " : "s ") + tiling + ", which without ATOM " +
          (one ? "selects" : "select") + " the SIMT schedule instead of " + whose + " ATOM=" + base_atom;
  } else {
    why = (tuned ? "the tuning record" : "the default schedule of this shape on " + opt.target.arch);
  }
  const std::string wgmma = base_atom.rfind("wgmma_", 0) == 0 ? base_atom : atom_for(g, "wgmma");
  // f32 operands have no exact wgmma: say what the suggested tf32 atom changes.
  const std::string tf32 = wgmma == "wgmma_tf32" && base_atom != wgmma
                               ? "; its products round the operands to tf32" : "";
  std::string fix;
  if (opt.target.arch != "sm_90a")
    fix = "drop " + bad + ": wgmma needs sm_90a (the target is " + opt.target.arch + ")";
  else if (opt.knobs.has("ATOM"))
    fix = "use ATOM=" + wgmma + " instead" + (tf32.empty() ? "" : " (" + tf32.substr(2) + ")") +
          ", or drop " + bad;
  else
    fix = "add ATOM=" + wgmma + " (FM and FN then count wgmma atoms per warpgroup" + tf32 +
          "), or drop " + bad;
  throw Error(bad + (count == 1 ? " needs" : " need") + " a wgmma atom (ATOM=wgmma_*), but the atom is " +
              atom + ", chosen by " + why + "; " + fix);
}


// Knobs only mma.sync GEMM kernels read (k:025's ldmatrix fragments, k:027's fragment
// double buffering): wgmma reads its operands from shared memory by descriptor, and the
// SIMT schedule has no fragments. Attention's mma.sync kernel reads FRAG_BUFFERS too,
// so only programs without attention are checked.
void refuse_mma_only_knobs(const Graph& g, const CompileOptions& opt, const std::string& atom) {
  if (atom.rfind("mma_", 0) == 0 || !has_op(g, OpKind::Matmul) || has_op(g, OpKind::Attention))
    return;
  static const std::vector<ScopedKnob> knobs = {{"LDMATRIX", {"0"}}, {"FRAG_BUFFERS", {"1"}}};
  int count = 0;
  const std::string bad = explicit_on(opt.knobs, knobs, count);
  if (bad.empty()) return;
  const bool wgmma = atom.rfind("wgmma_", 0) == 0;
  throw Error(bad + (count == 1 ? " shapes" : " shape") + " the fragments of an mma.sync atom " +
              "(ATOM=mma_*), but the atom is " + atom + ", which " +
              (wgmma ? "reads its operands from shared memory by descriptor"
                     : "multiplies scalars with no fragments") +
              "; drop " + bad + (wgmma ? "" : ", or add ATOM=" + atom_for(g, "mma")));
}

// The knobs that only one family of kernels reads. Shared by both (not listed): SWIZZLE,
// INTERLEAVE_LOADS, FRAG_BUFFERS (attention's mma.sync kernel reads them), MIN_BLOCKS,
// UNROLL_K, VECTORIZE, DEPENDENT_LAUNCH (generic kernel passes).
const std::vector<ScopedKnob>& gemm_only_knobs() {
  static const std::vector<ScopedKnob> knobs = {
      {"BM", {}},          {"BN", {}},           {"FM", {}},          {"FN", {}},
      {"WM", {}},          {"WN", {}},           {"BK", {}},          {"ATOM", {}},
      {"ACC", {}},         {"WGMMA_A", {}},      {"WGMMA_ZERO", {}},  {"SWAP_AB", {"0"}},
      {"SPLITK", {"1"}},   {"SPLITK_MODE", {}},  {"GROUP_M", {}},     {"STAGE", {}},
      {"SLAB_KOUTER", {}}, {"SLAB_A", {}},       {"SLAB_B", {}},      {"STAGES", {}},
      {"PIPELINE", {}},    {"PAD_SMEM", {"0"}},  {"PAD_KOUTER", {"0"}}, {"LDMATRIX", {}},
      {"EPILOGUE", {}},    {"EPI_BUFFERS", {}},  {"STMATRIX", {}},    {"EPI_SYNC", {}},
      {"WARP_SPECIALIZE", {"0"}}, {"PRODUCER_REGS", {}}, {"CONSUMER_REGS", {}},
      {"CONSUMERS", {}},   {"CLUSTER_M", {"1"}}, {"CLUSTER_N", {"1"}}, {"CLUSTER_K", {"1"}},
      {"PERSISTENT", {"0"}}, {"PERSISTENT_CTAS", {}}, {"STREAM_K", {"0"}}};
  return knobs;
}
const std::vector<ScopedKnob>& attention_only_knobs() {
  static const std::vector<ScopedKnob> knobs = {
      {"BLOCK_M", {}},   {"BLOCK_N", {}},   {"WARPS", {}},       {"KV_STAGES", {}},
      {"Q_IN_REGS", {}}, {"SOFTMAX", {}},   {"ZERO_INIT", {}},   {"STAGE_OUTPUT", {}},
      {"ATTN_MMA", {}},  {"ATTN_WG", {}},   {"ATTN_PRODUCER", {}}, {"ATTN_OVERLAP", {}},
      {"ATTN_PINGPONG", {}}, {"ATTN_PACK_P", {}}, {"SPLIT_KV", {}},  {"GQA_PACK", {}},
      {"COMBINE_GROUPS", {}}};
  return knobs;
}

// GEMM knobs on a program with attention and no contraction, and attention knobs on one
// with a contraction and no attention: no pass of the program reads them.
void refuse_knobs_of_absent_ops(const Graph& g, const CompileOptions& opt) {
  const bool gemm = has_op(g, OpKind::Matmul), attention = has_op(g, OpKind::Attention);
  if (gemm == attention) return;  // neither (elementwise only) or both: every knob may apply
  int count = 0;
  const std::string bad =
      explicit_on(opt.knobs, attention ? gemm_only_knobs() : attention_only_knobs(), count);
  if (bad.empty()) return;
  const char* verb = count == 1 ? " is a knob" : " are knobs";
  if (attention)
    throw Error(bad + verb + " of GEMM kernels, and this program is attention, whose kernel "
                "is shaped by BLOCK_M, BLOCK_N, WARPS, KV_STAGES, ATTN_MMA, ATTN_WG, "
                "ATTN_PRODUCER, ... (`loom knobs` lists them); drop " + bad);
  throw Error(bad + verb + " of the attention kernel, and this program is a GEMM, whose "
              "kernels are shaped by BM, BN, BK, FM, FN, STAGES, ATOM, ... (`loom knobs` "
              "lists them); drop " + bad);
}

}  // namespace

void refuse_inapplicable_knobs(const Graph& g, const CompileOptions& opt, const Knobs& base,
                               bool tuned, const std::string& atom) {
  refuse_knobs_of_absent_ops(g, opt);
  refuse_wgmma_only_knobs(g, opt, base, tuned, atom);
  refuse_mma_only_knobs(g, opt, atom);
}

void refuse_knobs_of_other_epilogues(const CompileOptions& opt, const CompileState& s) {
  const auto it = s.used_knobs.find("EPILOGUE");
  if (it == s.used_knobs.end() || it->second == "tma_store") return;
  static const std::vector<ScopedKnob> knobs = {{"EPI_BUFFERS", {}}, {"STMATRIX", {}}, {"EPI_SYNC", {}}};
  int count = 0;
  const std::string bad = explicit_on(opt.knobs, knobs, count);
  if (bad.empty()) return;
  const bool chosen = opt.knobs.has("EPILOGUE");
  throw Error(bad + (count == 1 ? " shapes" : " shape") + " the TMA-store epilogue " +
              "(EPILOGUE=tma_store, k:053), but the epilogue is " + it->second + ", chosen by " +
              (chosen ? "the explicit EPILOGUE=" + it->second : std::string("the defaults of this shape")) +
              "; " + (chosen ? "use" : "add") + " EPILOGUE=tma_store, or drop " + bad);
}

}  // namespace loom
