#include "frontend/diagnostic.h"

#include <algorithm>

namespace loom {
namespace {

// Expressions are one line in practice; a multi-line text shows only the line holding
// the column, and the header then names the line too so the caret stays meaningful.
std::string render(std::string_view text, int column, const std::string& message) {
  size_t pos = size_t(std::clamp<int64_t>(int64_t(column) - 1, 0, int64_t(text.size())));
  size_t newline = pos == 0 ? std::string_view::npos : text.rfind('\n', pos - 1);
  size_t begin = newline == std::string_view::npos ? 0 : newline + 1;
  size_t end = text.find('\n', pos);
  if (end == std::string_view::npos) end = text.size();
  std::string_view line = text.substr(begin, end - begin);

  std::string out = "error at ";
  if (text.find('\n') != std::string_view::npos) {
    int line_no = 1 + int(std::count(text.begin(), text.begin() + begin, '\n'));
    out += "line " + std::to_string(line_no) + ", ";
    out += "column " + std::to_string(pos - begin + 1);
  } else {
    out += "column " + std::to_string(column);
  }
  out += ": " + message + "\n  " + std::string(line) + "\n  ";
  // Tabs are copied so the caret lines up however the terminal expands them.
  for (size_t i = begin; i < pos; ++i) out += text[i] == '\t' ? '\t' : ' ';
  out += '^';
  return out;
}

}  // namespace

ExprError::ExprError(std::string_view text, int column, std::string message)
    : Error(render(text, column, message)), column_(column), message_(std::move(message)) {}

}  // namespace loom
