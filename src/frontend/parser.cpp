#include "frontend/parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "frontend/diagnostic.h"
#include "frontend/lexer.h"
#include "frontend/torch_parser.h"
#include "ir/f32_constant.h"
#include "loom/builder.h"

namespace loom {
namespace {

const char* const kFunctions =
    "matmul, bmm, linear, relu, gelu, gelu_tanh, silu, add, sub, mul, max, attention";
const char* const kDtypes = "f32, tf32, f16, bf16, i32";
constexpr int kMaxDepth = 256;

bool is_contraction(const std::string& f) {
  return f == "matmul" || f == "bmm" || f == "linear";
}
bool is_unary(const std::string& f) {
  return f == "relu" || f == "gelu" || f == "gelu_tanh" || f == "silu";
}
bool is_binary(const std::string& f) {
  return f == "add" || f == "sub" || f == "mul" || f == "max";
}

// The keyword arguments of one call, each checked where it is written.
struct Keywords {
  std::optional<DType> out;         // matmul, bmm, linear
  AttentionOptions attention;       // attention: causal=, scale=, lse=
  std::vector<std::string> given;   // names seen, for "given twice"
};

// A parsed argument: a tensor-valued expression or a number, with where it starts.
struct Value {
  std::optional<TensorRef> tensor;
  double number = 0.0;
  int column = 0;
  std::string text;  // the number as written, for messages
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), tokens_(lex(text)) {}

  Graph parse() {
    Value v = expr();
    if (peek().kind != TokenKind::End) {
      std::string hint = peek().kind == TokenKind::RParen ? " (unbalanced parentheses?)" : "";
      fail(peek(), "unexpected " + describe(peek()) + " after the end of the expression" +
                       hint);
    }
    if (!v.tensor) {
      fail(v.column, "the expression is just the number " + v.text +
                         "; Loom lowers one contraction per expression, e.g. "
                         "matmul(A[M,K]:f16, B[K,N]:f16)");
    }
    return with_column(out_pitch_.empty() ? v.column : out_pitch_column_,
                       [&] { return builder_.build(*v.tensor, out_pitch_); });
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }

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

  DType dtype(const Token& t, const std::string& what) {
    if (t.kind != TokenKind::Ident) {
      fail(t, "expected a dtype (" + std::string(kDtypes) + ") " + what + ", found " +
                  describe(t));
    }
    std::optional<DType> d = parse_dtype(t.text);
    if (!d || *d == DType::F64) {
      fail(t, "unknown dtype " + describe(t) + " " + what + "; dtypes are " + kDtypes);
    }
    return *d;
  }

  Value expr() {
    const Token& t = peek();
    if (t.kind == TokenKind::Number) {
      next();
      Value v;
      v.column = t.column;
      v.text = t.text;
      v.number = std::strtod(t.text.c_str(), nullptr);
      if (const std::string why = f32_constant_problem(v.number); !why.empty())
        fail(t, "number " + t.text + " " + why + "; the epilogue computes in f32");
      return v;
    }
    if (t.kind == TokenKind::Ident && peek(1).kind == TokenKind::LParen) return call();
    if (t.kind == TokenKind::Ident && peek(1).kind == TokenKind::LBracket) return tensor();
    if (t.kind == TokenKind::Ident) {
      fail(peek(1), "expected '[' (a tensor is " + t.text + "[dims]:dtype) or '(' (a call " +
                        t.text + "(...)) after " + t.text + ", found " + describe(peek(1)));
    }
    fail(t, "expected an expression (a call like relu(...), a tensor like A[M,K]:f16, or a "
            "number), found " + describe(t));
  }

