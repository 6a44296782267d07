// The mma.sync GEMM (ATOM=mma_f16, mma_bf16, mma_tf32; sm_80 and newer): warps of FM x FN
// m16n8k16 (tf32: m16n8k8) atoms fed by ldmatrix fragments from a cp.async ring.
#include "passes/families/family.h"
#include "passes/families/gemm_knobs.h"

namespace loom {
namespace {

// LDMATRIX and FRAG_BUFFERS (k:025's ldmatrix fragments, k:027's fragment double
// buffering) under wgmma, which reads its operands from shared memory by descriptor, or
// the SIMT schedule, which has no fragments.
std::string refuse_fragment_knobs(const RefusalContext& r) {
  const bool wgmma = r.atom.rfind("wgmma_", 0) == 0;
  return r.bad + (r.count == 1 ? " shapes" : " shape") + " the fragments of an mma.sync atom " +
         "(ATOM=mma_*), but the atom is " + r.atom + ", which " +
         (wgmma ? "reads its operands from shared memory by descriptor"
                : "multiplies scalars with no fragments") +
         "; drop " + r.bad + (wgmma ? "" : ", or add ATOM=" + atom_for_operands(r.graph, "mma"));
}

}  // namespace

KernelFamily mma_sync_family() {
  KernelFamily f;
  f.name = "mma_sync";
  f.summary = "mma.sync GEMM: warps of FM x FN m16n8k16 / m16n8k8 atoms, ldmatrix fragments "
              "(ATOM=mma_*), sm_80 and newer";
  f.op = FamilyOp::gemm;
  f.serves_atom = [](const std::string& atom) { return atom.rfind("mma_", 0) == 0; };
  f.reads = concat(gemm_common_knobs(),
                   {{"EPILOGUE", {"direct", "smem"}}, {"LDMATRIX"}, {"FRAG_BUFFERS"}});
  f.honours = {{"WARP_SPECIALIZE", {"0"}}, {"CONSUMER_REGS", {"0"}}, {"CLUSTER_M", {"1"}},
               {"CLUSTER_N", {"1"}}, {"CLUSTER_K", {"1"}}};
  f.refusal = refuse_fragment_knobs;
  return f;
}

}  // namespace loom
