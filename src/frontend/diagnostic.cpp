#include "frontend/diagnostic.h"

#include <algorithm>

#include "ir/printable.h"

namespace loom {
namespace {

// Where a byte offset of `text` sits for a reader: the line (1-based) and the column
// counted in characters (code points; a byte that is not UTF-8 counts as one).
struct Place {
  size_t line_begin = 0, line_end = 0;
  int line = 1, column = 1;
};

Place place(std::string_view text, size_t pos) {
  Place p;
  size_t newline = pos == 0 ? std::string_view::npos : text.rfind('\n', pos - 1);
  p.line_begin = newline == std::string_view::npos ? 0 : newline + 1;
  p.line_end = text.find('\n', pos);
  if (p.line_end == std::string_view::npos) p.line_end = text.size();
  p.line = 1 + int(std::count(text.begin(), text.begin() + p.line_begin, '\n'));
  for (size_t i = p.line_begin; i < pos; i += std::max<size_t>(1, utf8_length(text, i))) ++p.column;
  return p;
}

// Expressions are one line in practice; a multi-line text shows only the line holding
// the column, and the header then names the line too so the caret stays meaningful.
// The line is echoed through printable() (control characters such as an ANSI escape
// come out as \x1b, invalid UTF-8 as \xNN), and the caret is indented by what each
// character before it printed as, so it stays under the character it points at.
std::string render(std::string_view text, int column, const std::string& message) {
  size_t pos = size_t(std::clamp<int64_t>(int64_t(column) - 1, 0, int64_t(text.size())));
  const Place p = place(text, pos);
  std::string out = "error at ";
  if (text.find('\n') != std::string_view::npos) out += "line " + std::to_string(p.line) + ", ";
  out += "column " + std::to_string(p.column) + ": " + printable(message, true) + "\n  ";
  std::string indent;
  for (size_t i = p.line_begin; i < p.line_end;) {
    const size_t n = std::max<size_t>(1, utf8_length(text, i));
    const std::string shown = printable(text.substr(i, n), /*keep_layout=*/true);
    out += shown;
    // Tabs are copied so the caret lines up however the terminal expands them; any
    // other character (an escape is several) takes a space per column it printed as.
    if (i < pos) {
      if (shown == "\t") indent += '\t';
      else indent.append(shown.size() == n ? size_t(1) : shown.size(), ' ');
    }
    i += n;
  }
  return out + "\n  " + indent + "^";
}

}  // namespace

int character_column(std::string_view text, int byte_column) {
  size_t pos = size_t(std::clamp<int64_t>(int64_t(byte_column) - 1, 0, int64_t(text.size())));
  return place(text, pos).column;
}

ExprError::ExprError(std::string_view text, int column, std::string message)
    : Error(render(text, column, message)),
      column_(character_column(text, column)),
      message_(std::move(message)) {}

}  // namespace loom
