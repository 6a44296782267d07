#include "passes/families/family.h"

#include <algorithm>

#include "ir/error.h"

namespace loom {

bool KnobUse::covers(const std::string& value) const {
  return values.empty() || std::find(values.begin(), values.end(), value) != values.end();
}

const char* family_op_name(FamilyOp op) { return op == FamilyOp::gemm ? "GEMM" : "attention"; }

bool KernelFamily::reads_knob(const std::string& knob) const {
  return std::any_of(reads.begin(), reads.end(), [&](const KnobUse& u) { return u.name == knob; });
}

bool KernelFamily::accepts(const std::string& knob, const std::string& value) const {
  for (const auto* list : {&reads, &honours})
    for (const auto& u : *list)
      if (u.name == knob && u.covers(value)) return true;
  return false;
}

const std::vector<KnobUse>& generic_knobs() {
  static const std::vector<KnobUse> knobs = {{"SWIZZLE"},   {"INTERLEAVE_LOADS"}, {"UNROLL_K"},
                                             {"MIN_BLOCKS"}, {"DEPENDENT_LAUNCH"}, {"VECTORIZE"},
                                             {"REALIGN"}};
  return knobs;
}

const std::vector<KernelFamily>& kernel_families() {
  // The default atom is claimed in this order (the most specialized GEMM family first),
  // and the knob scope's refusals are checked in it.
  static const std::vector<KernelFamily> families = {
      wgmma_family(),
      mma_sync_family(),
      simt_family(),
      attention_wgmma_family(),
      attention_mma_sync_family(),
      attention_decode_family(),
  };
  return families;
}

const KernelFamily* find_family(const std::string& name) {
  for (const auto& f : kernel_families())
    if (f.name == name) return &f;
  return nullptr;
}

const KernelFamily& gemm_family_of_atom(const std::string& atom) {
  for (const auto& f : kernel_families())
    if (f.op == FamilyOp::gemm && f.serves_atom && f.serves_atom(atom)) return f;
  throw Error("internal: no GEMM family serves ATOM=" + atom);
}

namespace {

std::string uses(const std::vector<KnobUse>& list) {
  std::string out;
  for (const auto& u : list) {
    std::string values;
    for (const auto& v : u.values) values += (values.empty() ? "" : "|") + v;
    out += (out.empty() ? "" : " ") + u.name + (values.empty() ? "" : "=" + values);
  }
  return out.empty() ? "-" : "`" + out + "`";
}

}  // namespace

std::string families_knob_table() {
  std::string out =
      "| family | computes | selected by | reads | honours unread (at these values) |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const auto& f : kernel_families()) {
    std::string atoms;
    if (f.serves_atom)
      for (const auto& a : find_knob("ATOM")->choices)
        if (f.serves_atom(a)) atoms += (atoms.empty() ? "" : ", ") + ("`ATOM=" + a + "`");
    const std::string chosen = f.serves_atom ? atoms : f.chosen_by;
    out += "| " + f.name + " | " + f.summary + " | " + chosen + " | " + uses(f.reads) + " | " +
           uses(f.honours) + " |\n";
  }
  return out;
}

std::string atom_for_operands(const Graph& g, const std::string& kind) {
  for (const auto& n : g.nodes)
    if (n.kind == OpKind::Matmul) {
      const DType in = g.node(n.inputs[0]).dtype;
      return kind + (in == DType::F16 ? "_f16" : in == DType::BF16 ? "_bf16" : "_tf32");
    }
  return kind + "_*";
}

}  // namespace loom