  Dim dimension(const std::string& tensor) {
    const Token& t = next();
    if (t.kind == TokenKind::Ident) return dim(t.text);
    if (t.kind == TokenKind::Number) {
      int64_t value = 0;
      auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), value);
      bool whole = t.is_integer && r.ec == std::errc() && r.ptr == t.text.data() + t.text.size();
      if (t.is_integer && r.ec == std::errc::result_out_of_range) {
        fail(t, "dimension " + t.text + " of " + tensor + " is too large");
      }
      if (!whole || value <= 0) {
        fail(t, "dimension of " + tensor + " must be a positive integer or a symbol, found " +
                    t.text);
      }
      return dim(value);
    }
    fail(t, "expected a dimension (a positive integer or a symbol like M) in the shape of " +
                tensor + ", found " + describe(t));
  }

  // One stride after '|' in a tensor's shape: a positive integer number of elements.
  int64_t stride(const std::string& tensor) {
    const Token& t = next();
    if (t.kind == TokenKind::Number) {
      int64_t value = 0;
      auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), value);
      bool whole = t.is_integer && r.ec == std::errc() && r.ptr == t.text.data() + t.text.size();
      if (t.is_integer && r.ec == std::errc::result_out_of_range)
        fail(t, "stride " + t.text + " of " + tensor + " is too large");
      if (whole && value > 0) return value;
      fail(t, "a stride of " + tensor + " must be a positive integer number of elements, found " +
                  t.text);
    }
    if (t.kind == TokenKind::Ident)
      fail(t, "a stride of " + tensor + " must be a number of elements, found the symbol " +
                  t.text + " (strides after '|' are numbers: the row pitch of the buffer, e.g. " +
                  tensor + "[M,K|1056])");
    fail(t, "expected a stride (a positive integer: the row pitch, e.g. " + tensor +
                "[M,K|1056]) after '|' in the shape of " + tensor + ", found " + describe(t));
  }

  Value tensor() {
    const Token& name = next();
    next();  // '['
    std::vector<Dim> shape;
    std::vector<int64_t> pitch;
    int pitch_column = 0;
    while (true) {
      shape.push_back(dimension(name.text));
      const Token& t = next();
      if (t.kind == TokenKind::RBracket) break;
      if (t.kind == TokenKind::Bar) {
        pitch_column = peek().column;
        while (true) {
          pitch.push_back(stride(name.text));
          const Token& u = next();
          if (u.kind == TokenKind::RBracket) break;
          if (u.kind != TokenKind::Comma)
            fail(u, "expected ']' to close the strides of " + name.text + ", found " + describe(u));
        }
        break;
      }
      if (t.kind != TokenKind::Comma) {
        fail(t, "expected ']' to close the shape of " + name.text + " (or '|' and its row "
                "pitch, e.g. " + name.text + "[M,K|1056]), found " + describe(t));
      }
    }
    const Token& colon = next();
    if (colon.kind != TokenKind::Colon) {
      fail(colon, "expected ':' and a dtype after the shape of " + name.text + " (e.g. " +
                      name.text + "[...]:f16), found " + describe(colon));
    }
    DType type = dtype(next(), "for " + name.text);
    bool transposed = false;
    if (peek().kind == TokenKind::Dot) {
      next();
      const Token& t = next();
      if (t.kind != TokenKind::Ident || t.text != "T") {
        fail(t, "expected 'T' after '.' (write .T for an operand stored transposed), found " +
                    describe(t));
      }
      transposed = true;
    }
    Value v;
    v.column = name.column;
    v.tensor = with_column(pitch.empty() ? name.column : pitch_column, [&] {
      return builder_.input(name.text, shape, type, transposed, pitch);
    });
    return v;
  }

  Value call() {
    const Token& name = next();
    const std::string& f = name.text;
    if (!is_contraction(f) && f != "attention" && !is_unary(f) && !is_binary(f)) {
      fail(name, "unknown function '" + f + "'; known functions: " + kFunctions);
    }
    // Bounds the recursion so hostile input fails with a message, not a stack overflow;
    // a real epilogue chain is a handful of calls.
    if (++depth_ > kMaxDepth) {
      fail(name, "the expression nests more than " + std::to_string(kMaxDepth) + " calls deep");
    }
    next();  // '('
    std::vector<Value> args;
    Keywords kw;
    if (peek().kind != TokenKind::RParen) {
      while (true) {
        if (peek().kind == TokenKind::Ident && peek(1).kind == TokenKind::Equals) {
          keyword(f, kw);
        } else {
          if (!kw.given.empty()) {
            fail(peek(), "operand after a keyword argument in the call to " + f +
                             "; write the operands first, then the keywords");
          }
          args.push_back(expr());
        }
        const Token& t = next();
        if (t.kind == TokenKind::RParen) break;
        if (t.kind != TokenKind::Comma) {
          fail(t, "expected ',' or ')' in the call to " + f + ", found " + describe(t));
        }
      }
    } else {
      next();
    }
    Value v;
    v.column = name.column;
    v.tensor = with_column(name.column, [&] { return build(name, args, kw); });
    --depth_;
    return v;
  }

  void keyword(const std::string& f, Keywords& kw) {
    const Token& key = next();
    next();  // '='
    if (f == "attention") return attention_keyword(key, kw);
    if (!is_contraction(f)) {
      fail(key, f + " takes no keyword arguments (out= is for matmul, bmm and linear; "
                    "causal=, scale= and lse= for attention)");
    }
    if (key.text == "out_pitch") {
      // The program's output is a view into a larger buffer: its row pitch.
      if (!out_pitch_.empty()) fail(key, "out_pitch= is given twice");
      out_pitch_column_ = peek().column;
      out_pitch_ = {stride("the output (out_pitch=)")};
      kw.given.push_back(key.text);
      return;
    }
    if (key.text != "out") {
      fail(key, "unknown keyword argument '" + key.text + "' for " + f +
                    "; the only one is out=<dtype> (and out_pitch=<elements> for an output "
                    "that is a view into a larger buffer)");
    }
    if (kw.out) fail(key, "out= is given twice in the call to " + f);
    kw.given.push_back(key.text);
    const Token& value = next();
    if (value.kind != TokenKind::Ident) {
      fail(value, "expected a dtype after out= (f32, f16 or bf16), found " + describe(value));
    }
    DType d = dtype(value, "in out=");
    // The builder rejects these too, but from here the caret can point at the dtype.
    if (d == DType::I32) {
      fail(value, f + ": out=i32 is not allowed: i32 holds indices (attention's block_table= "
                      "and seqlens_k=), not results; use out=f32, f16 or bf16");
    }
    if (d == DType::TF32) {
      fail(value, f + ": out=tf32 is not allowed: tf32 is an input-only type (its values "
                      "are stored as f32); use out=f32");
    }
    kw.out = d;
  }

  void attention_keyword(const Token& key, Keywords& kw) {
    const std::string& k = key.text;
    if (k != "causal" && k != "scale" && k != "lse" && k != "block_table" && k != "seqlens_k" &&
        k != "cu_seqlens_q" && k != "cu_seqlens_k" && k != "max_seqlen_q") {
      fail(key, "unknown keyword argument '" + k + "' for attention; its keywords are "
                "causal=false|true|top_left, scale=<number>, lse=false|true, for paged "
                "KV block_table=BT[B,maxp]:i32 with seqlens_k=L[B]:i32, and for packed "
                "sequences cu_seqlens_q=CQ[B+1]:i32, cu_seqlens_k=CK[B+1]:i32, max_seqlen_q=<n>");
    }
    if (std::find(kw.given.begin(), kw.given.end(), k) != kw.given.end())
      fail(key, k + "= is given twice in the call to attention");
    kw.given.push_back(k);
    AttentionOptions& o = kw.attention;
    if (k == "block_table" || k == "seqlens_k" || k == "cu_seqlens_q" || k == "cu_seqlens_k") {
      // paged KV and varlen: a tensor operand
      const Value v = expr();
      if (!v.tensor)
        fail(v.column, k + "= takes a tensor (" +
                           (k == "block_table" ? "BT[B,maxp]:i32" : k == "seqlens_k" ? "L[B]:i32"
                                                                    : "[B+1]:i32") +
                           "), found the number " + v.text);
      (k == "block_table"    ? o.block_table
       : k == "seqlens_k"    ? o.seqlens_k
       : k == "cu_seqlens_q" ? o.cu_seqlens_q
                             : o.cu_seqlens_k) = *v.tensor;
      return;
    }
    if (k == "max_seqlen_q") {
      const Token& value = next();
      const double x = value.kind == TokenKind::Number ? std::strtod(value.text.c_str(), nullptr) : 0;
      if (value.kind != TokenKind::Number || !(x >= 1) || x != std::floor(x) || x > 1e9)
        fail(value, "max_seqlen_q= takes a positive integer (the longest sequence's query "
                    "count), found " + describe(value));
      o.max_seqlen_q = int64_t(x);
      return;
    }
    const Token& value = next();
    if (k == "scale") {
      double v = value.kind == TokenKind::Number ? std::strtod(value.text.c_str(), nullptr) : 0;
      if (value.kind != TokenKind::Number || !std::isfinite(v) || v <= 0) {
        fail(value, "scale= takes a positive number (the factor of Q K^T; the default is "
                    "1/sqrt(D)), found " + describe(value));
      }
      if (const std::string why = attention_scale_problem(v); !why.empty())
        fail(value, "scale=" + value.text + " " + why);
      o.scale = v;
      return;
    }
    bool is_true = value.kind == TokenKind::Ident && value.text == "true";
    bool is_false = value.kind == TokenKind::Ident && value.text == "false";
    if (k == "lse") {
      if (!is_true && !is_false)
        fail(value, "lse= takes true or false (whether attention also writes the row "
                    "log-sum-exp), found " + describe(value));
      o.lse = is_true;
      return;
    }
    bool top_left = value.kind == TokenKind::Ident && value.text == "top_left";
    if (!is_true && !is_false && !top_left) {
      fail(value, "causal= takes false, true (the mask aligned bottom-right, as "
                  "FlashAttention) or top_left (PyTorch's is_causal), found " +
                      describe(value));
    }
    o.causal = is_true ? Causal::BottomRight : top_left ? Causal::TopLeft : Causal::None;
  }

  TensorRef tensor_arg(const std::string& f, const Value& v, const char* role) {
    if (!v.tensor) fail(v.column, f + ": operand " + role + " is the number " + v.text +
                                      ", but it must be a tensor");
    return *v.tensor;
  }

  TensorRef build(const Token& name, const std::vector<Value>& args, const Keywords& kw) {
    const std::string& f = name.text;
    const std::optional<DType>& out = kw.out;
    auto arity = [&](size_t lo, size_t hi, const char* usage) {
      if (args.size() < lo || args.size() > hi) {
        fail(name, f + " takes " + usage + ", got " + std::to_string(args.size()) +
                       " operand" + (args.size() == 1 ? "" : "s"));
      }
    };
    if (f == "matmul" || f == "bmm") {
      arity(2, 2, "two tensors (A, B) and an optional out=<dtype>");
      TensorRef a = tensor_arg(f, args[0], "A"), b = tensor_arg(f, args[1], "B");
      return f == "matmul" ? builder_.matmul(a, b, out) : builder_.bmm(a, b, out);
    }
    if (f == "linear") {
      arity(2, 3, "two or three tensors (X, W[, bias]) and an optional out=<dtype>");
      TensorRef x = tensor_arg(f, args[0], "X"), w = tensor_arg(f, args[1], "W");
      std::optional<TensorRef> bias;
      if (args.size() == 3) bias = tensor_arg(f, args[2], "bias");
      return builder_.linear(x, w, bias, out);
    }
    if (f == "attention") {
      arity(3, 3, "three tensors (Q, K, V) and optional causal=, scale=, lse=, block_table=, "
                  "seqlens_k=");
      TensorRef q = tensor_arg(f, args[0], "Q"), k = tensor_arg(f, args[1], "K"),
                v = tensor_arg(f, args[2], "V");
      return builder_.attention(q, k, v, kw.attention);
    }
    if (is_unary(f)) {
      arity(1, 1, "one operand");
      TensorRef x = tensor_arg(f, args[0], "x");
      if (f == "relu") return builder_.relu(x);
      if (f == "gelu") return builder_.gelu(x);
      if (f == "gelu_tanh") return builder_.gelu_tanh(x);
      return builder_.silu(x);
    }
    arity(2, 2, "two operands");
    Value x = args[0], y = args[1];
    if (!x.tensor && !y.tensor) {
      fail(name, f + ": both operands are numbers; one must be computed by a contraction");
    }
    if (!x.tensor) {
      // add, mul and max commute, so a leading number is the same op on swapped operands.
      if (f == "sub") {
        fail(x.column, "sub: a number may only be the second operand (sub(x, " + x.text +
                           ")); for " + x.text + " - x write add(mul(x, -1), " + x.text + ")");
      }
      std::swap(x, y);
    }
    if (y.tensor) {
      if (f == "add") return builder_.add(*x.tensor, *y.tensor);
      if (f == "sub") return builder_.sub(*x.tensor, *y.tensor);
      if (f == "mul") return builder_.mul(*x.tensor, *y.tensor);
      return builder_.max(*x.tensor, *y.tensor);
    }
    if (f == "add") return builder_.add(*x.tensor, y.number);
    if (f == "sub") return builder_.sub(*x.tensor, y.number);
    if (f == "mul") return builder_.mul(*x.tensor, y.number);
    return builder_.max(*x.tensor, y.number);
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<int64_t> out_pitch_;  // out_pitch=: the output's row pitch
  int out_pitch_column_ = 0;
  GraphBuilder builder_;
};

}  // namespace

Graph parse_expression(std::string_view text) {
  if (looks_like_torch_code(text)) return parse_torch_code(text);
  return Parser(text).parse();
}

}  // namespace loom
