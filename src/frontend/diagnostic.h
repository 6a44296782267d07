// Errors in expression text: the message, the column it refers to, and the source line
// with a caret under that column, so a user sees which token Loom rejected:
//
//   error at column 19: expected ']' to close the shape of A, found ':'
//     matmul(A[4096,4096:f32, B[4096,4096]:f32)
//                       ^
#pragma once
#include <string>
#include <string_view>

#include "ir/error.h"

namespace loom {

// The column a reader counts at byte `byte_column` (1-based) of `text`: characters (code
// points) since the start of its line, 1-based.
int character_column(std::string_view text, int byte_column);

class ExprError : public Error {
 public:
  // `column` is the 1-based byte offset within `text` (what the lexer counts); a column
  // past the end points just after it. The message, column() and the caret count
  // characters instead, and the echoed line is printable() (ir/printable.h).
  ExprError(std::string_view text, int column, std::string message);
  int column() const { return column_; }  // 1-based, in characters of its line
  const std::string& message() const { return message_; }  // without location and caret

 private:
  int column_;
  std::string message_;
};

}  // namespace loom
