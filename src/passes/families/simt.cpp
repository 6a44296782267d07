// The SIMT GEMM (ATOM=fma): thread cells of FM x FN outputs accumulating with FFMA, the
// shape classes' own schedules (large, medium, small, split-k, symbolic: defaults.cpp).
#include "passes/families/family.h"
#include "passes/families/gemm_knobs.h"

namespace loom {

KernelFamily simt_family() {
  KernelFamily f;
  f.name = "simt";
  f.summary = "SIMT GEMM: FM x FN cells per thread on FFMA (ATOM=fma), every target";
  f.op = FamilyOp::gemm;
  f.serves_atom = [](const std::string& atom) {
    return atom.rfind("mma_", 0) != 0 && atom.rfind("wgmma_", 0) != 0;
  };
  f.reads = concat(gemm_common_knobs(), {{"EPILOGUE", {"direct", "smem"}}});
  f.honours = {{"WARP_SPECIALIZE", {"0"}}, {"CONSUMER_REGS", {"0"}}, {"CLUSTER_M", {"1"}},
               {"CLUSTER_N", {"1"}},       {"CLUSTER_K", {"1"}},     {"LDMATRIX", {"0"}},
               {"FRAG_BUFFERS", {"1"}}};
  return f;
}

}  // namespace loom
