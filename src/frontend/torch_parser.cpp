#include "frontend/torch_parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/diagnostic.h"
#include "ir/f32_constant.h"
#include "ir/printable.h"
#include "loom/builder.h"

namespace loom {
namespace {

const char* const kSubset =
    "Loom reads this PyTorch subset: torch.randn/rand/empty/ones/zeros(shape, dtype=, "
    "device=), torch.matmul/mm/bmm and @, F.linear, torch.relu, F.relu/gelu/silu, + - * "
    "with a tensor or a number, .t()/.T/.mT/.transpose(-2, -1), "
    "F.scaled_dot_product_attention (docs/cli.md, \"PyTorch code\")";
constexpr int kMaxDepth = 256;

// ---- tokens ------------------------------------------------------------------------

enum class Tok { Ident, Number, String, LParen, RParen, LBracket, RBracket, Comma, Equals,
                 Dot, Plus, Minus, Star, StarStar, Slash, At, Semicolon, Newline, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;   // as written (a string's contents without its quotes)
  int column = 0;     // 1-based byte offset in the whole text
  bool integer = false;  // Number: written without '.' or exponent
};

bool ident_start(char c) { return std::isalpha((unsigned char)c) || c == '_'; }
bool ident_char(char c) { return std::isalnum((unsigned char)c) || c == '_'; }
bool digit(char c) { return std::isdigit((unsigned char)c) != 0; }

std::vector<Token> lex(std::string_view s) {
  std::vector<Token> out;
  int depth = 0;  // open brackets: a newline inside them continues the line
  size_t i = 0;
  auto push = [&](Tok k, size_t begin, size_t end) {
    Token t;
    t.kind = k;
    t.column = int(begin) + 1;
    t.text = std::string(s.substr(begin, end - begin));
    out.push_back(std::move(t));
  };
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') {
      if (depth == 0 && !out.empty() && out.back().kind != Tok::Newline) push(Tok::Newline, i, i + 1);
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
      ++i;
    } else if (c == '\\' && (s.substr(i + 1, 1) == "\n" || s.substr(i + 1, 2) == "\r\n")) {
      i += s[i + 1] == '\n' ? 2 : 3;  // explicit line continuation
    } else if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (ident_start(c)) {
      size_t e = i + 1;
      while (e < s.size() && ident_char(s[e])) ++e;
      push(Tok::Ident, i, e);
      i = e;
    } else if (digit(c) || (c == '.' && i + 1 < s.size() && digit(s[i + 1]))) {
      size_t e = i;
      bool integer = true;
      while (e < s.size() && digit(s[e])) ++e;
      if (e < s.size() && s[e] == '.' && !(e + 1 < s.size() && ident_start(s[e + 1]))) {
        integer = false;
        ++e;
        while (e < s.size() && digit(s[e])) ++e;
      }
      if (e < s.size() && (s[e] == 'e' || s[e] == 'E')) {
        size_t x = e + 1;
        if (x < s.size() && (s[x] == '+' || s[x] == '-')) ++x;
        if (x < s.size() && digit(s[x])) {
          integer = false;
          e = x;
          while (e < s.size() && digit(s[e])) ++e;
        }
      }
      if (e < s.size() && ident_char(s[e]))
        throw ExprError(s, int(e) + 1,
                        "a number runs into '" + printable(s.substr(e, 1)) +
                            "' (Loom reads decimal numbers: 64, 0.5, 1e-3)");
      push(Tok::Number, i, e);
      out.back().integer = integer;
      i = e;
    } else if (c == '\'' || c == '"') {
      size_t e = i + 1;
      while (e < s.size() && s[e] != c && s[e] != '\n' && s[e] != '\\') ++e;
      if (e >= s.size() || s[e] != c)
        throw ExprError(s, int(i) + 1,
                        e < s.size() && s[e] == '\\'
                            ? "escapes in strings are not supported (the subset's strings "
                              "are words: 'cuda', 'tanh')"
                            : "unterminated string: close it with " + std::string(1, c));
      push(Tok::String, i, e + 1);
      out.back().text = std::string(s.substr(i + 1, e - i - 1));
      i = e + 1;
    } else {
      Tok k;
      size_t n = 1;
      switch (c) {
        case '(': k = Tok::LParen; ++depth; break;
        case '[': k = Tok::LBracket; ++depth; break;
        case ')': k = Tok::RParen; depth = std::max(0, depth - 1); break;
        case ']': k = Tok::RBracket; depth = std::max(0, depth - 1); break;
        case ',': k = Tok::Comma; break;
        case '=': k = Tok::Equals; break;
        case '.': k = Tok::Dot; break;
        case '+': k = Tok::Plus; break;
        case '-': k = Tok::Minus; break;
        case '*':
          k = Tok::Star;
          if (s.substr(i, 2) == "**") { k = Tok::StarStar; n = 2; }
          break;
        case '/': k = Tok::Slash; break;
        case '@': k = Tok::At; break;
        case ';': k = Tok::Semicolon; break;
        default: {
          const size_t len = std::max<size_t>(1, utf8_length(s, i));
          // Python takes non-ASCII letters in names; Loom's names become kernel parameters.
          if (uint8_t(c) >= 0x80 && len > 1)
            throw ExprError(s, int(i) + 1,
                            "unexpected character '" + printable(s.substr(i, len)) +
                                "': Loom's names are ASCII letters, digits and _ (a tensor's "
                                "name becomes a parameter of the generated kernel)");
          throw ExprError(s, int(i) + 1,
                          "unexpected character '" + printable(s.substr(i, len)) + "'; " +
                              kSubset);
        }
      }
      if (k == Tok::Equals && s.substr(i, 2) == "==")
        throw ExprError(s, int(i) + 1, "comparisons are not part of the subset; " +
                                           std::string(kSubset));
      push(k, i, i + n);
      i += n;
    }
  }
  Token end;
  end.kind = Tok::End;
  end.column = int(s.size()) + 1;
  out.push_back(end);
  return out;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "end of input";
    case Tok::Newline: return "end of line";
    default: return "'" + t.text + "'";
  }
}

