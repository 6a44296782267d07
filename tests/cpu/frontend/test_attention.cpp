// attention in the expression language and the C++ builder: the keyword arguments, the
// graph node they make, and every shape/dtype/keyword error with the column it names.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "frontend/diagnostic.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "loom/builder.h"

namespace loom {
namespace {

const char* const kQKV = "Q[2,8,128,64]:bf16, K[2,2,96,64]:bf16, V[2,2,96,64]:bf16";

std::string call(const std::string& args, const std::string& kw = "") {
  return "attention(" + args + (kw.empty() ? "" : ", " + kw) + ")";
}

struct Failure {
  int column = 0;
  std::string message;
};

// Parses text that must fail with an ExprError whose caret sits under its column.
Failure fails(const std::string& text) {
  try {
    Graph g = parse_expression(text);
    ADD_FAILURE() << "parsed without error: " << text << "\n" << g.str();
  } catch (const ExprError& e) {
    std::string caret = std::string(2 + e.column() - 1, ' ') + "^";
    EXPECT_NE(std::string(e.what()).find("\n  " + text + "\n" + caret), std::string::npos)
        << e.what();
    return {e.column(), e.message()};
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an ExprError: " << e.what();
  }
  return {};
}

int column_of(const std::string& text, const std::string& needle) {
  size_t p = text.find(needle);
  EXPECT_NE(p, std::string::npos) << needle;
  return int(p) + 1;
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(AttentionParse, DefaultsAndNode) {
  Graph g = parse_expression(call(kQKV));
  ASSERT_EQ(g.nodes.size(), 4u);
  const Node& n = g.node(g.result());
  EXPECT_EQ(n.kind, OpKind::Attention);
  EXPECT_EQ(n.inputs, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(n.dtype, DType::BF16);
  EXPECT_EQ(n.attention.causal, Causal::None);
  EXPECT_DOUBLE_EQ(n.attention.scale, 0.125);  // 1/sqrt(64)
  EXPECT_FALSE(n.attention.lse);
  EXPECT_EQ(g.attention(), &n);
  EXPECT_EQ(g.str(),
            "%0 = input Q: bf16[2, 8, 128, 64]\n"
            "%1 = input K: bf16[2, 2, 96, 64]\n"
            "%2 = input V: bf16[2, 2, 96, 64]\n"
            "%3 = attention(%0, %1, %2, causal=false, scale=0.125): bf16[2, 8, 128, 64]\n");
}

TEST(AttentionParse, Keywords) {
  Graph g = parse_expression(call(kQKV, "causal=true, scale=0.088, lse=true"));
  const Node& n = g.node(g.result());
  EXPECT_EQ(n.attention.causal, Causal::BottomRight);
  EXPECT_DOUBLE_EQ(n.attention.scale, 0.088);
  EXPECT_TRUE(n.attention.lse);
  EXPECT_HAS(g.str(), "causal=true, scale=0.088, lse=true): bf16[2, 8, 128, 64] + lse: "
                      "f32[2, 8, 128]");
  g = parse_expression(call(kQKV, "lse=false, causal=top_left"));
  EXPECT_EQ(g.node(g.result()).attention.causal, Causal::TopLeft);
  EXPECT_FALSE(g.node(g.result()).attention.lse);
  g = parse_expression(call(kQKV, "causal=false, scale=1"));
  EXPECT_EQ(g.node(g.result()).attention.causal, Causal::None);
  EXPECT_DOUBLE_EQ(g.node(g.result()).attention.scale, 1.0);
}

TEST(AttentionParse, SymbolsMqaAndF16) {
  Graph g = parse_expression(
      "attention(Q[B,H,S,128]:f16, K[B,1,T,128]:f16, V[B,1,T,128]:f16, causal=true)");
  EXPECT_EQ(g.symbols(), (std::vector<std::string>{"B", "H", "S", "T"}));
  EXPECT_EQ(g.node(g.result()).dtype, DType::F16);
  EXPECT_DOUBLE_EQ(g.node(g.result()).attention.scale, 1.0 / std::sqrt(128.0));
  // Equal symbolic heads (MHA) and a symbolic D with an explicit scale.
  g = parse_expression("attention(Q[B,H,S,D]:bf16, K[B,H,T,D]:bf16, V[B,H,T,D]:bf16, "
                       "scale=0.1)");
  EXPECT_DOUBLE_EQ(g.node(g.result()).attention.scale, 0.1);
}

TEST(AttentionParseErrors, Keywords) {
  std::string t = call(kQKV, "causal=maybe");
  Failure f = fails(t);
  EXPECT_EQ(f.column, column_of(t, "maybe"));
  EXPECT_HAS(f.message, "causal= takes false, true");
  t = call(kQKV, "scale=-0.5");
  f = fails(t);
  EXPECT_EQ(f.column, column_of(t, "-0.5"));
  EXPECT_HAS(f.message, "scale= takes a positive number");
  // scale and scale·log2(e) (the exponent's multiplier) must be f32 constants.
  for (const char* v : {"1e300", "3e38", "1e-46"}) {
    t = call(kQKV, std::string("scale=") + v);
    f = fails(t);
    EXPECT_EQ(f.column, column_of(t, v));
    EXPECT_HAS(f.message, std::string("scale=") + v + " ");
    EXPECT_HAS(f.message, std::string(v) == "3e38" ? "scale·log2(e)" : "f32");
  }
  t = call(kQKV, "scale=big");
  f = fails(t);
  EXPECT_EQ(f.column, column_of(t, "big"));
  t = call(kQKV, "lse=1");
  f = fails(t);
  EXPECT_EQ(f.column, column_of(t, "1)"));
  EXPECT_HAS(f.message, "lse= takes true or false");
  t = call(kQKV, "dropout=0.1");
  f = fails(t);
  EXPECT_EQ(f.column, column_of(t, "dropout"));
  EXPECT_HAS(f.message, "unknown keyword argument 'dropout' for attention");
  t = call(kQKV, "causal=true, causal=false");
  f = fails(t);
  EXPECT_EQ(f.column, column_of(t, "causal=false"));
  EXPECT_HAS(f.message, "causal= is given twice");
  t = call(kQKV, "out=f32");
  f = fails(t);
  EXPECT_EQ(f.column, column_of(t, "out"));
  EXPECT_HAS(f.message, "unknown keyword argument 'out' for attention");
  t = "attention(Q[2,8,128,64]:bf16, causal=true, K[2,2,96,64]:bf16, V[2,2,96,64]:bf16)";
  f = fails(t);
  EXPECT_EQ(f.column, column_of(t, "K["));
  EXPECT_HAS(f.message, "operand after a keyword argument");
  t = "relu(matmul(A[M,K]:f16, B[K,N]:f16), causal=true)";
  f = fails(t);
  EXPECT_EQ(f.column, column_of(t, "causal"));
  EXPECT_HAS(f.message, "relu takes no keyword arguments");
  t = "matmul(A[M,K]:f16, B[K,N]:f16, causal=true)";
  f = fails(t);
  EXPECT_HAS(f.message, "the only one is out=<dtype>");
}

TEST(AttentionParseErrors, ShapesNameBothSides) {
  struct Case {
    std::string text, message;
  };
  const Case cases[] = {
      {"attention(Q[2,8,128,64]:bf16, K[2,2,96,128]:bf16, V[2,2,96,128]:bf16)",
       "attention: head dims (D of Q vs K) differ: Q[2,8,128,64] has 64 but K[2,2,96,128] "
       "has 128"},
      {"attention(Q[2,6,128,64]:bf16, K[2,4,96,64]:bf16, V[2,4,96,64]:bf16)",
       "attention: Q's heads Hq=6 (Q[2,6,128,64]) are not a multiple of K's Hkv=4"},
      {"attention(Q[B,H,S,64]:bf16, K[B,G,T,64]:bf16, V[B,G,T,64]:bf16)",
       "are not a multiple of K's Hkv=G"},
      {"attention(Q[2,8,128,64]:bf16, K[2,2,96,64]:f16, V[2,2,96,64]:bf16)",
       "attention: dtype mismatch: Q is bf16 but K is f16"},
      {"attention(Q[2,8,128,64]:bf16, K[2,2,96,64]:bf16, V[2,2,80,64]:bf16)",
       "attention: key lengths (Sk of K vs V) differ: K[2,2,96,64] has 96 but V[2,2,80,64] "
       "has 80"},
      {"attention(Q[2,8,128,64]:bf16, K[2,2,96,64]:bf16, V[2,4,96,64]:bf16)",
       "key/value heads (Hkv of K vs V) differ"},
      {"attention(Q[2,8,128,64]:bf16, K[2,2,96,64]:bf16, V[2,2,96,32]:bf16)",
       "head dims (D of K vs V) differ"},
      {"attention(Q[2,8,128,64]:bf16, K[3,2,96,64]:bf16, V[3,2,96,64]:bf16)",
       "batch sizes (B of Q vs K) differ: Q[2,8,128,64] has 2 but K[3,2,96,64] has 3"},
      {"attention(Q[2,8,128,64]:f32, K[2,2,96,64]:f32, V[2,2,96,64]:f32)",
       "attention takes f16 or bf16"},
      {"attention(Q[8,128,64]:bf16, K[2,96,64]:bf16, V[2,96,64]:bf16)",
       "attention: Q must be rank 4 [B,H,S,D]"},
      {"attention(Q[B,H,S,D]:bf16, K[B,H,T,D]:bf16, V[B,H,T,D]:bf16)",
       "the default scale is 1/sqrt(D), but D is the symbol D"},
      {"attention(Q[2,8,64,128]:bf16.T, K[2,2,96,64]:bf16, V[2,2,96,64]:bf16)",
       "drop .T"},
      {"attention(Q[2,8,128,64]:bf16, K[2,2,96,64]:bf16)",
       "attention takes three tensors (Q, K, V)"},
      {"attention(Q[2,8,128,64]:bf16, K[2,2,96,64]:bf16, 2.0)",
       "attention: operand V is the number 2.0"},
      {"attention(matmul(A[M,J]:bf16, B[J,N]:bf16), K[2,2,96,64]:bf16, V[2,2,96,64]:bf16)",
       "operands of attention must be input tensors"},
      {"relu(attention(Q[2,8,128,64]:bf16, K[2,2,96,64]:bf16, V[2,2,96,64]:bf16))",
       "attention takes no elementwise epilogue yet"},
      {"add(attention(Q[2,8,128,64]:bf16, K[2,2,96,64]:bf16, V[2,2,96,64]:bf16), 1)",
       "attention takes no elementwise epilogue yet"},
  };
  for (const Case& c : cases) {
    Failure f = fails(c.text);
    EXPECT_HAS(f.message, c.message);
    // Builder errors point at the outermost call that failed (here always the first
    // token); an operand that is a number, at the number.
    int want = c.message.find("the number") != std::string::npos ? column_of(c.text, "2.0") : 1;
    EXPECT_EQ(f.column, want) << c.text;
  }
}

TEST(AttentionBuilder, MatchesParser) {
  GraphBuilder b;
  auto q = b.input("Q", {dim("B"), dim(8), dim("S"), dim(64)}, DType::BF16);
  auto k = b.input("K", {dim("B"), dim(2), dim("T"), dim(64)}, DType::BF16);
  auto v = b.input("V", {dim("B"), dim(2), dim("T"), dim(64)}, DType::BF16);
  AttentionOptions opt;
  opt.causal = Causal::TopLeft;
  opt.scale = 0.2;
  opt.lse = true;
  Graph g = b.build(b.attention(q, k, v, opt));
  EXPECT_EQ(g.str(), parse_expression("attention(Q[B,8,S,64]:bf16, K[B,2,T,64]:bf16, "
                                      "V[B,2,T,64]:bf16, causal=top_left, scale=0.2, "
                                      "lse=true)")
                         .str());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(AttentionBuilder, RejectsBadScale) {
  GraphBuilder b;
  auto q = b.input("Q", {dim(1), dim(1), dim(4), dim(16)}, DType::F16);
  auto k = b.input("K", {dim(1), dim(1), dim(4), dim(16)}, DType::F16);
  AttentionOptions opt;
  opt.scale = std::nan("");
  EXPECT_HAS(error_of([&] { b.attention(q, k, k, opt); }), "scale must be a positive finite");
  opt.scale = 0.0;
  EXPECT_HAS(error_of([&] { b.attention(q, k, k, opt); }), "scale must be a positive finite");
  opt.scale = 1e300;
  EXPECT_HAS(error_of([&] { b.attention(q, k, k, opt); }), "scale=1e+300 overflows f32");
  opt.scale = 1e-300;
  EXPECT_HAS(error_of([&] { b.attention(q, k, k, opt); }), "scale=1e-300 rounds to 0 in f32");
  EXPECT_HAS(error_of([&] { b.attention(q, k, TensorRef{42}); }), "invalid TensorRef 42");
}

// The verifier's own checks, on graphs the builder would not make.
TEST(AttentionGraph, VerifyRejectsBrokenNodes) {
  Graph good = parse_expression(call(kQKV));
  auto broken = [&](const std::function<void(Graph&)>& edit) {
    Graph g = good;
    edit(g);
    return error_of([&] { g.verify(); });
  };
  EXPECT_HAS(broken([](Graph& g) { g.nodes[3].attention.scale = -1; }), "not a positive");
  EXPECT_HAS(broken([](Graph& g) { g.nodes[3].inputs.pop_back(); }), "three operands");
  EXPECT_HAS(broken([](Graph& g) { g.nodes[1].shape[3] = g.nodes[2].shape[3] = dim(32); }),
             "different head dims");
  EXPECT_HAS(broken([](Graph& g) { g.nodes[1].shape[1] = g.nodes[2].shape[1] = dim(3); }),
             "not a known multiple of K's 3");
  EXPECT_HAS(broken([](Graph& g) { g.nodes[3].shape[2] = dim(96); }), "should be Q's");
  EXPECT_HAS(broken([](Graph& g) { g.nodes[3].dtype = DType::F16; }), "output dtype");
  EXPECT_HAS(broken([](Graph& g) { g.nodes[2].shape[2] = dim(97); }), "K [2, 2, 96, 64] and V");
}

TEST(AttentionGraph, KvGroup) {
  EXPECT_EQ(attention_kv_group(dim(32), dim(8))->const_value(), 4);
  EXPECT_EQ(attention_kv_group(dim("H"), dim("H"))->const_value(), 1);
  EXPECT_EQ(attention_kv_group(dim("H"), dim(1))->str(), "H");
  EXPECT_FALSE(attention_kv_group(dim(6), dim(4)));
  EXPECT_FALSE(attention_kv_group(dim("H"), dim("G")));
  EXPECT_FALSE(attention_kv_group(dim(8), dim("G")));
}

}  // namespace
}  // namespace loom
