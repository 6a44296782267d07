// Knobs: every decision a pass makes that a person (or the tuner) may override.
//
// A knob is declared once in the registry (src/passes/knobs.cpp) with its type, legal
// values, default and the pass that reads it; docs/knobs.md documents each. Values come
// from, in order of precedence: --knobs on the command line, LOOM_KNOBS in the
// environment, the tuning database, the pass's default for the shape.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom {

// The tuner's search (src/tune/space.cpp) is declared here, knob by knob, so that a new
// pass or atom joins it by declaring values, not by editing the tuner. Tiling and staging
// knobs are enumerated jointly inside their group under the space's legality rules
// (divisibility, threads, shared memory); split-K values are tried where the grid leaves
// SMs idle; every other searched knob is varied one value at a time around each
// tiling x staging configuration.
enum class SearchGroup { other, tiling, staging, split_k };

// Values the tuner tries for the atoms (and targets) an entry applies to. A knob's
// values for one atom are the union of its matching entries, in declaration order.
struct KnobSearch {
  std::string atoms;               // "" every atom, "fma", "mma" (every mma_*), or one ATOM value
  std::vector<std::string> values;
  int min_cc = 0;                  // lowest compute capability (x10) the values apply to
  bool applies(const std::string& atom, int cc) const;
};

struct KnobDef {
  std::string name;                  // "BM"
  std::string doc;                   // one line
  std::string read_by;               // pass id, e.g. "t:010_partition_loops"
  int64_t min = 1, max = 1 << 20;    // integer knobs: inclusive range
  bool power_of_two = false;
  std::vector<std::string> choices = {};  // enum knobs: legal spellings (empty = integer)
  SearchGroup group = SearchGroup::other;
  std::vector<KnobSearch> search = {};  // empty: the tuner leaves the knob to the defaults

  // The registry's way of declaring a searched knob: KnobDef{...}.searched(group, {...}).
  KnobDef searched(SearchGroup g, std::vector<KnobSearch> s) const;
  // The values the tuner tries for ATOM=`atom` on compute capability `cc` (x10); empty
  // when the knob is not searched there.
  std::vector<std::string> search_values(const std::string& atom, int cc) const;
};

const std::vector<KnobDef>& knob_registry();
const KnobDef* find_knob(const std::string& name);

// The knob names of the matmul article Loom's ladders follow (docs/knobs.md, "The
// article's knob names"), accepted in --knobs and LOOM_KNOBS and translated to Loom's
// knobs as a list is parsed. Names the article shares with Loom in the same sense (FM,
// FN, WM, WN, SPLITK, GROUP_M, PAD_SMEM, INTERLEAVE_LOADS, WARP_SPECIALIZE) need no
// entry. BM and BN count threads in the article and rows in Loom, and with an mma
// ATOM_KIND its BK counts k-atoms: in a list that uses the article's names they are an
// error giving the Loom value (a list of Loom's own names keeps Loom's meaning).
struct KnobAlias {
  std::string name;  // the article's: "TMA"
  std::string loom;  // the Loom knob it sets: "STAGE"
  std::string doc;   // its values and what each becomes
};
const std::vector<KnobAlias>& knob_aliases();

// A set of explicit knob values. Values are kept as strings (enum) or integers.
class Knobs {
 public:
  // Parses "BM=64,BN=128"; throws loom::Error naming the knob for unknown names,
  // malformed values and values outside a knob's declared range or choices.
  static Knobs parse(const std::string& text);
  // LOOM_KNOBS from the environment (empty when unset), then `cli` on top.
  static Knobs from_env_and_cli(const std::string& cli);

  void set(const std::string& name, const std::string& value);  // validates
  void merge(const Knobs& over);  // `over` wins
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  int64_t get_int(const std::string& name, int64_t fallback) const;
  std::string get_str(const std::string& name, const std::string& fallback) const;
  std::string str() const;  // "BM=64,BN=128" in registry order
  const std::map<std::string, std::string>& values() const { return values_; }
  // How parse() read the article's names, one line per list that used them:
  // "TMA=1,STAGE=11 -> STAGE=tma" (shown as a note by compile and run).
  const std::vector<std::string>& alias_notes() const { return alias_notes_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> alias_notes_;
};

// Whether `value` is one of `list`'s values joined by '|' ("tma_store|smem"): the spelling
// of a knob value set in the families' variants and the tuner's dependent knobs.
inline bool in_value_list(const std::string& list, const std::string& value) {
  return !value.empty() && ("|" + list + "|").find("|" + value + "|") != std::string::npos;
}

}  // namespace loom
