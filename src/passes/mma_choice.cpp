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

// The wgmma entry ATOM names: its N is the warpgroup's columns per atom.
const AtomDef* wgmma_choice(CompileState& s, const std::string& v) {
  const std::string acc = s.knobs.get_str("ACC", "f32");
  if (acc != "f32")
    throw Error("ACC=" + acc + " with ATOM=" + v + ": Loom's wgmma atoms accumulate in f32; "
                "use ACC=f32");
  const std::string in = v.substr(6);  // f16 | bf16 | tf32
  const int64_t WN = s.knob("WN", 1), FN = s.knob("FN", 1), BN = s.knob("BN", 128);
  if (WN < 1 || FN < 1 || BN % (WN * FN) != 0)
    throw Error("BN=" + std::to_string(BN) + " with WN=" + std::to_string(WN) + ",FN=" +
                std::to_string(FN) + ": with ATOM=" + v + " each of the WN warpgroups covers "
                "FN atoms of BN/(WN*FN) columns; choose BN as a multiple of WN*FN");
  const int64_t n = BN / (WN * FN);
  const std::string id = "wgmma_m64n" + std::to_string(n) + (in == "tf32" ? "k8" : "k16") +
                         "_f32_" + in;
  const AtomDef* a = find_atom(id);
  if (!a)
    throw Error("ATOM=" + v + " with BN=" + std::to_string(BN) + ",WN=" + std::to_string(WN) +
                ",FN=" + std::to_string(FN) + " needs a wgmma of N=" + std::to_string(n) +
                " columns; wgmma's N is a multiple of 8 from 8 to 256 (choose BN/(WN*FN) so)");
  s.used_knobs["ACC"] = acc;
  return a;
}

}  // namespace

bool is_wgmma(const AtomDef* a) { return a && a->threads == 128; }

const AtomDef* chosen_mma(CompileState& s) {
  const std::string v = s.knobs.get_str("ATOM", "fma");
  const std::string acc = s.knobs.get_str("ACC", "f32");
  s.used_knobs["ATOM"] = v;
  if (v.rfind("wgmma_", 0) == 0) return wgmma_choice(s, v);
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
