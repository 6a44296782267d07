// The SIMT GEMM (ATOM=fma): thread cells of FM x FN outputs accumulating with FFMA, the
// shape classes' own schedules (large, medium, small, split-k, symbolic: defaults.cpp).
#include "passes/families/family.h"

#include "ir/error.h"
#include "passes/families/gemm_knobs.h"
#include "passes/families/gemm_shape.h"

namespace loom {

// The shape classes and their SIMT schedules. c.knobs keeps the class's SIMT schedule
// for a person who sets ATOM=fma or a SIMT tile; a tensor-core family that claims the
// class sets its ATOM (defaults.cpp) and keeps its own schedule (DefaultChoice::mma,
// DefaultChoice::wgmma).
static std::string simt_classify(const GemmShape& s, const Target& t, bool decode, Knobs& k) {
  if (!s.known) {
    // Symbolic sizes: a medium tile with guards; passes fill in the rest.
    k = Knobs::parse("BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=sync,STAGES=2");
    return "symbolic";
  }
  int64_t tiles128 = s.batch * ((s.M + 127) / 128) * ((s.N + 127) / 128);
  // Decode (a GEMM family runs the shape as decode: mma_sync.cpp, wgmma.cpp): the SIMT
  // medium tile; the default atom is a tensor-core family's.
  if (decode) {
    k = Knobs::parse("BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=sync,STAGES=2");
    return "decode";
  }
  if (s.M * s.N <= 256 * 256 && s.K >= 4096) {
    // Few output tiles, long reduction: split K so every SM gets work. 64x64 tiles of
    // 8x4-cell threads (128 per block), S doubling while the grid stays within about four
    // blocks per SM and each split keeps at least 128 of K. 128x128x16384 f32 on H200:
    // S=128 22.1 us (PAD_SMEM=4 takes the 2-way conflict off the transposed A stores),
    // S=64 25 us, S=256 28 us (the atomic combine doubles with S); cuBLAS 25.7 us —
    // bench/NOTES.md. sm_90's vector reductions make the atomic combine cheap.
    int64_t tiles = s.batch * ((s.M + 63) / 64) * ((s.N + 63) / 64);
    int64_t S = 1;
    while (S < 256 && tiles * S * 2 <= 4 * t.sm_count && s.K / (S * 2) >= 128) S *= 2;
    std::string mode = (!s.epilogue && s.out == DType::F32) ? "atomic" : "reduce";
    k = Knobs::parse("BM=64,BN=64,FM=8,FN=4,BK=16,STAGE=sync,STAGES=2,PAD_SMEM=4,SPLITK=" +
                     std::to_string(S) + ",SPLITK_MODE=" + mode);
    return "split-k";  // on sm_90a a 16-bit one takes wgmma with split-K (wgmma.cpp)
  }
  if (tiles128 >= t.sm_count) {
    // Large: 128x128 blocks of 8x8-cell threads, BK=16 slabs, register double
    // buffering, two blocks per SM (0.88x cuBLAS SGEMM at 4096^3 on H200; 128x256 tiles
    // measured 0.89-0.92x but need 255 registers, which a fused epilogue would spill —
    // bench/NOTES.md).
    // Narrow inputs convert every element on load: more registers, and under the 128-
    // register cap of two blocks per SM ptxas spills (28 B at 1000x3000x777 f16).
    // PAD_SMEM=4 makes the transposed A stores conflict-free and keeps 16-byte rows;
    // GROUP_M=8 walks tiles in 8-row groups for L2 reuse (0.90x at 4096^3 together).
    k = Knobs::parse(std::string("BM=128,BN=128,FM=8,FN=8,BK=16,STAGE=sync,STAGES=2,") +
                     "PAD_SMEM=4,GROUP_M=8" + (s.in == DType::F32 ? ",MIN_BLOCKS=2" : ""));
    // f32 grids with a full wave of 256x128 tiles take them (512 threads of the same 8x8
    // cells, one block per SM, fragment loads interleaved with the FFMAs): `loom tune` on
    // H100 picked it at 4096^3 (2819 us vs 2950 us, 0.94x cuBLAS) and at 3000x1234x5000
    // (bench/NOTES.md, 2026-11-22, the tuner). Both tilings fill the SM's 264 or 132 slots in the same
    // number of waves, and the taller tile reuses each B element twice as often.
    const int64_t tiles256 = s.batch * ((s.M + 255) / 256) * ((s.N + 127) / 128);
    if (s.in == DType::F32 && tiles256 >= t.sm_count)
      k = Knobs::parse("BM=256,BN=128,FM=8,FN=8,BK=16,STAGE=sync,STAGES=2,PAD_SMEM=4,"
                       "GROUP_M=8,INTERLEAVE_LOADS=1");
    return "large";
  }
  if (s.M >= 32 && s.N >= 32) {
    k = Knobs::parse("BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=sync,STAGES=2");
    return "medium";
  }
  return "small";  // partition's own defaults shrink the tile to the shape
}


// ATOM=fma: no atom table entry (the SIMT path's FMA cells); ACC must be f32.
static const AtomDef* simt_atom_def(CompileState& s, const std::string&) {
  const std::string acc = s.knobs.get_str("ACC", "f32");
  if (acc != "f32")
    throw Error("ACC=" + acc + " with ATOM=fma: the SIMT path accumulates in f32 (fma.rn.f32); "
                "an f16 accumulator is the tensor-core atom m16n8k16 .f16.f16.f16.f16 — set "
                "ATOM=mma_f16 (f16 inputs) or ACC=f32");
  return nullptr;
}

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
               {"FRAG_BUFFERS", {"1"}},    {"EPI_LOAD", {"direct"}},  {"GEMM_FORM", {"default"}}};
  f.classify = simt_classify;
  f.atom_def = simt_atom_def;
  return f;
}

}  // namespace loom