// ---- values --------------------------------------------------------------------------

// A tensor created by torch.randn & co.: an input of the graph once an op uses it.
struct Storage {
  std::string name;  // the variable it was first assigned to, or generated when used
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  int column = 0;  // where it was created
};

struct Value {
  enum class Kind { None, Number, Bool, String, Tuple, DType, Input, Tensor, Module, Function,
                    Method };
  Kind kind = Kind::None;
  int column = 0;
  std::string text;  // Number: as written; String: contents; Module/Function: dotted path;
                     // Method: the method's name
  double number = 0;
  bool integer = false;
  bool truth = false;
  std::vector<Value> items;  // Tuple; Method: its tensor
  DType dtype = DType::F32;
  int storage = -1;          // Input
  bool transposed = false;   // Input: read transposed
  TensorRef ref;             // Tensor: a value computed by an op
};
using Kind = Value::Kind;

bool is_tensor(const Value& v) { return v.kind == Kind::Input || v.kind == Kind::Tensor; }

const std::set<std::string>& modules() {
  static const std::set<std::string> m = {"torch", "torch.nn", "torch.nn.functional"};
  return m;
}

const std::map<std::string, DType>& dtypes() {
  static const std::map<std::string, DType> d = {
      {"torch.float16", DType::F16}, {"torch.half", DType::F16},
      {"torch.bfloat16", DType::BF16}, {"torch.float32", DType::F32},
      {"torch.float", DType::F32}};
  return d;
}

// Every function of the subset, by its canonical path.
const std::set<std::string>& functions() {
  static const std::set<std::string> f = {
      "torch.randn", "torch.rand", "torch.empty", "torch.ones", "torch.zeros",
      "torch.matmul", "torch.mm", "torch.bmm", "torch.relu", "torch.t", "torch.transpose",
      "torch.nn.functional.relu", "torch.nn.functional.gelu", "torch.nn.functional.silu",
      "torch.nn.functional.linear", "torch.nn.functional.scaled_dot_product_attention"};
  return f;
}

// Arguments of one call: positional first, then keywords, each with its column.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<Token, Value>> keywords;
};

class TorchParser {
 public:
  explicit TorchParser(std::string_view text) : text_(text), tokens_(lex(text)) {
    for (const Token& t : tokens_)
      if (t.kind == Tok::Ident) identifiers_.insert(t.text);
  }

  Graph parse() {
    std::optional<Value> result;
    skip_separators();
    while (peek().kind != Tok::End) {
      if (std::optional<Value> v = statement()) result = std::move(v);
      const Token& t = peek();
      if (t.kind == Tok::End) break;
      if (t.kind != Tok::Newline && t.kind != Tok::Semicolon)
        fail(t, "expected ';' or a new line after the statement, found " + describe(t) +
                    (t.kind == Tok::RParen || t.kind == Tok::RBracket ? " (unbalanced brackets?)" : ""));
      skip_separators();
    }
    if (!result)
      fail(int(text_.size()) + 1,
           "the program has no result: its last expression statement (e.g. "
           "torch.matmul(a, b)) is what Loom compiles, and this one has none");
    const Value& r = *result;
    if (!is_tensor(r))
      fail(r.column, "the program's result is " + what(r) +
                         "; end it with the tensor expression to compile, e.g. torch.matmul(a, b)");
    TensorRef ref = tensor(r, "the result");
    return with_column(r.column, [&] { return builder_.build(ref); });
  }

 private:
  // ---- plumbing ----
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  void skip_separators() {
    while (peek().kind == Tok::Newline || peek().kind == Tok::Semicolon) next();
  }
  const Token& expect(Tok k, const std::string& what_expected) {
    const Token& t = next();
    if (t.kind != k) fail(t, "expected " + what_expected + ", found " + describe(t));
    return t;
  }

  [[noreturn]] void fail(int column, const std::string& message) const {
    throw ExprError(text_, column, message);
  }
  [[noreturn]] void fail(const Token& t, const std::string& message) const {
    fail(t.column, message);
  }

  // Builder errors carry no position; they refer to the construct being built.
  template <class F>
  auto with_column(int column, F&& f) -> decltype(f()) {
    builder_.set_column(column);
    try {
      return f();
    } catch (const ExprError&) {
      throw;
    } catch (const Error& e) {
      fail(column, e.what());
    }
  }

