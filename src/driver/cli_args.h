// Command-line values shared by `loom` and its subcommands (tools/loom/main.cpp,
// src/tune/tune_cli.cpp): one checked integer parser, so no option wraps, clamps or
// truncates what the user typed, and one guard against an option given twice.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace loom {

// `text` as a base-10 integer in [min, max]. Anything else (empty, trailing characters,
// a sign where none is allowed, a value beyond int64 or outside the range) throws
// loom::Error naming the option, the value as typed and the range, e.g.
//   --reps 2147483648 is out of range: --reps takes an integer in [1, 1000000]
int64_t parse_int_option(const std::string& option, const std::string& text, int64_t min,
                         int64_t max);

// Options that take one value: a second occurrence is an error naming the option (the
// last value silently winning hides a typo in a long command line). `aliases` spell one
// option (-c and --expr).
class OnceOptions {
 public:
  // Throws loom::Error naming both values when `canonical` was seen before; `shown` is
  // how the user wrote the option.
  void see(const std::string& canonical, const std::string& shown, const std::string& value);

 private:
  std::map<std::string, std::string> seen_;  // option -> its first value
};

}  // namespace loom
