#include "driver/cli_args.h"

#include <charconv>

#include "ir/error.h"

namespace loom {

int64_t parse_int_option(const std::string& option, const std::string& text, int64_t min,
                         int64_t max) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  int64_t v = 0;
  const char* end = text.data() + text.size();
  // from_chars takes no leading space or '+', and reports a value beyond int64 as out of
  // range instead of clamping it as strtoll does.
  auto r = std::from_chars(text.data(), end, v);
  if (r.ec == std::errc::result_out_of_range && r.ptr == end)
    throw Error(option + " " + text + " is out of range: " + option + " takes an integer in " +
                range);
  if (text.empty() || r.ec != std::errc() || r.ptr != end)
    throw Error(option + " needs an integer in " + range + " (got '" + text + "')");
  if (v < min || v > max)
    throw Error(option + " " + text + " is out of range: " + option + " takes an integer in " +
                range);
  return v;
}

void OnceOptions::see(const std::string& canonical, const std::string& shown,
                      const std::string& value) {
  auto [it, fresh] = seen_.emplace(canonical, value);
  if (!fresh)
    throw Error("option " + shown + " is given twice ('" + it->second + "' and '" + value +
                "'): give it once");
}

}  // namespace loom
