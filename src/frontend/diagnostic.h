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

class ExprError : public Error {
 public:
  // `column` is 1-based within `text`; a column past the end points just after it.
  ExprError(std::string_view text, int column, std::string message);
  int column() const { return column_; }
  const std::string& message() const { return message_; }  // without location and caret

 private:
  int column_;
  std::string message_;
};

}  // namespace loom
