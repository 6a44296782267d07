#include "frontend/lexer.h"

#include <cctype>
#include <cstdint>
#include <cstdio>

#include "frontend/diagnostic.h"
#include "ir/printable.h"

namespace loom {
namespace {

bool is_ident_start(char c) { return std::isalpha((unsigned char)c) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum((unsigned char)c) || c == '_'; }
bool is_digit(char c) { return std::isdigit((unsigned char)c) != 0; }

// A number is [+-] (digits [. digits] | . digits) [(e|E) [+-] digits]. The sign belongs
// to the number because nothing else in the language uses '+' or '-'.
size_t scan_number(std::string_view s, size_t i, bool& is_integer) {
  size_t start = i;
  if (s[i] == '+' || s[i] == '-') ++i;
  size_t digits = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  bool integer = i > digits && start == digits;
  bool mantissa = i > digits;
  if (i < s.size() && s[i] == '.' && i + 1 < s.size() && is_digit(s[i + 1])) {
    integer = false;
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    mantissa = true;
  } else if (i < s.size() && s[i] == '.' && mantissa &&
             (i + 1 >= s.size() || !is_ident_start(s[i + 1]))) {
    integer = false;  // "2." is a number; "2.T" is not, so leave that dot alone
    ++i;
  }
  if (!mantissa) return start;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t e = i + 1;
    if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
    if (e < s.size() && is_digit(s[e])) {
      i = e;
      while (i < s.size() && is_digit(s[i])) ++i;
      integer = false;
    }
  }
  is_integer = integer;
  return i;
}

// The character at text[i] for an error message: the whole UTF-8 character (not its
// first byte, which alone is not UTF-8) with its code point, printable() when it is a
// control character, or the byte when it starts no UTF-8 character.
std::string describe_character(std::string_view text, size_t i) {
  const size_t n = utf8_length(text, i);
  char buf[16];
  if (n == 0) {
    std::snprintf(buf, sizeof buf, "%02X", unsigned(uint8_t(text[i])));
    return std::string("byte 0x") + buf + " (the expression is not valid UTF-8)";
  }
  uint32_t cp = n == 1 ? uint8_t(text[i]) : uint8_t(text[i]) & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(text[i + k]) & 0x3F);
  std::snprintf(buf, sizeof buf, "U+%04X", unsigned(cp));
  return "character '" + printable(text.substr(i, n)) + "' (" + buf + ")";
}

}  // namespace

std::vector<Token> lex(std::string_view text) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace((unsigned char)c)) {
      ++i;
      continue;
    }
    Token t;
    t.column = int(i) + 1;
    size_t end = i + 1;
    if (is_ident_start(c)) {
      while (end < text.size() && is_ident_char(text[end])) ++end;
      t.kind = TokenKind::Ident;
    } else if (is_digit(c) || c == '+' || c == '-' ||
               (c == '.' && i + 1 < text.size() && is_digit(text[i + 1]))) {
      end = scan_number(text, i, t.is_integer);
      if (end == i) {
        throw ExprError(text, t.column,
                        std::string("expected a number after '") + c + "'");
      }
      t.kind = TokenKind::Number;
    } else {
      switch (c) {
        case '(': t.kind = TokenKind::LParen; break;
        case ')': t.kind = TokenKind::RParen; break;
        case '[': t.kind = TokenKind::LBracket; break;
        case ']': t.kind = TokenKind::RBracket; break;
        case ',': t.kind = TokenKind::Comma; break;
        case ':': t.kind = TokenKind::Colon; break;
        case '=': t.kind = TokenKind::Equals; break;
        case '.': t.kind = TokenKind::Dot; break;
        case '|': t.kind = TokenKind::Bar; break;
        default:
          throw ExprError(text, t.column,
                          "unexpected " + describe_character(text, i) +
                              " (an expression is made of calls f(...), tensors "
                              "NAME[dims]:dtype and numbers)");
      }
    }
    t.text = std::string(text.substr(i, end - i));
    out.push_back(std::move(t));
    i = end;
  }
  Token end_token;
  end_token.kind = TokenKind::End;
  end_token.column = int(text.size()) + 1;
  out.push_back(end_token);
  return out;
}

std::string describe(const Token& t) {
  if (t.kind == TokenKind::End) return "end of input";
  return "'" + t.text + "'";
}

}  // namespace loom