  // How a value reads in a message.
  std::string what(const Value& v) const {
    switch (v.kind) {
      case Kind::None: return "None";
      case Kind::Number: return "the number " + v.text;
      case Kind::Bool: return v.truth ? "True" : "False";
      case Kind::String: return "the string '" + v.text + "'";
      case Kind::Tuple: return "a tuple";
      case Kind::DType: return std::string("the dtype ") + dtype_name(v.dtype);
      case Kind::Input: return "the tensor " + input_text(v);
      case Kind::Tensor: return "a computed tensor";
      case Kind::Module: return "the module " + v.text;
      case Kind::Function: return "the function " + v.text + " (not called)";
      case Kind::Method: return "the method ." + v.text + " (not called)";
    }
    return "a value";
  }
  std::string input_text(const Value& v) const {
    const Storage& s = storages_[size_t(v.storage)];
    if (!s.name.empty()) return s.name;
    return "created at column " + std::to_string(character_column(text_, s.column));
  }

  // ---- statements ----
  std::optional<Value> statement() {
    const Token& first = peek();
    if (first.kind == Tok::Ident && (first.text == "import" || first.text == "from")) {
      import_statement();
      return std::nullopt;
    }
    if (first.kind == Tok::Ident && peek(1).kind == Tok::Equals) {
      next();
      next();
      assign(first, expression());
      return std::nullopt;
    }
    if (first.kind == Tok::Ident && peek(2).kind == Tok::Equals &&
        (peek(1).kind == Tok::Plus || peek(1).kind == Tok::Minus || peek(1).kind == Tok::Star) &&
        peek(1).column + 1 == peek(2).column) {
      next();
      const Token op = next();
      next();
      Value lhs = variable(first);
      Value rhs = expression();
      assign(first, arithmetic(op, lhs, rhs));
      return std::nullopt;
    }
    Value v = expression();
    if (peek().kind == Tok::Equals)
      fail(peek(), "only a plain name can be assigned to (a = ...); unpacking and "
                   "attributes are not part of the subset");
    return v;
  }

  // import torch | import torch.nn.functional as F | from torch.nn import functional as F
  void import_statement() {
    const Token& kw = next();
    std::string path = dotted();
    if (kw.text == "from") {
      const Token& imp = expect(Tok::Ident, "'import' after from " + path);
      if (imp.text != "import") fail(imp, "expected 'import' after from " + path + ", found " + describe(imp));
      const Token& name = expect(Tok::Ident, "a name to import from " + path);
      path += "." + name.text;
    }
    if (!modules().count(path))
      fail(kw, "import of '" + path + "': the subset imports only torch, torch.nn and "
               "torch.nn.functional (torch and F are always known)");
    if (peek().kind == Tok::Ident && peek().text == "as") {
      next();
      const Token& alias = expect(Tok::Ident, "a name after 'as'");
      Value m;
      m.kind = Kind::Module;
      m.text = path;
      m.column = alias.column;
      variables_[alias.text] = m;
    }
  }
  std::string dotted() {
    std::string path = expect(Tok::Ident, "a module name").text;
    while (peek().kind == Tok::Dot) {
      next();
      path += "." + expect(Tok::Ident, "a name after '.'").text;
    }
    return path;
  }

  void assign(const Token& name, Value v) {
    static const std::set<std::string> reserved = {"True", "False", "None", "import", "from",
                                                   "as", "torch", "F"};
    if (reserved.count(name.text))
      fail(name, "'" + name.text + "' cannot be assigned to here");
    if (v.kind == Kind::Input) {
      Storage& s = storages_[size_t(v.storage)];
      if (s.name.empty()) {
        for (const Storage& other : storages_)
          if (other.name == name.text)
            fail(name, "'" + name.text + "' already names the tensor created at column " +
                           std::to_string(character_column(text_, other.column)) +
                           "; Loom names input tensors after their variables, so give "
                           "this one another name");
        s.name = name.text;
      }
    }
    variables_[name.text] = std::move(v);
  }

  Value variable(const Token& name) {
    auto it = variables_.find(name.text);
    if (it != variables_.end()) {
      Value v = it->second;
      v.column = name.column;
      return v;
    }
    Value v;
    v.column = name.column;
    if (name.text == "torch") {
      v.kind = Kind::Module;
      v.text = "torch";
    } else if (name.text == "F") {
      v.kind = Kind::Module;
      v.text = "torch.nn.functional";
    } else if (name.text == "True" || name.text == "False") {
      v.kind = Kind::Bool;
      v.truth = name.text == "True";
    } else if (name.text == "None") {
      v.kind = Kind::None;
    } else {
      fail(name, "'" + name.text + "' is not defined (assign it first: " + name.text +
                     " = torch.randn(...))");
    }
    return v;
  }

  // ---- expressions (Python's precedence) ----
  struct Depth {
    TorchParser& p;
    Depth(TorchParser& parser, const Token& at) : p(parser) {
      if (++p.depth_ > kMaxDepth)
        p.fail(at, "the program nests more than " + std::to_string(kMaxDepth) + " levels deep");
    }
    ~Depth() { --p.depth_; }
  };

