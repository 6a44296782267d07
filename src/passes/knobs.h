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

struct KnobDef {
  std::string name;                  // "BM"
  std::string doc;                   // one line
  std::string read_by;               // pass id, e.g. "t:010_partition_loops"
  int64_t min = 1, max = 1 << 20;    // integer knobs: inclusive range
  bool power_of_two = false;
  std::vector<std::string> choices;  // enum knobs: legal spellings (empty = integer)
};

const std::vector<KnobDef>& knob_registry();
const KnobDef* find_knob(const std::string& name);

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

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace loom
