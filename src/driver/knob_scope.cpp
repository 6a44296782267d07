#include "driver/knob_scope.h"

#include <algorithm>
#include <vector>

#include "driver/compile.h"
#include "ir/error.h"
#include "passes/defaults.h"
#include "passes/families/family.h"

namespace loom {

namespace {

bool has_op(const Graph& g, OpKind kind) {
  for (const auto& n : g.nodes)
    if (n.kind == kind) return true;
  return false;
}

bool has_family_op(const Graph& g, FamilyOp op) {
  return has_op(g, op == FamilyOp::gemm ? OpKind::Matmul : OpKind::Attention);
}

// "K=v,K2=v2" of the explicit knobs `refused` picks, in `order`'s order; `count` gets how
// many.
template <typename Order, typename Pred>
std::string explicit_refused(const Knobs& knobs, const Order& order, Pred refused, int& count) {
  std::string bad;
  count = 0;
  for (const auto& name : order) {
    if (!knobs.has(name)) continue;
    const std::string v = knobs.get_str(name, "");
    if (!refused(name, v)) continue;
    bad += (bad.empty() ? "" : ",") + name + "=" + v;
    ++count;
  }
  return bad;
}

std::vector<std::string> registry_order() {
  std::vector<std::string> out;
  for (const auto& k : knob_registry()) out.push_back(k.name);
  return out;
}

// Knobs of one operation's families on a program without that operation: GEMM knobs on a
// program with attention and no contraction, attention knobs on one with a contraction and
// no attention. A knob some family of the program's operation reads, or honours at the
// given value (CLUSTER_M=1 on attention), passes; the others are refused in `loom knobs`
// order.
void refuse_knobs_of_absent_ops(const Graph& g, const CompileOptions& opt) {
  const bool gemm = has_op(g, OpKind::Matmul), attention = has_op(g, OpKind::Attention);
  if (gemm == attention) return;  // neither (elementwise only) or both: every knob may apply
  const FamilyOp present = gemm ? FamilyOp::gemm : FamilyOp::attention;
  auto read_by = [](FamilyOp op, const std::string& knob) {
    for (const auto& f : kernel_families())
      if (f.op == op && f.reads_knob(knob)) return true;
    return false;
  };
  auto refused = [&](const std::string& knob, const std::string& value) {
    if (read_by(present, knob)) return false;
    if (!read_by(present == FamilyOp::gemm ? FamilyOp::attention : FamilyOp::gemm, knob))
      return false;  // no family reads it: not this check's to refuse
    for (const auto& f : kernel_families())
      if (f.op == present && f.accepts(knob, value)) return false;
    return true;
  };
  int count = 0;
  const std::string bad = explicit_refused(opt.knobs, registry_order(), refused, count);
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

// Knobs only another family of the program's GEMM reads: for each family with a refusal
// (wgmma's organization, mma.sync's fragments), the explicit knobs it reads at the given
// value that the family serving the atom neither reads nor honours, unless a family of
// another operation in the program reads them (attention's mma.sync kernel reads
// FRAG_BUFFERS), in the order the family declares them.
void refuse_knobs_of_other_families(const Graph& g, const CompileOptions& opt, const Knobs& base,
                                    bool tuned, const std::string& atom) {
  if (!has_op(g, OpKind::Matmul)) return;
  const KernelFamily& serving = gemm_family_of_atom(atom);
  auto read_by_other_op = [&](const std::string& knob) {
    for (const auto& f : kernel_families())
      if (f.op != FamilyOp::gemm && has_family_op(g, f.op) && f.reads_knob(knob)) return true;
    return false;
  };
  for (const auto& f : kernel_families()) {
    if (f.op != FamilyOp::gemm || !f.refusal || &f == &serving) continue;
    std::vector<std::string> order;
    for (const auto& u : f.reads) order.push_back(u.name);
    auto refused = [&](const std::string& knob, const std::string& value) {
      return f.accepts(knob, value) && !serving.accepts(knob, value) && !read_by_other_op(knob);
    };
    int count = 0;
    const std::string bad = explicit_refused(opt.knobs, order, refused, count);
    if (bad.empty()) continue;
    throw Error(f.refusal(RefusalContext{g, opt.target, opt.knobs, base, tuned, atom, bad, count}));
  }
}

}  // namespace

void refuse_inapplicable_knobs(const Graph& g, const CompileOptions& opt, const Knobs& base,
                               bool tuned, const std::string& atom) {
  refuse_knobs_of_absent_ops(g, opt);
  refuse_knobs_of_other_families(g, opt, base, tuned, atom);
}

void refuse_knobs_of_other_variants(const CompileOptions& opt, const CompileState& s) {
  for (const auto& f : kernel_families())
    for (const auto& v : f.variants) {
      const auto it = s.used_knobs.find(v.selector);
      if (it == s.used_knobs.end()) continue;
      if (in_value_list(v.value, it->second)) {
        // The variant's value, but its pass did not build this kernel (EPILOGUE=smem on a
        // kernel that is not warp-specialized: k:054 stages it, not k:053's strips): an
        // explicit knob of the variant would change nothing.
        for (const std::string& knob : v.knobs)
          if (opt.knobs.has(knob) && !s.used_knobs.count(knob))
            throw Error(knob + "=" + opt.knobs.get_str(knob, "") + " shapes " + v.what + " (" +
                        v.pass + "), which this kernel does not use under " + v.selector + "=" +
                        it->second + "; " +
                        (v.other_pass_note.empty() ? "" : v.other_pass_note + " ") + "drop " + knob);
        continue;
      }
      auto refused = [](const std::string&, const std::string&) { return true; };
      int count = 0;
      const std::string bad = explicit_refused(opt.knobs, v.knobs, refused, count);
      if (bad.empty()) continue;
      const bool chosen = opt.knobs.has(v.selector);
      const std::string sel = v.selector, noun = sel == "EPILOGUE" ? "the epilogue" : sel;
      std::string values = v.value;  // "tma_store|smem" -> "tma_store or smem"
      for (size_t at = values.find('|'); at != std::string::npos; at = values.find('|'))
        values.replace(at, 1, " or ");
      throw Error(bad + (count == 1 ? " shapes" : " shape") + " " + v.what + " (" + sel + "=" +
                  values + ", " + v.pass + "), but " + noun + " is " + it->second + ", chosen by " +
                  (chosen ? "the explicit " + sel + "=" + it->second
                          : std::string("the defaults of this shape")) +
                  "; " + (chosen ? "use" : "add") + " " + sel + "=" +
                  v.value.substr(0, v.value.find('|')) + ", or drop " + bad);
    }
}

}  // namespace loom