  Value expression() {
    Depth d(*this, peek());
    Value v = term();
    while (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
      const Token op = next();
      Value rhs = term();
      v = arithmetic(op, v, rhs);
    }
    return v;
  }

  Value term() {
    Value v = unary();
    while (peek().kind == Tok::Star || peek().kind == Tok::At || peek().kind == Tok::Slash) {
      const Token op = next();
      Value rhs = unary();
      v = arithmetic(op, v, rhs);
    }
    return v;
  }

  Value unary() {
    Depth d(*this, peek());
    if (peek().kind == Tok::Minus || peek().kind == Tok::Plus) {
      const Token op = next();
      Value v = unary();
      if (op.kind == Tok::Plus) return v;
      if (v.kind == Kind::Number) {
        v.number = -v.number;
        v.text = "-" + v.text;
        v.column = op.column;
        return v;
      }
      Value minus_one;
      minus_one.kind = Kind::Number;
      minus_one.number = -1;
      minus_one.integer = true;
      minus_one.text = "-1";
      Token star = op;
      star.kind = Tok::Star;
      star.text = "*";
      return arithmetic(star, v, minus_one);
    }
    return power();
  }

  Value power() {
    Value v = postfix();
    if (peek().kind == Tok::StarStar) {
      const Token op = next();
      Value rhs = unary();  // right-associative, binds tighter than a unary minus on its left
      return arithmetic(op, v, rhs);
    }
    return v;
  }

  Value postfix() {
    Value v = primary();
    while (true) {
      if (peek().kind == Tok::Dot) {
        next();
        v = attribute(v, expect(Tok::Ident, "a name after '.'"));
      } else if (peek().kind == Tok::LParen) {
        const Token& open = next();
        Args args = arguments(open);
        v = call(v, open, args);
      } else if (peek().kind == Tok::LBracket) {
        fail(peek(), "indexing and slicing are not part of the subset; " + std::string(kSubset));
      } else {
        return v;
      }
    }
  }

  Value primary() {
    const Token& t = next();
    switch (t.kind) {
      case Tok::Number: {
        Value v;
        v.kind = Kind::Number;
        v.column = t.column;
        v.text = t.text;
        v.integer = t.integer;
        v.number = std::strtod(t.text.c_str(), nullptr);
        return v;
      }
      case Tok::String: {
        Value v;
        v.kind = Kind::String;
        v.column = t.column;
        v.text = t.text;
        return v;
      }
      case Tok::Ident: {
        static const std::set<std::string> keywords = {
            "import", "from", "as", "def", "lambda", "for", "while", "if", "else", "return",
            "with", "class", "and", "or", "not", "in", "is"};
        if (keywords.count(t.text))
          fail(t, "'" + t.text + "' is not part of the subset (a program is assignments and "
                  "one result expression); " + kSubset);
        return variable(t);
      }
      case Tok::LParen:
      case Tok::LBracket: {
        const Tok close = t.kind == Tok::LParen ? Tok::RParen : Tok::RBracket;
        std::vector<Value> items;
        bool comma = false;
        while (peek().kind != close) {
          unclosed(t);
          items.push_back(expression());
          if (peek().kind == Tok::Comma) {
            next();
            comma = true;
          } else if (peek().kind != close) {
            unclosed(t);
            fail(peek(), std::string("expected ',' or '") + (close == Tok::RParen ? ")" : "]") +
                             "', found " + describe(peek()));
          }
        }
        next();
        if (t.kind == Tok::LParen && items.size() == 1 && !comma) return items[0];
        Value v;
        v.kind = Kind::Tuple;
        v.column = t.column;
        v.items = std::move(items);
        return v;
      }
      default:
        fail(t, "expected an expression, found " + describe(t) + "; " + kSubset);
    }
  }

  // At the end of the text inside brackets: the bracket that opened them is never closed.
  void unclosed(const Token& open) {
    if (peek().kind == Tok::End)
      fail(open, "'" + open.text + "' is never closed (the text ends inside it)");
  }

  Args arguments(const Token& open) {
    Args a;
    while (peek().kind != Tok::RParen) {
      unclosed(open);
      if (peek().kind == Tok::Ident && peek(1).kind == Tok::Equals) {
        const Token key = next();
        next();
        for (const auto& [k, v] : a.keywords)
          if (k.text == key.text) fail(key, key.text + "= is given twice");
        a.keywords.emplace_back(key, expression());
      } else {
        if (!a.keywords.empty())
          fail(peek(), "a positional argument after a keyword argument (Python refuses it too)");
        a.positional.push_back(expression());
      }
      if (peek().kind == Tok::Comma) next();
      else if (peek().kind != Tok::RParen) {
        unclosed(open);
        fail(peek(), "expected ',' or ')' in the argument list, found " + describe(peek()));
      }
    }
    next();
    return a;
  }

