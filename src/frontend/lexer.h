// Tokens of the expression language (see parser.h for the grammar).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace loom {

enum class TokenKind { Ident, Number, LParen, RParen, LBracket, RBracket, Comma, Colon,
                       Equals, Dot, Bar, End };

struct Token {
  TokenKind kind = TokenKind::End;
  std::string text;  // the characters as written
  int column = 0;    // 1-based column of the first character
  // Number: true when written as a plain unsigned integer (usable as a dimension).
  bool is_integer = false;
};

// Splits `text` into tokens ending with an End token (whose column is one past the
// text). Throws ExprError at an unexpected character.
std::vector<Token> lex(std::string_view text);

// How a token reads in an error message: 'x', or "end of input".
std::string describe(const Token& t);

}  // namespace loom
