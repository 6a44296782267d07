#include "ir/printable.h"

#include <cstdint>
#include <cstdio>

namespace loom {

size_t utf8_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return k < s.size() ? uint8_t(s[k]) : uint8_t(0); };
  auto cont = [&](size_t k) { return (byte(k) & 0xC0) == 0x80; };
  const uint8_t b = byte(i);
  if (i >= s.size()) return 0;
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    const uint8_t b1 = byte(i + 1);
    if (b == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b == 0xED && b1 >= 0xA0) return 0;  // UTF-16 surrogates
    return cont(i + 1) && cont(i + 2) ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    const uint8_t b1 = byte(i + 1);
    if (b == 0xF0 && b1 < 0x90) return 0;  // overlong
    if (b == 0xF4 && b1 >= 0x90) return 0;  // past U+10FFFF
    return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

std::string printable(std::string_view text, bool keep_layout) {
  std::string out;
  char buf[12];
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_length(text, i);
    const uint8_t b = uint8_t(text[i]);
    if (n == 0) {
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(b));
      out += buf;
      ++i;
      continue;
    }
    if (n == 1 && (b < 0x20 || b == 0x7F)) {
      if (keep_layout && (b == '\n' || b == '\t')) {
        out += char(b);
      } else {
        std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(b));
        out += buf;
      }
    } else if (n == 2 && b == 0xC2 && uint8_t(text[i + 1]) < 0xA0) {
      // C1 controls U+0080..U+009F (U+009B is a one-character CSI on some terminals).
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(uint8_t(text[i + 1])));
      out += buf;
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace loom