  // ---- attributes and calls ----
  Value attribute(const Value& base, const Token& name) {
    if (base.kind == Kind::Module) {
      const std::string path = base.text + "." + name.text;
      Value v;
      v.column = base.column;
      v.text = path;
      if (modules().count(path)) {
        v.kind = Kind::Module;
      } else if (auto it = dtypes().find(path); it != dtypes().end()) {
        v.kind = Kind::DType;
        v.dtype = it->second;
      } else if (functions().count(path)) {
        v.kind = Kind::Function;
      } else if (path == "torch.float64" || path == "torch.double" || path.rfind("torch.int", 0) == 0 ||
                 path.rfind("torch.uint", 0) == 0 || path.rfind("torch.float8", 0) == 0 ||
                 path == "torch.long" || path == "torch.bool") {
        fail(name, path + " is not a dtype Loom computes with; its inputs are torch.float32 "
                          "(float), torch.float16 (half) and torch.bfloat16");
      } else {
        fail(name, path + " is not part of the subset; " + kSubset);
      }
      return v;
    }
    if (is_tensor(base)) {
      const std::string& m = name.text;
      if (m == "T" || m == "mT") return transpose(base, name.column, m, {});
      if (m == "t" || m == "transpose") {
        Value v;
        v.kind = Kind::Method;
        v.column = name.column;
        v.text = m;
        v.items = {base};
        return v;
      }
      fail(name, "tensor attribute ." + m + " is not part of the subset; tensors take .t(), "
                 ".T, .mT and .transpose(-2, -1) (read transposed), and the functions of the "
                 "subset: " + kSubset);
    }
    fail(name, "." + name.text + " on " + what(base) + ": attributes are taken of torch, F "
               "and tensors only");
  }

  Value call(const Value& callee, const Token& open, const Args& a) {
    if (callee.kind == Kind::Method) {
      no_keywords(a, "." + callee.text + "()");
      return transpose(callee.items[0], callee.column, callee.text, a.positional);
    }
    if (callee.kind != Kind::Function) fail(open, what(callee) + " is not a function");
    const std::string& f = callee.text;
    const std::string fshort = f.rfind("torch.nn.functional.", 0) == 0
                                   ? "F." + f.substr(20)
                                   : f;
    const int at = callee.column;
    if (f == "torch.randn" || f == "torch.rand" || f == "torch.empty" || f == "torch.ones" ||
        f == "torch.zeros")
      return create(fshort, at, a);
    if (f == "torch.t" || f == "torch.transpose") {
      no_keywords(a, fshort);
      if (a.positional.empty()) fail(at, fshort + " takes a tensor");
      std::vector<Value> rest(a.positional.begin() + 1, a.positional.end());
      return transpose(a.positional[0], at, f == "torch.t" ? "t" : "transpose", rest);
    }
    if (f == "torch.matmul" || f == "torch.mm" || f == "torch.bmm") {
      no_keywords(a, fshort);
      arity(a, at, 2, 2, fshort, "two tensors");
      TensorRef x = tensor(a.positional[0], fshort), y = tensor(a.positional[1], fshort);
      if (f == "torch.mm") {
        for (const Value* v : {&a.positional[0], &a.positional[1]})
          if (rank(*v) != 2)
            fail(v->column, "torch.mm multiplies 2-D tensors, and this operand has rank " +
                                std::to_string(rank(*v)) + "; use torch.matmul or torch.bmm");
      }
      return computed(at, [&] {
        return f == "torch.bmm" ? builder_.bmm(x, y) : builder_.matmul(x, y);
      });
    }
    if (f == "torch.nn.functional.linear") {
      Value bias;
      take_keywords(a, fshort, {{"bias", &bias}});
      arity(a, at, 2, 3, fshort, "input and weight, and an optional bias");
      if (a.positional.size() == 3) {
        if (bias.kind != Kind::None || !a.keywords.empty())
          fail(a.keywords[0].first, fshort + ": the bias is given twice (by position and bias=)");
        bias = a.positional[2];
      }
      TensorRef x = tensor(a.positional[0], fshort), w = tensor(a.positional[1], fshort);
      std::optional<TensorRef> b;
      if (bias.kind != Kind::None) b = tensor(bias, "the bias of F.linear");
      return computed(at, [&] { return builder_.linear(x, w, b); });
    }
    if (f == "torch.relu" || f == "torch.nn.functional.relu" || f == "torch.nn.functional.silu") {
      no_keywords(a, fshort);
      arity(a, at, 1, 1, fshort, "one tensor");
      TensorRef x = tensor(a.positional[0], fshort);
      return computed(at, [&] {
        return f == "torch.nn.functional.silu" ? builder_.silu(x) : builder_.relu(x);
      });
    }
    if (f == "torch.nn.functional.gelu") {
      Value approximate;
      take_keywords(a, fshort, {{"approximate", &approximate}});
      arity(a, at, 1, 1, fshort, "one tensor and an optional approximate=");
      if (approximate.kind != Kind::None) {
        if (approximate.kind != Kind::String ||
            (approximate.text != "none" && approximate.text != "tanh"))
          fail(approximate.column, "approximate= takes 'none' or 'tanh' (PyTorch's values)");
      }
      const bool tanh_form = approximate.kind == Kind::String && approximate.text == "tanh";
      TensorRef x = tensor(a.positional[0], fshort);
      return computed(at, [&] { return tanh_form ? builder_.gelu_tanh(x) : builder_.gelu(x); });
    }
    if (f == "torch.nn.functional.scaled_dot_product_attention") return attention(fshort, at, a);
    fail(at, f + " is not part of the subset; " + kSubset);
  }

