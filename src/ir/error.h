// Loom's one error type. Every user-facing failure (bad expression, impossible knob,
// NVRTC error, missing GPU) is a loom::Error whose message names the problem and the fix.
#pragma once
#include <stdexcept>
#include <string>

namespace loom {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Internal invariant broken: a bug in Loom, not in the user's input.
#define LOOM_CHECK(cond, msg)                                                     \
  do {                                                                            \
    if (!(cond)) throw ::loom::Error(std::string("internal error: ") + (msg) +    \
                                     " [" #cond " at " __FILE__ ":" +             \
                                     std::to_string(__LINE__) + "]");             \
  } while (0)

}  // namespace loom
