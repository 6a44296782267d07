// The wgmma GEMM (ATOM=wgmma_f16, wgmma_bf16, wgmma_tf32; sm_90a): warpgroups of m64nNk16
// (tf32: k8) atoms reading shared slabs by descriptor, fed by TMA (a producer warpgroup,
// multicast clusters, the TMA-store epilogue) or by the threads' copies (ragged rows,
// transposed tf32 operands).
#include "passes/families/family.h"
#include "passes/families/gemm_knobs.h"
#include "passes/defaults.h"

namespace loom {
namespace {

// The knobs only wgmma kernels honour, each with the values every atom honours (the
// feature off). They shape the sm_90a organization around wgmma — the producer warpgroup
// and its register split (k:030), ping-pong consumers, TMA multicast and K clusters,
// wgmma's A operand and zeroing (k:026), the TMA-store epilogue (k:053) — and under fma or
// mma.sync some passes never read them (CONSUMERS=pingpong,BN=128,FM=2 ran the SIMT kernel
// as if it were not there) while others refused them without saying what chose the atom.
// The message names the knobs, the atom, what chose it (an explicit ATOM, explicit SIMT
// tiling knobs re-selecting fma over the base's atom, or the base's own atom) and the fix.
std::string refuse_organization_knobs(const RefusalContext& r) {
  const std::string base_atom = r.base.get_str("ATOM", "fma");
  const std::string whose = r.tuned ? "the tuning record's" : "the default";
  std::string why;
  if (r.explicit_knobs.has("ATOM")) {
    why = "the explicit ATOM=" + r.atom;
  } else if (const std::string tiling = tiling_knobs_choosing_fma(r.base, r.explicit_knobs);
             !tiling.empty()) {
    const bool one = tiling.find(',') == std::string::npos;
    why = "the explicit tiling knob" + std::string(one ? " " : "s ") + tiling + ", which without ATOM " +
          (one ? "selects" : "select") + " the SIMT schedule instead of " + whose + " ATOM=" + base_atom;
  } else {
    why = (r.tuned ? "the tuning record" : "the default schedule of this shape on " + r.target.arch);
  }
  const std::string wgmma =
      base_atom.rfind("wgmma_", 0) == 0 ? base_atom : atom_for_operands(r.graph, "wgmma");
  // f32 operands have no exact wgmma: say what the suggested tf32 atom changes.
  const std::string tf32 = wgmma == "wgmma_tf32" && base_atom != wgmma
                               ? "; its products round the operands to tf32" : "";
  std::string fix;
  if (r.target.arch != "sm_90a")
    fix = "drop " + r.bad + ": wgmma needs sm_90a (the target is " + r.target.arch + ")";
  else if (r.explicit_knobs.has("ATOM"))
    fix = "use ATOM=" + wgmma + " instead" + (tf32.empty() ? "" : " (" + tf32.substr(2) + ")") +
          ", or drop " + r.bad;
  else
    fix = "add ATOM=" + wgmma + " (FM and FN then count wgmma atoms per warpgroup" + tf32 +
          "), or drop " + r.bad;
  return r.bad + (r.count == 1 ? " needs" : " need") + " a wgmma atom (ATOM=wgmma_*), but the atom is " +
         r.atom + ", chosen by " + why + "; " + fix;
}

}  // namespace

KernelFamily wgmma_family() {
  KernelFamily f;
  f.name = "wgmma";
  f.summary = "wgmma GEMM: warpgroups of m64nNk16 / k8 atoms on descriptor-read slabs, fed by "
              "TMA (producer warpgroup, clusters, TMA-store epilogue) or the threads' copies "
              "(ATOM=wgmma_*), sm_90a";
  f.op = FamilyOp::gemm;
  f.serves_atom = [](const std::string& atom) { return atom.rfind("wgmma_", 0) == 0; };
  f.reads = concat({{"WARP_SPECIALIZE"}, {"PRODUCER_REGS"}, {"CONSUMER_REGS"}, {"CONSUMERS"},
                    {"CLUSTER_M"},       {"CLUSTER_N"},     {"CLUSTER_K"},     {"WGMMA_A"},
                    {"WGMMA_ZERO"},      {"EPILOGUE"},      {"EPI_BUFFERS"},   {"STMATRIX"},
                    {"EPI_SYNC"}},
                   gemm_common_knobs());
  f.honours = {{"LDMATRIX", {"0"}}, {"FRAG_BUFFERS", {"1"}}};
  f.refusal = refuse_organization_knobs;
  // EPI_BUFFERS, STMATRIX and EPI_SYNC shape only the TMA-store epilogue (k:053).
  f.variants = {{"EPILOGUE", "tma_store", "the TMA-store epilogue", "k:053",
                 {"EPI_BUFFERS", "STMATRIX", "EPI_SYNC"}}};
  return f;
}

}  // namespace loom