  void no_keywords(const Args& a, const std::string& f) {
    if (!a.keywords.empty())
      fail(a.keywords[0].first, f + " takes no keyword argument " + a.keywords[0].first.text + "=");
  }
  // `at`: the callee, where a missing argument is reported; an extra one is pointed at.
  void arity(const Args& a, int at, size_t lo, size_t hi, const std::string& f,
             const std::string& usage) {
    if (a.positional.size() < lo || a.positional.size() > hi)
      fail(a.positional.size() > hi ? a.positional[hi].column : at,
           f + " takes " + usage + ", got " + std::to_string(a.positional.size()) +
               " positional argument" + (a.positional.size() == 1 ? "" : "s"));
  }
  // The keyword arguments a function takes, by name, each stored into its slot.
  void take_keywords(const Args& a, const std::string& f,
                     const std::vector<std::pair<const char*, Value*>>& known) {
    for (const auto& [key, v] : a.keywords) {
      bool found = false;
      for (const auto& [name, slot] : known)
        if (key.text == name) {
          *slot = v;
          found = true;
        }
      if (!found) {
        std::string list;
        for (const auto& [name, slot] : known) list += (list.empty() ? "" : ", ") + std::string(name) + "=";
        fail(key, f + " has no keyword argument " + key.text + "= in the subset (it takes " +
                      list + ")");
      }
    }
  }

  // torch.randn(64, 32, dtype=torch.float16, device='cuda') and friends.
  Value create(const std::string& f, int at, const Args& a) {
    Value dtype, device, requires_grad, size;
    take_keywords(a, f, {{"dtype", &dtype}, {"device", &device}, {"requires_grad", &requires_grad},
                         {"size", &size}});
    std::vector<Value> dims = a.positional;
    if (size.kind != Kind::None) {
      if (!dims.empty()) fail(size.column, f + ": the shape is given both by position and by size=");
      dims = {size};
    }
    if (dims.size() == 1 && dims[0].kind == Kind::Tuple) dims = dims[0].items;
    if (dims.empty()) fail(at, f + " needs a shape: " + f + "(M, K) or " + f + "((M, K))");
    Storage s;
    s.column = at;
    for (const Value& d : dims) {
      int64_t n = 0;
      const auto r = std::from_chars(d.text.data(), d.text.data() + d.text.size(), n);
      if (d.kind != Kind::Number || !d.integer) {
        fail(d.column, f + ": a dimension must be a positive integer, found " + what(d));
      }
      if (r.ec == std::errc::result_out_of_range)
        fail(d.column, f + ": dimension " + d.text + " is too large");
      if (r.ec != std::errc() || r.ptr != d.text.data() + d.text.size() || n <= 0) {
        // A computed integer (2*M) carries no text to reparse: take its value.
        if (d.number >= 1 && d.number <= 9.0e15 && d.number == std::floor(d.number)) {
          n = int64_t(d.number);
        } else {
          fail(d.column, f + ": a dimension must be a positive integer, found " + d.text);
        }
      }
      s.shape.push_back(n);
    }
    if (dtype.kind != Kind::None) {
      if (dtype.kind != Kind::DType)
        fail(dtype.column, f + ": dtype= takes torch.float32 (float), torch.float16 (half) or "
                               "torch.bfloat16, found " + what(dtype));
      s.dtype = dtype.dtype;
    }
    if (device.kind != Kind::None) {
      const std::string& d = device.text;
      bool ok = device.kind == Kind::String && (d == "cuda" || d == "cpu");
      if (device.kind == Kind::String && d.rfind("cuda:", 0) == 0 && d.size() > 5)
        ok = std::all_of(d.begin() + 5, d.end(), [](char c) { return digit(c); });
      if (!ok)
        fail(device.column, f + ": device= takes 'cuda', 'cuda:N' or 'cpu' (Loom ignores it: it "
                                "runs on the GPU `loom run --device` picks), found " + what(device));
    }
    if (requires_grad.kind != Kind::None && requires_grad.kind != Kind::Bool)
      fail(requires_grad.column, f + ": requires_grad= takes True or False");
    storages_.push_back(std::move(s));
    Value v;
    v.kind = Kind::Input;
    v.column = at;
    v.storage = int(storages_.size()) - 1;
    return v;
  }

  size_t rank(const Value& v) {
    if (v.kind == Kind::Input) return storages_[size_t(v.storage)].shape.size();
    return 0;
  }

