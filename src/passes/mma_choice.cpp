#include "passes/mma_choice.h"

#include "ir/error.h"

namespace loom {
namespace {

// The warp-collective compute atom of the table multiplying `in` operands into an `acc`
// accumulator; nullptr when the table has none.
const AtomDef* mma_atom(DType in, DType acc) {
  for (const AtomDef& a : atom_table())
    if (a.kind == AtomKind::Compute && a.threads == WarpAtom::kLanes && a.a_type == in &&
        a.acc_type == acc)
      return &a;
  return nullptr;
}

}  // namespace

const AtomDef* chosen_mma(CompileState& s) {
  const std::string v = s.knobs.get_str("ATOM", "fma");
  const std::string acc = s.knobs.get_str("ACC", "f32");
  s.used_knobs["ATOM"] = v;
  if (v == "fma") {
    if (acc != "f32")
      throw Error("ACC=" + acc + " with ATOM=fma: the SIMT path accumulates in f32 (fma.rn.f32); "
                  "an f16 accumulator is the tensor-core atom m16n8k16 .f16.f16.f16.f16 — set "
                  "ATOM=mma_f16 (f16 inputs) or ACC=f32");
    return nullptr;
  }
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

}  // namespace loom
