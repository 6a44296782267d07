// The mma.sync GEMM (ATOM=mma_f16, mma_bf16, mma_tf32; sm_80 and newer): warps of FM x FN
// m16n8k16 (tf32: m16n8k8) atoms fed by ldmatrix fragments from a cp.async ring.
#include "passes/families/family.h"

#include "ir/error.h"
#include "passes/defaults.h"
#include "passes/families/gemm_knobs.h"
#include "passes/families/gemm_shape.h"

namespace loom {

Knobs mma_defaults_aligned() {
  return Knobs::parse(
      "WM=2,WN=2,FM=4,FN=8,BK=64,STAGE=cp_async,STAGES=2,SWIZZLE=xor,VECTORIZE=8,EPILOGUE=smem,"
      "GROUP_M=8");
}

// Decode-like 16-bit shapes (M <= 64 rows against a weight of 1024x1024 or more): 64x32 blocks of 1x2 warps,
// 4x2 atoms each, a 3-deep BK=64 ring. `loom tune` on H100 picked it for both 16x4096x4096
// and 64x4096x4096 bf16 (35.6 us, 1.87x the 128x64 ragged default at M=64; the SIMT
// split-K schedule of the split-K class is slower still): many small blocks stream the
// weight, which is all the time there is at M <= 64 (bench/NOTES.md, 2026-11-22, the tuner).
static bool decode_shape(int64_t M, int64_t N, int64_t K) {
  return M <= 64 && N >= 1024 && K >= 1024 && N % 32 == 0 && K % 64 == 0;
}
static Knobs mma_defaults_decode() {
  return Knobs::parse(
      "WM=1,WN=2,FM=4,FN=2,BK=64,STAGE=cp_async,STAGES=3,SWIZZLE=xor,VECTORIZE=8,EPILOGUE=smem,"
      "GROUP_M=8");
}

// The mma schedule for the shape: 4x8 atoms per warp need every register (234 at
// 4096^3 f16); the bounds guards of a ragged M or N push them to 255 and spill (192 B at
// 1000x777x333 f16), so such shapes get 4x4 atoms per warp (128x64 blocks), and tf32,
// whose fragments are element-wise floats, 2x4 (24 B of spills at 4x4).
// Aligned 16-bit operands: BK=64 slabs (128-byte A rows, half the L2 requests of 64-byte
// ones) with the row-derived XOR swizzle (conflict-free cp.async writes and ldmatrix
// reads; the pad left the A writes 2-way) in a 2-deep ring (2 blocks of 64 KiB per SM),
// and the staged epilogue (16-byte row stores). 4096^3 f16 on H100: 0.39x cuBLAS with
// BK=32 / pad 8 / 3 stages, 0.50x with SWIZZLE=xor and BK=64 at 3 stages, 0.51x at 2,
// 0.53x with EPILOGUE=smem (bench/NOTES.md). Ragged shapes keep the padded BK=32 ring:
// the swizzled addresses on top of the guards spill there (48-732 B at 1000x777x333).
// tf32 pads by operand layout instead of 8 everywhere: a warp reads 32-bit fragment
// elements (g, t) = (lane/4, lane%4), and a row stride S words puts them in banks
// (S*g + t) % 32 for a K-contiguous slab (A [BM][BK]: element-wise or ldmatrix rows) and
// (S*t + g) % 32 for an N-contiguous one (B [BK][BN]). 32 distinct banks need S = 4 mod 8
// for the first (PAD_SMEM=4 at BK=32: S=36) and S = 8 mod 16 for the second
// (PAD_KOUTER=8 at BN=128 or 64: S=136, 72); one pad of 8 leaves A 2-way, 4 leaves B
// 2-way. Both keep 16-byte rows for cp.async and ldmatrix. On aligned shapes A's slab
// takes the row-derived swizzle instead of its pad (128-byte rows at BK=32, conflict-free
// ldmatrix rows without the pad's 2-way cp.async writes) and the epilogue is staged:
// 4096^3 on H100 0.40x -> 0.43x cuBLAS TF32 (bench/NOTES.md).
static Knobs mma_defaults_for(const GemmShape& s, int sm_count) {
  const bool tf32 = s.in == DType::F32 || s.in == DType::TF32;
  if (s.known && !s.f32_operands && decode_shape(s.M, s.N, s.K)) return mma_defaults_decode();
  const bool aligned = s.known && s.M % 128 == 0 && s.N % 128 == 0;
  // Aligned grids of fewer 128x128 tiles than SMs take 64x128 blocks of 2x4 warps, 2x4
  // atoms each: twice the blocks. `loom tune` picked it at 1024^3 bf16 on H100 and H200
  // (16.1-16.2 us against 17.5-18.0 us for the 128x128 tile; bench/NOTES.md, 2026-11-22, the tuner).
  if (aligned && !s.f32_operands && s.batch * (s.M / 128) * (s.N / 128) < sm_count)
    // No GROUP_M: the grid is one wave, so the walk order hardly matters for L2 (H200's
    // winner had GROUP_M=1, H100's 8, within noise), and with ACC=f16 and an f32 output
    // the grouping's index math tipped ptxas into a 4 B spill.
    return Knobs::parse("WM=2,WN=4,FM=2,FN=4,BK=64,STAGE=cp_async,STAGES=2,SWIZZLE=xor,VECTORIZE=8,"
                        "EPILOGUE=smem");
  if (aligned && !s.f32_operands) return mma_defaults_aligned();
  if (aligned)
    return Knobs::parse("WM=2,WN=2,FM=4,FN=8,BK=32,STAGE=cp_async,STAGES=3,SWIZZLE=xor,"
                        "PAD_KOUTER=8,VECTORIZE=8,EPILOGUE=smem");
  // Ragged 16-bit shapes whose 128x64 tiles would not fill the SMs twice: 64x64 blocks of
  // 2x4 warps with 2x2 atoms each, BK=64, a staged epilogue. `loom tune` on H100 picked it
  // at 1000x333x777 f16: 97.8 us against 335.7 us for the 128x64 tile below (48 blocks
  // for 132 SMs; bench/NOTES.md, 2026-11-22, the tuner).
  if (s.known && !s.f32_operands &&
      s.batch * ((s.M + 127) / 128) * ((s.N + 63) / 64) < 2 * sm_count)
    return Knobs::parse("WM=2,WN=4,FM=2,FN=2,BK=64,STAGE=cp_async,STAGES=3,PAD_SMEM=8,VECTORIZE=8,"
                        "EPILOGUE=smem,GROUP_M=8");
  const std::string padded = ",BK=32,STAGE=cp_async,STAGES=3,PAD_SMEM=8,VECTORIZE=8";
  Knobs k = aligned ? Knobs::parse("WM=2,WN=2,FM=4,FN=8" + padded)
                    : Knobs::parse(std::string("WM=2,WN=2,") + (tf32 ? "FM=2,FN=4" : "FM=4,FN=4") +
                                   padded);
  if (s.f32_operands) k.merge(Knobs::parse("PAD_SMEM=4,PAD_KOUTER=8"));
  return k;
}

static Knobs mma_schedule(const GemmShape& s, const Target& t) { return mma_defaults_for(s, t.sm_count); }

// The default atom of the decode class and of the large and medium classes where wgmma
// did not claim them: 16-bit operands on sm_80+ get the tensor cores (at 4096^3 f16 on
// H100 the mma schedule runs 0.53x cuBLAS where the SIMT one, which converts every element
// to f32 and issues FFMA, cannot pass the fp32 FMA rate, a sixth of the mma.sync rate);
// `:tf32` operands (never plain f32, which stays exact on FFMA) mma.sync tf32 (FFMA
// measured 0.06x cuBLAS TF32 at 4096^3 on H100, mma.sync tf32 0.43x; bench/NOTES.md).
// Split-K and small shapes keep their SIMT schedules.
static bool mma_claims(const GemmShape& s, const Target& t, const std::string& shape_class,
                       std::string& atom) {
  if (shape_class != "decode" && shape_class != "large" && shape_class != "medium") return false;
  if (tensor_core_operands(s, t)) {
    atom = atom_16bit(s, "mma");
    return true;
  }
  if (shape_class != "decode" && s.in == DType::TF32 && t.compute_capability() >= 80) {
    atom = "mma_tf32";
    return true;
  }
  return false;
}

static bool mma_decodes(const GemmShape& s, const Target& t) {
  return tensor_core_operands(s, t) && decode_shape(s.M, s.N, s.K);
}

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

// The warp-collective compute atom of the table multiplying `in` operands into an `acc`
// accumulator; nullptr when the table has none.
static const AtomDef* mma_atom(DType in, DType acc) {
  for (const AtomDef& a : atom_table())
    if (a.kind == AtomKind::Compute && a.threads == WarpAtom::kLanes && a.a_type == in &&
        a.acc_type == acc)
      return &a;
  return nullptr;
}

// ATOM=mma_f16 | mma_bf16 | mma_tf32: the mma.sync entry by operand type and ACC.
static const AtomDef* mma_atom_def(CompileState& s, const std::string& v) {
  const std::string acc = s.knobs.get_str("ACC", "f32");
  const DType in = v == "mma_f16" ? DType::F16 : v == "mma_bf16" ? DType::BF16 : DType::TF32;
  const DType acc_type = acc == "f16" ? DType::F16 : DType::F32;
  const AtomDef* a = mma_atom(in, acc_type);
  if (!a)
    throw Error("ACC=" + acc + " with ATOM=" + v + ": PTX's " + dtype_name(in) + " mma.sync (" +
                mma_atom(in, DType::F32)->ptx + ") accumulates in f32 only; f16 accumulation "
                "exists for f16 operands (m16n8k16 .f16.f16.f16.f16) — use ACC=f32, or "
                "ATOM=mma_f16 on f16 inputs");
  s.used_knobs["ACC"] = acc;
  return a;
}

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
               {"CLUSTER_N", {"1"}}, {"CLUSTER_K", {"1"}}, {"EPI_LOAD", {"direct"}},
               {"GEMM_FORM", {"default"}}};
  f.schedule_slot = &DefaultChoice::mma;
  f.schedule = mma_schedule;
  f.claims = mma_claims;
  f.decodes = mma_decodes;
  f.atom_def = mma_atom_def;
  f.refusal = refuse_fragment_knobs;
  return f;
}

}  // namespace loom