  // .t(), .T, .mT, .transpose(d0, d1): the input read transposed (its last two dims).
  Value transpose(const Value& v, int at, const std::string& how,
                  const std::vector<Value>& dims) {
    const std::string spelled = how == "T" || how == "mT" ? "." + how : "." + how + "()";
    if (v.kind == Kind::Tensor)
      fail(at, spelled + " of a computed tensor: Loom reads input tensors transposed (an "
                         "operand of matmul or linear), it does not transpose results");
    if (v.kind != Kind::Input) fail(at, spelled + " takes a tensor, found " + what(v));
    const size_t r = rank(v);
    Value out = v;
    out.transposed = !v.transposed;
    if (how == "t") {
      if (!dims.empty()) fail(dims[0].column, ".t() takes no arguments");
      if (r > 2) fail(at, ".t() takes a tensor of at most 2 dimensions (PyTorch's rule), and this "
                          "one has " + std::to_string(r) + "; write .transpose(-2, -1) or .mT");
      if (r < 2) return v;  // a 1-D tensor's .t() is itself
      return out;
    }
    if (how == "T") {
      if (r != 2)
        fail(at, ".T of a " + std::to_string(r) + "-D tensor reverses all its dimensions; Loom "
                 "transposes the last two: write .mT or .transpose(-2, -1)");
      return out;
    }
    if (how == "mT") {
      if (r < 2) fail(at, ".mT needs at least 2 dimensions, and this tensor has " + std::to_string(r));
      return out;
    }
    if (dims.size() != 2) fail(at, ".transpose takes two dimensions: .transpose(-2, -1)");
    int64_t d[2];
    for (int i = 0; i < 2; ++i) {
      const Value& x = dims[size_t(i)];
      if (x.kind != Kind::Number || !x.integer)
        fail(x.column, ".transpose takes integer dimensions, found " + what(x));
      d[i] = int64_t(x.number);
      if (d[i] < 0) d[i] += int64_t(r);
      if (d[i] < 0 || d[i] >= int64_t(r))
        fail(x.column, "dimension " + x.text + " is out of range for a " + std::to_string(r) +
                           "-D tensor");
    }
    if (d[0] == d[1]) return v;
    if (std::min(d[0], d[1]) != int64_t(r) - 2 || std::max(d[0], d[1]) != int64_t(r) - 1)
      fail(at, ".transpose(" + dims[0].text + ", " + dims[1].text + ") swaps dimensions Loom "
               "does not: it reads an input with its last two dimensions swapped, "
               ".transpose(-2, -1)");
    return out;
  }

  // F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
  //                                is_causal=False, scale=None, enable_gqa=False)
  Value attention(const std::string& f, int at, const Args& a) {
    Value mask, dropout, causal, scale, gqa;
    take_keywords(a, f, {{"attn_mask", &mask}, {"dropout_p", &dropout}, {"is_causal", &causal},
                         {"scale", &scale}, {"enable_gqa", &gqa}});
    arity(a, at, 3, 3, f, "query, key and value (the options by keyword: is_causal=, scale=, ...)");
    if (mask.kind != Kind::None)
      fail(mask.column, f + ": attn_mask= must be None; Loom's masks are is_causal=True or none");
    if (dropout.kind != Kind::None && !(dropout.kind == Kind::Number && dropout.number == 0))
      fail(dropout.column, f + ": dropout_p= must be 0 (Loom computes inference attention)");
    for (const Value* b : {&causal, &gqa})
      if (b->kind != Kind::None && b->kind != Kind::Bool)
        fail(b->column, f + ": is_causal= and enable_gqa= take True or False, found " + what(*b));
    AttentionOptions opt;
    // PyTorch's is_causal aligns the mask top-left (query i sees keys 0..i).
    if (causal.truth) opt.causal = Causal::TopLeft;
    if (scale.kind != Kind::None) {
      if (scale.kind != Kind::Number) fail(scale.column, f + ": scale= takes a number or None");
      opt.scale = scale.number;
    }
    const Value &q = a.positional[0], &k = a.positional[1];
    if (q.kind == Kind::Input && k.kind == Kind::Input && rank(q) == 4 && rank(k) == 4 &&
        !gqa.truth) {
      const int64_t hq = storages_[size_t(q.storage)].shape[1];
      const int64_t hkv = storages_[size_t(k.storage)].shape[1];
      if (hq != hkv)
        fail(at, f + ": the query has " + std::to_string(hq) + " heads and the key " +
                     std::to_string(hkv) + "; PyTorch needs enable_gqa=True for grouped-query "
                     "attention, and so does Loom");
    }
    TensorRef tq = tensor(q, f), tk = tensor(k, f), tv = tensor(a.positional[2], f);
    return computed(at, [&] { return builder_.attention(tq, tk, tv, opt); });
  }

