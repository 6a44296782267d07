// Kernel families declared in one place. A family is one kind of kernel Loom generates
// (the SIMT GEMM, the mma.sync GEMM, the wgmma GEMM with its TMA and thread-copy
// transports, attention on mma.sync, attention on wgmma, decode attention). Its
// registration (src/passes/families/<family>.cpp, listed in registry.cpp) says:
//  - which atom (or attention kernel) it is, and when it serves a program;
//  - the knobs it reads, each with the values it reads (none listed: every value), and
//    the knobs it does not read but honours at their "off" values (CLUSTER_M=1 is no
//    cluster to every kernel);
//  - its shape classes' defaults (GEMM families: its schedule for the shape, and whether
//    it is the class's default atom);
//  - its legality: the refusal of explicit knobs that only it reads when another family
//    serves the program (the message names the knobs, what chose the other family, the fix),
//    and its variants' knobs (the TMA-store epilogue's EPI_BUFFERS, ...);
//  - its tuner space (what `loom tune` varies for it beyond the registry's per-knob
//    search values).
// The driver's knob scope (src/driver/knob_scope.cpp), the shape-class defaults
// (src/passes/defaults.cpp), `loom knobs` and docs/knobs.md's family table
// derive from these declarations: adding a family is one registration
// (docs/architecture.md, "Kernel families").
#pragma once
#include <string>
#include <vector>

#include "atoms/atoms.h"
#include "ir/graph.h"
#include "passes/defaults.h"
#include "passes/knobs.h"
#include "passes/pass.h"

