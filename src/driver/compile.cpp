#include "driver/compile.h"

#include <algorithm>

#include "codegen/cuda.h"
#include "frontend/parser.h"
#include "frontend/sizes.h"
#include "ir/error.h"
#include "driver/knob_scope.h"
#include "ir/warn_once.h"
#include "passes/defaults.h"
#include "passes/families/gemm_shape.h"
#include "passes/families/wgmma_candidates.h"

namespace loom {

namespace {

// The defaults an explicit knob kept (in keep but not in drop), for messages.
std::string kept_defaults(const Knobs& keep, const Knobs& drop) {
  std::string out;
  for (const auto& [name, value] : keep.values())
    if (!drop.has(name)) out += (out.empty() ? "" : ",") + name + "=" + value;
  return out;
}

// How a tf32 wgmma kernel reads an operand that is not K-major (wgmma reads tf32 shared
// operands K-major only, its descriptors transpose 16-bit types alone), for the knob
// source -v prints: which of the forms runs and the knobs that choose it; "" elsewhere.
std::string tf32_operand_form(const CompileState& s) {
  const auto used = [&](const char* k) {
    auto it = s.used_knobs.find(k);
    return it == s.used_knobs.end() ? std::string() : it->second;
  };
  if (used("ATOM") != "wgmma_tf32") return "";
  const GemmShape g = gemm_shape_of(s.graph);
  if (!g.known || (g.a_k_major && g.b_k_major)) return "";
  std::string transposed;
  for (const char* k : {"SLAB_A", "SLAB_B"})
    if (used(k) == "kinner") transposed += (transposed.empty() ? "" : ",") + std::string(k) + "=kinner";
  if (used("STAGE") == "tma" && !transposed.empty())
    return "tf32 operand not K-major: TMA lands it as it lies and the consumers transpose it "
           "in shared memory for the shared-A wgmma (" + transposed + ")";
  if (used("SWAP_AB") == "1" && used("WGMMA_A") == "regs")
    return "tf32 B [K, N]: swapped, B^T read into registers M-major (SWAP_AB=1,WGMMA_A=regs)";
  if (used("SWAP_AB") != "1" && used("WGMMA_A") == "regs" && !g.a_k_major)
    return "tf32 A given transposed: read into registers M-major (WGMMA_A=regs)";
  if (used("STAGE") == "cp_async")
    return "tf32 operand not K-major: the threads transpose it while they copy (STAGE=cp_async)";
  return "";
}

// The pipeline's state and where its knobs came from, for one choice of base: the tuned
// record `tuned` (when set) or the shape-class defaults. `tuned_note` is appended to the
// defaults' source when there is no record (the lookup's reason, or why a record was
// dropped).
struct Resolved {
  CompileState state;
  std::string knob_source;
  std::string note;  // CompiledProgram::notes
};

Resolved compile_knobs(const Graph& g, const CompileOptions& opt, const std::optional<Knobs>& tuned_rec,
                       const std::string& tuned_note) {
  Resolved out;
  DefaultChoice d = default_knobs(g, opt.target, opt.defaults_as_if);
  // An explicit GEMM_FORM puts a declared candidate in place of the class's defaults (and
  // of a tuning record: it is explicit); the other explicit knobs still override it.
  const std::string form = opt.knobs.get_str("GEMM_FORM", "default");
  if (form != "default") {
    if (const std::string atom = opt.knobs.get_str("ATOM", "wgmma_"); atom.rfind("wgmma_", 0) != 0)
      throw Error("GEMM_FORM=" + form + " is a candidate of the wgmma GEMM and cannot run with "
                  "the explicit ATOM=" + atom + ": drop one of them");
    d.knobs = d.wgmma = wgmma_gemm_form(form, gemm_shape_of(g), opt.target);
    d.shape_class += ", candidate GEMM_FORM=" + form;
  }
  const std::string atom = opt.knobs.get_str("ATOM", "");
  const bool tuned = tuned_rec && form == "default" &&
                     (atom.empty() || atom == tuned_rec->get_str("ATOM", "fma"));
  // The atom that will run: the explicit one, else fma under explicit SIMT tiling knobs,
  // else the record's or the class default's (resolved_atom).
  const Knobs& base = tuned ? *tuned_rec : d.knobs;
  const std::string effective = resolved_atom(base, opt.knobs);
  const bool wgmma = effective.rfind("wgmma_", 0) == 0;
  refuse_inapplicable_knobs(g, opt, base, tuned, effective);
  // Explicit knobs over the defaults (or the tuned record): each replaces only itself
  // where it can (GroupMerge::keep), else, as before, its whole group's defaults drop.
  auto resolve = [&](GroupMerge merge) {
    if (tuned) return resolve_knobs(*tuned_rec, opt.knobs, *tuned_rec, merge);
    return resolve_knobs(d.knobs, opt.knobs, wgmma ? d.wgmma : d.mma, merge);
  };
  // Explicit tiling knobs without ATOM leave the default atom for the SIMT schedule
  // (0.02x cuBLAS where the default was wgmma): legal, so not an error, but easy to do by
  // accident (`BN=128,FM=2` alone runs on fma), so it is said.
  if (const std::string tiling = tiling_knobs_choosing_fma(base, opt.knobs); !tiling.empty()) {
    const std::string was = base.get_str("ATOM", "fma");
    out.note = "the explicit tiling knob" + std::string(tiling.find(',') == std::string::npos ? " " : "s ") +
               tiling + " without ATOM select the SIMT schedule (ATOM=fma, where FM and FN count "
               "thread cells) instead of the " + (tuned ? "tuning record's" : "default") + " ATOM=" +
               was + ": add ATOM=" + was + " to tile that atom (FM and FN then count atoms)";
  }
  if (tuned) {
    out.knob_source = opt.tuned_source.empty() ? "tuned" : opt.tuned_source;
  } else {
    // The schedule of the atom that will run.
    out.knob_source = "default: class " + d.shape_class +
                      (effective == "fma" ? "" : wgmma ? ", wgmma schedule" : ", mma schedule");
    if (tuned_rec)
      out.knob_source += " (the tuned record, for ATOM=" + tuned_rec->get_str("ATOM", "fma") +
                         ", yields to the explicit ATOM=" + atom + ")";
    else if (!tuned_note.empty())
      out.knob_source += " (" + tuned_note + ")";
  }
  if (!opt.knobs.values().empty()) out.knob_source = "explicit over " + out.knob_source;
  if (!out.note.empty())
    out.knob_source += "; ATOM=fma for the explicit tiling knobs, not " + base.get_str("ATOM", "fma");

  auto attempt = [&](const Knobs& knobs) {
    CompileState s;
    s.graph = g;
    s.knobs = knobs;
    s.target = opt.target;
    s.sizes = opt.sizes;
    run_pipeline(s, opt.stop_after, opt.observer);
    return s;
  };
  const Knobs keep = resolve(GroupMerge::keep), drop = resolve(GroupMerge::drop);
  if (keep.values() == drop.values()) {
    out.state = attempt(keep);
  } else {
    try {
      out.state = attempt(keep);
    } catch (const Error& kept_error) {
      const std::string kept = kept_defaults(keep, drop);
      try {
        out.state = attempt(drop);
      } catch (const Error& dropped_error) {
        throw Error("the explicit knobs " + opt.knobs.str() + " fail with their groups' other "
                    "defaults (" + kept + ") kept: " + kept_error.what() +
                    "\nand with those defaults dropped: " + dropped_error.what());
      }
      out.knob_source += "; the group defaults " + kept + " were dropped: with them, " +
                         std::string(kept_error.what()).substr(0, 160);
    }
  }
  refuse_knobs_of_other_variants(opt, out.state);
  if (const std::string form = tf32_operand_form(out.state); !form.empty())
    out.knob_source += "; " + form;
  return out;
}

// Where a record came from, for the warning: tuned_source without its "tuned: " prefix.
std::string record_origin(const std::string& tuned_source) {
  const std::string prefix = "tuned: ";
  if (tuned_source.rfind(prefix, 0) == 0) return tuned_source.substr(prefix.size());
  return tuned_source.empty() ? "the tuning database" : tuned_source;
}

}  // namespace

CompiledProgram compile_graph(const Graph& g, const CompileOptions& opt,
                              const std::string& expression_text) {
  CompiledProgram out;
  check_tensor_sizes(g, opt.sizes);
  Resolved r;
  try {
    r = compile_knobs(g, opt, opt.tuned, opt.tuned_source);
  } catch (const Error& refused) {
    // A record the pipeline refuses (made before a default or a pass's limit changed, e.g.
    // mma.sync attention knobs from before wgmma became sm_90a's default) must not turn into
    // an error for a user who never asked for those knobs: like a record with unknown knob
    // names (tune/tuned_knobs.cpp), it is ignored with a warning. Without a record the same
    // compile below either works or throws the error of the explicit knobs / the defaults,
    // so refused explicit knobs stay an error.
    if (!opt.tuned) throw;
    const std::string origin = record_origin(opt.tuned_source);
    const std::string why = refused.what();
    r = compile_knobs(g, opt, std::nullopt,
                      "the tuning record in " + origin + " was refused: " + why.substr(0, 160));
    // Once per process: a long-running caller (loom_py, the tuner) compiles the shape
    // again and again, and meets the same record each time.
    const bool shipped = origin.rfind("shipped ", 0) == 0;
    warn_once("ignoring the tuning record in " + origin + " (knobs " + opt.tuned->str() +
              "): the compiler refuses it: " + why + "\n  compiling with the defaults instead; " +
              (shipped ? "a new record (`loom tune`) replaces it, "
                       : "re-tune this shape (`loom tune`), `loom db clear --yes` removes it, ") +
              "`--no-db` skips the database");
  }
  out.state = std::move(r.state);
  out.knob_source = std::move(r.knob_source);
  if (!r.note.empty()) out.notes.push_back(std::move(r.note));
  for (const std::string& n : out.state.notes) out.notes.push_back(n);
  for (const std::string& n : opt.knobs.alias_notes())
    out.notes.push_back("knobs by the article's names: " + n);
  const CompileState& s = out.state;

  std::string knobs;
  for (const auto& k : knob_registry()) {
    auto it = s.used_knobs.find(k.name);
    if (it != s.used_knobs.end()) knobs += (knobs.empty() ? "" : ",") + k.name + "=" + it->second;
  }
  out.summary = (expression_text.empty() ? std::string("graph") : expression_text) +
                " | target " + s.target.arch + " | knobs " + (knobs.empty() ? "-" : knobs);
  if (s.level == Level::Kernel && opt.stop_after.empty())
    out.cuda = render_cuda(s.kernel, RenderOptions{out.summary});
  return out;
}

CompiledProgram compile_expression(const std::string& expression, const CompileOptions& opt) {
  return compile_graph(parse_expression(expression), opt, expression);
}

}  // namespace loom