  // ---- operators ----
  Value arithmetic(const Token& op, const Value& x, const Value& y) {
    const std::string sym = op.kind == Tok::Plus    ? "+"
                            : op.kind == Tok::Minus ? "-"
                            : op.kind == Tok::Star  ? "*"
                            : op.kind == Tok::At    ? "@"
                            : op.kind == Tok::Slash ? "/"
                                                    : "**";
    if (x.kind == Kind::Number && y.kind == Kind::Number) return numbers(op, sym, x, y);
    if (op.kind == Tok::At) {
      TensorRef a = tensor(x, "@"), b = tensor(y, "@");
      return computed(op.column, [&] { return builder_.matmul(a, b); });
    }
    if (!is_tensor(x) && !is_tensor(y))
      fail(op, "'" + sym + "' between " + what(x) + " and " + what(y) + " is not part of the subset");
    if (op.kind == Tok::Slash)
      fail(op, "division of a tensor is not one of Loom's epilogue ops: multiply by the "
               "reciprocal (x * 0.125), or give attention its scale=");
    if (op.kind == Tok::StarStar) fail(op, "powers of a tensor are not one of Loom's epilogue ops");
    const Value* t = is_tensor(x) ? &x : &y;
    const Value* o = is_tensor(x) ? &y : &x;
    if (o->kind != Kind::Number && !is_tensor(*o))
      fail(op, "'" + sym + "' between a tensor and " + what(*o) + "; the other operand must be a "
               "tensor or a number");
    if (o->kind == Kind::Number) {
      TensorRef a = tensor(*t, sym);
      const double n = o->number;
      if (const std::string why = f32_constant_problem(n); !why.empty())
        fail(o->column, "number " + o->text + " " + why + "; the epilogue computes in f32");
      if (op.kind == Tok::Plus) return computed(op.column, [&] { return builder_.add(a, n); });
      if (op.kind == Tok::Star) return computed(op.column, [&] { return builder_.mul(a, n); });
      if (t == &x) return computed(op.column, [&] { return builder_.sub(a, n); });
      // n - t = (-1 * t) + n: negation is exact, so this is the subtraction's value.
      return computed(op.column, [&] { return builder_.add(builder_.mul(a, -1.0), n); });
    }
    TensorRef a = tensor(x, sym), b = tensor(y, sym);
    if (op.kind == Tok::Plus) return computed(op.column, [&] { return builder_.add(a, b); });
    if (op.kind == Tok::Star) return computed(op.column, [&] { return builder_.mul(a, b); });
    return computed(op.column, [&] { return builder_.sub(a, b); });
  }

  Value numbers(const Token& op, const std::string& sym, const Value& x, const Value& y) {
    double r = 0;
    switch (op.kind) {
      case Tok::Plus: r = x.number + y.number; break;
      case Tok::Minus: r = x.number - y.number; break;
      case Tok::Star: r = x.number * y.number; break;
      case Tok::Slash:
        if (y.number == 0) fail(op, "division by zero");
        r = x.number / y.number;
        break;
      case Tok::StarStar: r = std::pow(x.number, y.number); break;
      default: fail(op, "'" + sym + "' takes tensors, not numbers");
    }
    if (!std::isfinite(r)) fail(op, x.text + " " + sym + " " + y.text + " is not a finite number");
    Value v;
    v.kind = Kind::Number;
    v.column = x.column;
    v.number = r;
    v.integer = x.integer && y.integer && op.kind != Tok::Slash &&
                (op.kind != Tok::StarStar || y.number >= 0) && std::fabs(r) < 9.0e15;
    v.text = v.integer ? std::to_string(int64_t(r)) : shortest_text(r);
    return v;
  }

  // ---- tensors ----
  // The graph value of a tensor operand: an input is declared to the builder the first
  // time an op uses it (so an unused torch.randn costs nothing), named by its variable or
  // generated.
  TensorRef tensor(const Value& v, const std::string& op) {
    if (v.kind == Kind::Tensor) return v.ref;
    if (v.kind != Kind::Input) fail(v.column, op + ": expected a tensor, found " + what(v));
    Storage& s = storages_[size_t(v.storage)];
    if (s.name.empty()) s.name = generated_name();
    std::vector<Dim> shape;
    for (int64_t n : s.shape) shape.push_back(dim(n));
    return with_column(s.column, [&] { return builder_.input(s.name, shape, s.dtype, v.transposed); });
  }

  std::string generated_name() {
    auto taken = [&](const std::string& n) {
      if (identifiers_.count(n)) return true;
      for (const Storage& s : storages_)
        if (s.name == n) return true;
      return false;
    };
    for (int round = 0;; ++round)
      for (char c = 'A'; c <= 'Z'; ++c) {
        std::string n(1, c);
        if (round) n += std::to_string(round);
        if (!taken(n)) return n;
      }
  }

  template <class F>
  Value computed(int column, F&& f) {
    Value v;
    v.kind = Kind::Tensor;
    v.column = column;
    v.ref = with_column(column, std::forward<F>(f));
    return v;
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::set<std::string> identifiers_;
  std::map<std::string, Value> variables_;
  std::vector<Storage> storages_;
  GraphBuilder builder_;
};

}  // namespace

bool looks_like_torch_code(std::string_view s) {
  bool first = true;
  for (size_t i = 0; i < s.size();) {
    if (!ident_start(s[i]) || (i > 0 && ident_char(s[i - 1]))) {
      if (!std::isspace((unsigned char)s[i])) first = false;
      ++i;
      continue;
    }
    size_t e = i;
    while (e < s.size() && ident_char(s[e])) ++e;
    const std::string_view word = s.substr(i, e - i);
    if (first && (word == "import" || word == "from")) return true;
    first = false;
    size_t j = e;
    while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
    if ((word == "torch" || word == "F") && j < s.size() && s[j] == '.') return true;
    i = e;
  }
  return false;
}

Graph parse_torch_code(std::string_view text) { return TorchParser(text).parse(); }

}  // namespace loom