namespace loom {

struct GemmShape;

// A knob a family reads or honours, with the values concerned (none: every value).
struct KnobUse {
  std::string name;
  std::vector<std::string> values = {};
  bool covers(const std::string& value) const;
};

// Which operation of a program a family's kernels compute.
enum class FamilyOp { gemm, attention };
const char* family_op_name(FamilyOp op);  // "GEMM", "attention"

// A variant of a family's kernel chosen by one knob's value, with knobs only it reads:
// explicit ones are refused when a pass recorded another value for the selector.
struct KnobVariant {
  std::string selector;  // "EPILOGUE"
  std::string value;     // "tma_store", or values joined by '|' ("tma_store|smem")
  std::string what;      // "the TMA-store epilogue"
  std::string pass;      // "k:053", where the variant is built
  std::vector<std::string> knobs;  // EPI_BUFFERS, STMATRIX, EPI_SYNC
  // Where a value of the selector leaves some kernels to another pass (EPILOGUE=smem: k:054
  // stages kernels that are not warp-specialized), which ones, and the fix: the refusal of
  // an explicit variant knob no pass read says it.
  std::string other_pass_note;
};

// A way slabs reach shared memory (a STAGE value) and the organization that rides on it:
// defaults of those knobs drop when an explicit STAGE picks another transport (a wgmma
// schedule's producer warpgroup, multicast clusters and TMA-store epilogue need TMA slabs).
struct Transport {
  std::string stage;           // "tma"
  std::vector<KnobUse> knobs;  // WARP_SPECIALIZE, ..., EPILOGUE=tma_store
};

// What a refusal message is built from: the program, the explicit knobs, the knob set
// they merge over (class defaults or a tuning record), the atom that will run, and the
// refused knobs ("A=1,B=2", how many).
struct RefusalContext {
  const Graph& graph;
  const Target& target;
  const Knobs& explicit_knobs;
  const Knobs& base;
  bool tuned;
  const std::string& atom;
  const std::string& bad;
  int count;
};

// One searched dimension of a family's tuner space: the knob and its values in search
// order (the first is where the enumeration starts).
struct TunerDim {
  std::string knob;
  std::vector<std::string> values;
};
// A constraint between dimensions: `knob` other than its first value needs `needs`=`value`.
struct TunerRule {
  std::string knob, needs, value;
};

struct KernelFamily {
  std::string name;     // "wgmma", "attention_decode"
  std::string summary;  // one line: the kernel and where it runs
  FamilyOp op;
  // GEMM families: whether the kernel compiled for ATOM=`atom` is this family's (the
  // atom choice itself is resolved_atom's: explicit ATOM, SIMT tiling knobs, defaults).
  bool (*serves_atom)(const std::string& atom) = nullptr;
  // GEMM families: the atom table entry ATOM=`atom` compiles to under the state's knobs
  // (ACC, and wgmma's N from BN, WN, FN), nullptr for the SIMT path; throws loom::Error
  // naming the limit and the fix for a combination the family has no atom for
  // (passes/mma_choice.h's chosen_mma calls it).
  const AtomDef* (*atom_def)(CompileState& s, const std::string& atom) = nullptr;
  // Attention families: which knob values select the kernel, for the table (the passes
  // decide: t:012 by ATTN_MMA and the head dim, l:005/k:012 decode by the query rows).
  std::string chosen_by;
  std::vector<KnobUse> reads;    // in the order its refusals list them
  std::vector<KnobUse> honours;  // knobs it does not read, at the values that switch them off
  // GEMM families: the family's schedule for the shape (what DefaultChoice keeps for its
  // atom; the SIMT family's is the shape class's own and is null here).
  Knobs (*schedule)(const GemmShape& s, const Target& t) = nullptr;
  Knobs DefaultChoice::*schedule_slot = nullptr;  // where DefaultChoice keeps it
  // The family whose schedules define the shape classes (SIMT, which every target runs):
  // the shape's class ("decode" when `decode`) and its schedule.
  std::string (*classify)(const GemmShape& s, const Target& t, bool decode, Knobs& schedule) = nullptr;
  // Whether the family is the default atom of the shape's class (`atom` gets the ATOM
  // value; the first family in registry order that claims wins, so more specialized
  // families come first).
  bool (*claims)(const GemmShape& s, const Target& t, const std::string& shape_class,
                 std::string& atom) = nullptr;
  // Whether this family runs the shape as decode (a few rows against a large weight):
  // the shape class is "decode" when any family says so.
  bool (*decodes)(const GemmShape& s, const Target& t) = nullptr;
  // A schedule for run-time sizes the SIMT "symbolic" class would otherwise take: fills
  // `c` and returns true.
  bool (*symbolic)(const Graph& g, const Target& t, DefaultChoice& c) = nullptr;
  // The ranges of a run-time size that compile a kernel of their own (runtime_size_ranges,
  // defaults.h); empty where one kernel serves every size.
  std::vector<SizeRange> (*size_ranges)(const Graph& g, const Target& t) = nullptr;
  // The message refusing explicit knobs that this family reads and the serving family
  // neither reads nor honours (null: no such refusal, the knobs pass to the passes).
  std::string (*refusal)(const RefusalContext& r) = nullptr;
  std::vector<KnobVariant> variants;
  std::vector<Transport> transports;
  std::vector<TunerDim> tuner_space;
  std::vector<TunerRule> tuner_rules;
  int tuner_min_cc = 0;
  bool tuner_needs_accelerated = false;  // an sm_90a-style target ("a" suffix)

  bool reads_knob(const std::string& knob) const;  // any value
  bool accepts(const std::string& knob, const std::string& value) const;  // reads or honours
};

// Every family, in the order the default atom is claimed and messages are built.
const std::vector<KernelFamily>& kernel_families();
const KernelFamily* find_family(const std::string& name);
// The GEMM family whose kernel ATOM=`atom` compiles.
const KernelFamily& gemm_family_of_atom(const std::string& atom);

// The knobs the kernel-generic passes read for every family (vectorized copies,
// swizzles, launch bounds, dependent launch, realigned rows, ...).
const std::vector<KnobUse>& generic_knobs();

// The atom of `kind` ("wgmma" or "mma") for the contraction's operands (f32 operands
// take tf32), for the fixes in messages.
std::string atom_for_operands(const Graph& g, const std::string& kind);

// docs/knobs.md's "Knobs by kernel family" table, generated from the registry: one row per
// family, what it computes, what selects it, the knobs it reads (KNOB=values where it reads
// only some), and the knobs it honours at their off values. `loom knobs` prints it.
std::string families_knob_table();

// The families' registrations (one per file of src/passes/families/).
KernelFamily simt_family();
KernelFamily mma_sync_family();
KernelFamily wgmma_family();
KernelFamily attention_mma_sync_family();
KernelFamily attention_wgmma_family();
KernelFamily attention_decode_family();

}  // namespace loom
