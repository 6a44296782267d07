// User text echoed back on a terminal (an expression in a diagnostic, an option's value
// in an error): it must come out as valid UTF-8 and must not drive the terminal. Valid,
// printable UTF-8 passes through; control characters (ESC of an ANSI sequence, CR, BEL,
// the C1 range), DEL and bytes that are not UTF-8 are written as escapes (\x1b, \u0085).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace loom {

// The byte length (1-4) of the well-formed UTF-8 character at s[i] (no overlong forms,
// no surrogates, at most U+10FFFF), or 0 when s[i] starts none.
size_t utf8_length(std::string_view s, size_t i);

// `text` with everything that is not printable UTF-8 escaped. With keep_layout, '\n' and
// '\t' stay as they are (a multi-line message); otherwise they are escaped too.
std::string printable(std::string_view text, bool keep_layout = false);

}  // namespace loom
