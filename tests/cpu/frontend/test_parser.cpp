// The expression language: every documented form parses to the expected graph, and
// every class of bad input fails with a message naming the right things and a caret
// under the right column.
#include <gtest/gtest.h>

#include "frontend/diagnostic.h"
#include "frontend/parser.h"
#include "frontend/sizes.h"
#include "ir/printable.h"

namespace loom {
namespace {

std::vector<Dim> shape(std::initializer_list<const char*> dims) {
  std::vector<Dim> out;
  for (const char* d : dims) {
    if (std::isdigit((unsigned char)d[0])) out.push_back(Dim{std::stoll(d), {}});
    else out.push_back(Dim{0, d});
  }
  return out;
}

std::string shape_text(const std::vector<Dim>& s) {
  std::string out;
  for (const Dim& d : s) out += d.str() + " ";
  return out;
}

#define EXPECT_SHAPE(actual, ...) \
  EXPECT_EQ(shape_text(actual), shape_text(shape({__VA_ARGS__})))

const Node& result(const Graph& g) { return g.node(g.result()); }

TEST(Parser, SquareF32Matmul) {
  Graph g = parse_expression("matmul(A[4096,4096]:f32, B[4096,4096]:f32)");
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].kind, OpKind::Input);
  EXPECT_EQ(g.nodes[0].name, "A");
  EXPECT_EQ(g.nodes[1].name, "B");
  EXPECT_EQ(g.nodes[2].kind, OpKind::Matmul);
  EXPECT_EQ(g.nodes[2].inputs, (std::vector<int>{0, 1}));
  EXPECT_EQ(g.nodes[2].dtype, DType::F32);
  EXPECT_SHAPE(g.nodes[2].shape, "4096", "4096");
  EXPECT_EQ(g.str(),
            "%0 = input A: f32[4096, 4096]\n"
            "%1 = input B: f32[4096, 4096]\n"
            "%2 = matmul(%0, %1): f32[4096, 4096]\n");
  EXPECT_TRUE(g.symbols().empty());
}

TEST(Parser, TransposedB) {
  Graph g = parse_expression("matmul(A[M,K]:f16, B[N,K]:f16.T)");
  const Node& b = g.nodes[1];
  EXPECT_TRUE(b.transposed);
  EXPECT_FALSE(g.nodes[0].transposed);
  EXPECT_SHAPE(b.shape, "K", "N");
  EXPECT_SHAPE(b.storage_shape(), "N", "K");
  EXPECT_EQ(result(g).dtype, DType::F16);
  EXPECT_SHAPE(result(g).shape, "M", "N");
  EXPECT_EQ(g.symbols(), (std::vector<std::string>{"M", "K", "N"}));
  EXPECT_NE(g.str().find("%1 = input B: f16[N, K] .T  (logical [K, N])"), std::string::npos)
      << g.str();
}

TEST(Parser, TransposedA) {
  Graph g = parse_expression("matmul(A[K,M]:bf16.T, B[K,N]:bf16)");
  EXPECT_TRUE(g.nodes[0].transposed);
  EXPECT_SHAPE(g.nodes[0].shape, "M", "K");
  EXPECT_SHAPE(result(g).shape, "M", "N");
  EXPECT_EQ(result(g).dtype, DType::BF16);
}

TEST(Parser, Bmm) {
  Graph g = parse_expression("bmm(A[8,512,1024]:bf16, B[8,1024,512]:bf16)");
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(result(g).kind, OpKind::Matmul);
  EXPECT_EQ(result(g).origin, "bmm");
  EXPECT_EQ(result(g).dtype, DType::BF16);
  EXPECT_SHAPE(result(g).shape, "8", "512", "512");
}

TEST(Parser, RankThreeMatmulIsBatched) {
  Graph g = parse_expression("matmul(A[Bt,M,K]:f16, B[Bt,N,K]:f16.T)");
  EXPECT_SHAPE(g.nodes[1].shape, "Bt", "K", "N");
  EXPECT_SHAPE(result(g).shape, "Bt", "M", "N");
}

TEST(Parser, LinearWithBiasIsMatmulThenAdd) {
  Graph g = parse_expression("linear(X[M,K]:bf16, W[N,K]:bf16, bias[N]:bf16)");
  ASSERT_EQ(g.nodes.size(), 5u) << g.str();
  const Node& add = result(g);
  EXPECT_EQ(add.kind, OpKind::Binary);
  EXPECT_EQ(add.op, ScalarOp::Add);
  EXPECT_EQ(add.origin, "linear");
  EXPECT_FALSE(add.scalar.has_value());
  const Node& mm = g.node(add.inputs[0]);
  EXPECT_EQ(mm.kind, OpKind::Matmul);
  EXPECT_EQ(mm.origin, "linear");
  EXPECT_EQ(mm.dtype, DType::BF16);
  EXPECT_SHAPE(mm.shape, "M", "N");
  const Node& w = g.node(mm.inputs[1]);
  EXPECT_EQ(w.name, "W");
  EXPECT_TRUE(w.transposed);  // W is stored [N,K] and multiplied as Wᵀ
  EXPECT_SHAPE(w.storage_shape(), "N", "K");
  const Node& bias = g.node(add.inputs[1]);
  EXPECT_EQ(bias.name, "bias");
  EXPECT_SHAPE(bias.shape, "N");
  EXPECT_SHAPE(add.shape, "M", "N");
}

TEST(Parser, LinearWithTransposedWeightToggles) {
  // W written [K,N].T: stored [K,N], which is already Wᵀ.
  Graph g = parse_expression("linear(X[M,K]:f32, W[K,N]:f32.T)");
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(result(g).origin, "linear");
  EXPECT_FALSE(g.nodes[1].transposed);
  EXPECT_SHAPE(g.nodes[1].shape, "K", "N");
  EXPECT_SHAPE(result(g).shape, "M", "N");
}

TEST(Parser, UnaryEpilogues) {
  const std::pair<const char*, ScalarOp> cases[] = {
      {"relu", ScalarOp::Relu}, {"gelu", ScalarOp::Gelu}, {"gelu_tanh", ScalarOp::GeluTanh},
      {"silu", ScalarOp::Silu}};
  for (auto [name, op] : cases) {
    Graph g = parse_expression(std::string(name) + "(matmul(A[M,K]:f16, B[K,N]:f16))");
    ASSERT_EQ(g.nodes.size(), 4u);
    EXPECT_EQ(result(g).kind, OpKind::Unary);
    EXPECT_EQ(result(g).op, op);
    EXPECT_EQ(result(g).name, name);
    EXPECT_EQ(result(g).inputs, (std::vector<int>{2}));
    EXPECT_EQ(result(g).dtype, DType::F16);
  }
}

TEST(Parser, ResidualAddKeepsContractionDtype) {
  Graph g = parse_expression("add(matmul(A[M,K]:f16, B[K,N]:f16), R[M,N]:f32)");
  EXPECT_EQ(result(g).op, ScalarOp::Add);
  EXPECT_EQ(result(g).inputs, (std::vector<int>{2, 3}));
  EXPECT_EQ(g.nodes[3].name, "R");
  EXPECT_EQ(g.nodes[3].dtype, DType::F32);
  EXPECT_EQ(result(g).dtype, DType::F16);
}

TEST(Parser, ScalarOperand) {
  Graph g = parse_expression("mul(matmul(A[M,K]:f16, B[K,N]:f16), 0.5)");
  EXPECT_EQ(result(g).op, ScalarOp::Mul);
  EXPECT_EQ(result(g).inputs, (std::vector<int>{2}));
  ASSERT_TRUE(result(g).scalar.has_value());
  EXPECT_EQ(*result(g).scalar, 0.5);
  EXPECT_NE(g.str().find("%3 = mul(%2, 0.5): f16[M, N]"), std::string::npos) << g.str();
}

TEST(Parser, LeadingNumberForCommutativeOps) {
  EXPECT_EQ(parse_expression("mul(2, matmul(A[M,K]:f16, B[K,N]:f16))").str(),
            parse_expression("mul(matmul(A[M,K]:f16, B[K,N]:f16), 2)").str());
  EXPECT_EQ(parse_expression("add(-1e-3, matmul(A[M,K]:f16, B[K,N]:f16))").str(),
            parse_expression("add(matmul(A[M,K]:f16, B[K,N]:f16), -0.001)").str());
}

TEST(Parser, NumberForms) {
  for (auto [text, value] : {std::pair{"0.5", 0.5}, {".25", 0.25}, {"-3", -3.0},
                             {"+2.5E2", 250.0}, {"1e-3", 1e-3}, {"7", 7.0}}) {
    Graph g = parse_expression(std::string("sub(matmul(A[2,2]:f32, B[2,2]:f32), ") + text + ")");
    ASSERT_TRUE(result(g).scalar.has_value()) << text;
    EXPECT_DOUBLE_EQ(*result(g).scalar, value) << text;
  }
}

TEST(Parser, OutDtype) {
  Graph g = parse_expression("matmul(A[M,K]:f16, B[K,N]:f16, out=f32)");
  EXPECT_EQ(result(g).dtype, DType::F32);
  g = parse_expression("bmm(A[2,M,K]:bf16, B[2,K,N]:bf16, out=f16)");
  EXPECT_EQ(result(g).dtype, DType::F16);
  g = parse_expression("linear(X[M,K]:f16, W[N,K]:f16, b[N]:f16, out=f32)");
  EXPECT_EQ(result(g).dtype, DType::F32);
  EXPECT_EQ(g.node(result(g).inputs[0]).dtype, DType::F32);
  g = parse_expression("matmul(A[M,K]:f32, B[K,N]:f32, out=bf16)");
  EXPECT_EQ(result(g).dtype, DType::BF16);
}

TEST(Parser, DefaultDtypes) {
  EXPECT_EQ(result(parse_expression("matmul(A[4,4]:tf32, B[4,4]:tf32)")).dtype, DType::F32);
  EXPECT_EQ(result(parse_expression("matmul(A[4,4]:f32, B[4,4]:f32)")).dtype, DType::F32);
  EXPECT_EQ(result(parse_expression("matmul(A[4,4]:bf16, B[4,4]:bf16)")).dtype, DType::BF16);
}

TEST(Parser, ChainOfEpilogues) {
  Graph g = parse_expression(
      "relu(add(mul(matmul(A[M,K]:f16, B[K,N]:f16), 0.5), R[1,N]:bf16))");
  ASSERT_EQ(g.nodes.size(), 7u) << g.str();
  EXPECT_EQ(g.nodes[3].name, "mul");
  EXPECT_EQ(g.nodes[4].name, "R");
  EXPECT_EQ(g.nodes[5].name, "add");
  EXPECT_EQ(g.nodes[5].inputs, (std::vector<int>{3, 4}));
  EXPECT_EQ(g.nodes[6].name, "relu");
  EXPECT_EQ(g.nodes[6].dtype, DType::F16);
}

TEST(Parser, BroadcastShapesAccepted) {
  for (const char* operand : {"b[N]", "b[1,N]", "b[M,N]", "b[M,1]", "b[1]"}) {
    EXPECT_NO_THROW(parse_expression(std::string("add(matmul(A[M,K]:f16, B[K,N]:f16), ") +
                                     operand + ":f16)"))
        << operand;
  }
  EXPECT_NO_THROW(parse_expression("max(matmul(A[8,M,K]:f16, B[8,K,N]:f16), b[N]:f32)"));
}

TEST(Parser, TensorFirstForCommutativeOps) {
  Graph g = parse_expression("add(R[M,N]:f16, matmul(A[M,K]:f16, B[K,N]:f16))");
  const Node& add = result(g);
  EXPECT_EQ(g.node(add.inputs[0]).kind, OpKind::Matmul);
  EXPECT_EQ(g.node(add.inputs[1]).name, "R");
}

TEST(Parser, Whitespace) {
  EXPECT_EQ(parse_expression("  matmul (\tA [ M , K ] : f16 ,\nB[ N,K ]:f16 . T )  ").str(),
            parse_expression("matmul(A[M,K]:f16,B[N,K]:f16.T)").str());
}

TEST(Parser, SameTensorTwice) {
  Graph g = parse_expression("matmul(A[N,N]:f32, A[N,N]:f32.T)");
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_FALSE(g.nodes[0].transposed);
  EXPECT_TRUE(g.nodes[1].transposed);
  g = parse_expression("matmul(A[N,N]:f32, A[N,N]:f32)");
  ASSERT_EQ(g.nodes.size(), 2u);  // identical uses share one node
  EXPECT_EQ(result(g).inputs, (std::vector<int>{0, 0}));
}

TEST(Parser, NodesRememberTheirColumn) {
  Graph g = parse_expression("relu(matmul(A[M,K]:f16, B[K,N]:f16))");
  EXPECT_EQ(g.nodes[0].column, 13);  // A
  EXPECT_EQ(g.nodes[1].column, 25);  // B
  EXPECT_EQ(g.nodes[2].column, 6);   // matmul
  EXPECT_EQ(g.nodes[3].column, 1);   // relu
}

// ---- bad inputs ---------------------------------------------------------------------

struct Failure {
  int column = 0;
  std::string message;
  std::string what;
};

// Parses text that must fail, wherever the error is.
Failure fails_anywhere(const std::string& text) {
  try {
    Graph g = parse_expression(text);
    ADD_FAILURE() << "parsed without error: " << text << "\n" << g.str();
  } catch (const ExprError& e) {
    return {e.column(), e.message(), e.what()};
  }
  return {};
}

// Parses text that must fail; checks the caret sits under the reported column.
Failure fails(const std::string& text) {
  try {
    Graph g = parse_expression(text);
    ADD_FAILURE() << "parsed without error: " << text << "\n" << g.str();
  } catch (const ExprError& e) {
    Failure f{e.column(), e.message(), e.what()};
    std::string header = "error at column " + std::to_string(f.column) + ": " + f.message;
    std::string caret = std::string(2 + f.column - 1, ' ') + "^";
    EXPECT_EQ(f.what, header + "\n  " + text + "\n" + caret) << text;
    return f;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an ExprError: " << e.what();
  }
  return {};
}

int column_of(const std::string& text, const std::string& needle, size_t from = 0) {
  size_t p = text.find(needle, from);
  EXPECT_NE(p, std::string::npos) << needle;
  return int(p) + 1;
}

TEST(ParserErrors, UnclosedShapeShowsCaret) {
  Failure f = fails("matmul(A[4096,4096:f32, B[4096,4096]:f32)");
  EXPECT_EQ(f.what,
            "error at column 19: expected ']' to close the shape of A (or '|' and its row pitch, e.g. A[M,K|1056]), found ':'\n"
            "  matmul(A[4096,4096:f32, B[4096,4096]:f32)\n"
            "                    ^");
}

TEST(ParserErrors, InnerDimensionsDiffer) {
  Failure f = fails("matmul(A[4096,1024]:f32, B[512,4096]:f32)");
  EXPECT_EQ(f.message,
            "matmul: inner dimensions differ: A[4096,1024] has K=1024 but B[512,4096] has "
            "K=512");
  EXPECT_EQ(f.column, 1);
}

TEST(ParserErrors, SymbolNeverEqualsConstant) {
  std::string text = "relu(matmul(A[M,K]:f16, B[N,1024]:f16.T))";
  Failure f = fails(text);
  EXPECT_EQ(f.message,
            "matmul: inner dimensions differ: A[M,K] has K=K but B[N,1024].T has K=1024");
  EXPECT_EQ(f.column, column_of(text, "matmul"));
}

TEST(ParserErrors, LinearInnerDimensions) {
  Failure f = fails("linear(X[M,1024]:f16, W[N,512]:f16)");
  EXPECT_EQ(f.message,
            "linear: inner dimensions differ: X[M,1024] has K=1024 but W[N,512] has K=512");
}

TEST(ParserErrors, DtypeMismatch) {
  Failure f = fails("matmul(A[M,K]:f16, B[K,N]:bf16)");
  EXPECT_EQ(f.message,
            "matmul: dtype mismatch: A is f16 but B is bf16 (both operands must have the same "
            "dtype)");
}

TEST(ParserErrors, BatchDimensionsDiffer) {
  Failure f = fails("bmm(A[8,512,1024]:bf16, B[4,1024,512]:bf16)");
  EXPECT_EQ(f.message,
            "bmm: batch dimensions differ: A[8,512,1024] has batch 8 but B[4,1024,512] has "
            "batch 4 (batch dims must be equal; an operand shared by every batch entry leaves "
            "them out, e.g. [B,M,K] x [K,N])");
  // Rank 4: the dims are compared from the matrix outwards, each named.
  f = fails("matmul(A[2,3,100,64]:f16, B[2,4,64,72]:f16)");
  EXPECT_NE(f.message.find("has batch 3 but B[2,4,64,72] has batch 4"), std::string::npos)
      << f.message;
  f = fails("matmul(A[5,3,100,64]:f16, B[2,3,64,72]:f16)");
  EXPECT_NE(f.message.find("has batch 5 but B[2,3,64,72] has batch 2"), std::string::npos)
      << f.message;
  // Some batch dims but not all: a batch stride strided GEMMs cannot express.
  f = fails("matmul(A[2,3,100,64]:f16, B[3,64,72]:f16)");
  EXPECT_EQ(f.message,
            "matmul: A[2,3,100,64] has 2 batch dims and B[3,64,72] 1; an operand has all of "
            "the result's batch dims or none (shared by every batch entry): give both the same "
            "batch dims, or one none");
}

TEST(Parser, BroadcastAndRank4Matmul) {
  // An operand without batch dims is shared by every entry; the result takes the batch.
  Graph g = parse_expression("matmul(A[8,512,1024]:bf16, W[1024,256]:bf16)");
  EXPECT_SHAPE(result(g).shape, "8", "512", "256");
  g = parse_expression("matmul(W[512,1024]:f16, B[8,1024,256]:f16)");
  EXPECT_SHAPE(result(g).shape, "8", "512", "256");
  g = parse_expression("matmul(A[B,H,S,D]:bf16, K[B,H,D,S]:bf16)");
  EXPECT_SHAPE(result(g).shape, "B", "H", "S", "S");
  g = parse_expression("matmul(A[2,3,100,64]:f16, W[72,64]:f16.T)");
  EXPECT_SHAPE(result(g).shape, "2", "3", "100", "72");
  EXPECT_NO_THROW(g.verify());
}

TEST(ParserErrors, Ranks) {
  Failure f = fails("matmul(A[M]:f32, B[M,N]:f32)");
  EXPECT_NE(f.message.find("must be of rank 2 to 4"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("A[M] of rank 1"), std::string::npos) << f.message;
  f = fails("matmul(A[2,2,2,M,K]:f32, B[K,N]:f32)");
  EXPECT_NE(f.message.find("A[2,2,2,M,K] of rank 5"), std::string::npos) << f.message;
  f = fails("bmm(A[M,K]:f32, B[K,N]:f32)");
  EXPECT_NE(f.message.find("bmm: operands must both be rank 3"), std::string::npos)
      << f.message;
  f = fails("linear(X[2,2,2,M,K]:f32, W[N,K]:f32)");
  EXPECT_NE(f.message.find("linear: X must be [M,K], [B,S,K] or [B,H,S,K]"), std::string::npos)
      << f.message;
  f = fails("linear(X[2,M,K]:f32, W[2,N,K]:f32)");
  EXPECT_NE(f.message.find("W rank 2 [N,K]"), std::string::npos) << f.message;
}

TEST(ParserErrors, OperandDoesNotBroadcast) {
  std::string text = "gelu(add(matmul(A[M,K]:f16, B[K,N]:f16), R[N,M]:f16))";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "add"));
  EXPECT_NE(f.message.find("R[N,M] does not broadcast to [M,N]"), std::string::npos)
      << f.message;
  // Broadcasting must not grow the contraction's result.
  f = fails("mul(matmul(A[M,K]:f16, B[K,N]:f16), R[2,M,N]:f16)");
  EXPECT_NE(f.message.find("R[2,M,N] does not broadcast to [M,N]"), std::string::npos)
      << f.message;
  f = fails("linear(X[M,K]:f16, W[N,K]:f16, b[K]:f16)");
  EXPECT_NE(f.message.find("linear: b[K] does not broadcast to [M,N]"), std::string::npos)
      << f.message;
}

TEST(ParserErrors, NoContraction) {
  Failure f = fails("relu(A[4,4]:f32)");
  EXPECT_NE(f.message.find("one contraction"), std::string::npos) << f.message;
  EXPECT_EQ(f.column, 1);
  f = fails("A[4,4]:f32");
  EXPECT_NE(f.message.find("no contraction"), std::string::npos) << f.message;
  f = fails("add(A[4,4]:f32, B[4,4]:f32)");
  EXPECT_NE(f.message.find("one contraction"), std::string::npos) << f.message;
  f = fails("0.5");
  EXPECT_NE(f.message.find("one contraction"), std::string::npos) << f.message;
}

TEST(ParserErrors, TwoContractions) {
  Failure f = fails("add(matmul(A[M,K]:f16, B[K,N]:f16), matmul(C[M,K]:f16, D[K,N]:f16))");
  EXPECT_NE(f.message.find("one contraction"), std::string::npos) << f.message;
  EXPECT_EQ(f.column, 1);
  std::string text = "relu(matmul(relu(matmul(A[M,K]:f16, B[K,N]:f16)), C[N,N]:f16))";
  f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "matmul"));
  EXPECT_NE(f.message.find("operands of a contraction must be input tensors"),
            std::string::npos)
      << f.message;
}

TEST(ParserErrors, SameNameDifferentStorage) {
  std::string text = "matmul(A[M,K]:f16, A[K,N]:f16)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "A", 10));
  EXPECT_NE(f.message.find("A[M,K]:f16 and A[K,N]:f16"), std::string::npos) << f.message;
  f = fails("matmul(A[M,M]:f16, A[M,M]:bf16)");
  EXPECT_NE(f.message.find("A[M,M]:f16 and A[M,M]:bf16"), std::string::npos) << f.message;
}

TEST(ParserErrors, BadDimensions) {
  for (const char* bad : {"0", "-4", "4.5", "1e3"}) {
    std::string text = std::string("matmul(A[") + bad + ",K]:f32, B[K,N]:f32)";
    Failure f = fails(text);
    EXPECT_EQ(f.column, 10) << text;
    EXPECT_NE(f.message.find("must be a positive integer"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find(bad), std::string::npos) << f.message;
  }
  Failure f = fails("matmul(A[]:f32, B[K,N]:f32)");
  EXPECT_EQ(f.column, 10);
  EXPECT_NE(f.message.find("expected a dimension"), std::string::npos) << f.message;
}

TEST(ParserErrors, UnknownFunctionListsKnownOnes) {
  std::string text = "relu(matmull(A[M,K]:f16, B[K,N]:f16))";
  Failure f = fails(text);
  EXPECT_EQ(f.column, 6);
  EXPECT_NE(f.message.find("unknown function 'matmull'"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("matmul, bmm, linear, relu, gelu, gelu_tanh, silu, add, sub, mul, max"),
            std::string::npos)
      << f.message;
}

TEST(ParserErrors, UnknownDtypeListsDtypes) {
  std::string text = "matmul(A[M,K]:f8, B[K,N]:f8)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "f8"));
  EXPECT_NE(f.message.find("unknown dtype 'f8'"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("f32, tf32, f16, bf16"), std::string::npos) << f.message;
  f = fails("matmul(A[M,K]:f64, B[K,N]:f64)");
  EXPECT_NE(f.message.find("unknown dtype 'f64'"), std::string::npos) << f.message;
}

TEST(ParserErrors, TrailingGarbage) {
  std::string text = "matmul(A[M,K]:f16, B[K,N]:f16) extra";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "extra"));
  EXPECT_NE(f.message.find("after the end of the expression"), std::string::npos);
  text = "matmul(A[M,K]:f16, B[K,N]:f16))";
  f = fails(text);
  EXPECT_EQ(f.column, int(text.size()));
  EXPECT_NE(f.message.find("unbalanced"), std::string::npos) << f.message;
}

TEST(ParserErrors, UnclosedCall) {
  std::string text = "relu(matmul(A[M,K]:f16, B[K,N]:f16)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, int(text.size()) + 1);
  EXPECT_EQ(f.message, "expected ',' or ')' in the call to relu, found end of input");
  f = fails("");
  EXPECT_EQ(f.column, 1);
  EXPECT_NE(f.message.find("expected an expression"), std::string::npos);
}

TEST(ParserErrors, MissingDtype) {
  std::string text = "matmul(A[M,K], B[K,N]:f16)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, ", B"));
  EXPECT_NE(f.message.find("expected ':' and a dtype after the shape of A"), std::string::npos)
      << f.message;
  text = "matmul(A[M,K]:, B[K,N]:f16)";
  f = fails(text);
  EXPECT_EQ(f.column, column_of(text, ", B"));
  EXPECT_NE(f.message.find("expected a dtype"), std::string::npos) << f.message;
}

TEST(ParserErrors, TensorWithoutShape) {
  std::string text = "matmul(A, B[K,N]:f16)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, ","));
  EXPECT_NE(f.message.find("expected '['"), std::string::npos) << f.message;
}

TEST(ParserErrors, BadTransposeSuffix) {
  std::string text = "matmul(A[M,K]:f16.X, B[K,N]:f16)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "X"));
  text = "add(matmul(A[M,K]:f16, B[K,N]:f16), b[N]:f16.T)";
  f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "b["));
  EXPECT_NE(f.message.find("b[N] has rank 1"), std::string::npos) << f.message;
}

TEST(ParserErrors, OutKeyword) {
  std::string text = "matmul(A[M,K]:tf32, B[K,N]:tf32, out=tf32)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "tf32)"));
  EXPECT_NE(f.message.find("tf32 is an input-only type"), std::string::npos) << f.message;
  text = "relu(matmul(A[M,K]:f16, B[K,N]:f16), out=f32)";
  f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "out"));
  EXPECT_NE(f.message.find("relu takes no keyword arguments"), std::string::npos);
  text = "matmul(A[M,K]:f16, B[K,N]:f16, acc=f32)";
  f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "acc"));
  EXPECT_NE(f.message.find("unknown keyword argument 'acc'"), std::string::npos);
  text = "matmul(A[M,K]:f16, B[K,N]:f16, out=f32, out=f16)";
  f = fails(text);
  EXPECT_NE(f.message.find("twice"), std::string::npos);
}

TEST(ParserErrors, Arity) {
  Failure f = fails("matmul(A[M,K]:f16, B[K,N]:f16, C[K,N]:f16)");
  EXPECT_EQ(f.message, "matmul takes two tensors (A, B) and an optional out=<dtype>, got 3 "
                       "operands");
  f = fails("relu()");
  EXPECT_EQ(f.message, "relu takes one operand, got 0 operands");
}

TEST(ParserErrors, NumberWhereTensorNeeded) {
  std::string text = "matmul(A[M,K]:f16, 2.0)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "2.0"));
  EXPECT_NE(f.message.find("operand B is the number 2.0"), std::string::npos) << f.message;
  text = "sub(1, matmul(A[M,K]:f16, B[K,N]:f16))";
  f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "1"));
  EXPECT_NE(f.message.find("only be the second operand"), std::string::npos) << f.message;
}

TEST(ParserErrors, UnexpectedCharacter) {
  std::string text = "matmul(A[M,K]:f16, B[K,N]:f16) # comment";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "#"));
  EXPECT_NE(f.message.find("unexpected character '#'"), std::string::npos);
}

TEST(ParserErrors, TensorNameClashesWithSymbol) {
  std::string text = "matmul(A[M,K]:f16, M[K,N]:f16)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "M["));
  EXPECT_NE(f.message.find("M names both a tensor and a dimension"), std::string::npos)
      << f.message;
}

TEST(ParserErrors, DeepNestingFailsCleanly) {
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "relu(";
  try {
    parse_expression(text);
    FAIL() << "expected an error";
  } catch (const ExprError& e) {
    EXPECT_NE(e.message().find("nests more than"), std::string::npos) << e.message();
  }
}

TEST(ParserErrors, MultiLineTextNamesTheLine) {
  try {
    parse_expression("matmul(A[M,K]:f16,\n       B[K,N]:f8)");
    FAIL() << "expected an error";
  } catch (const ExprError& e) {
    EXPECT_EQ(std::string(e.what()),
              "error at line 2, column 15: unknown dtype 'f8' for B; dtypes are f32, tf32, "
              "f16, bf16, i32\n"
              "         B[K,N]:f8)\n"
              "                ^");
  }
}

// Non-ASCII text: the column and the caret count characters, not bytes (é is 2 bytes,
// 漢 3), and the echoed line is valid UTF-8.
TEST(ParserErrors, ColumnAndCaretCountCharactersNotBytes) {
  const std::string text = "\xc3\xa9\xe6\xbc\xa2 x";  // "é漢 x"
  ExprError e(text, /*byte column of x=*/7, "expected something");
  EXPECT_EQ(e.column(), 4);
  EXPECT_EQ(std::string(e.what()), "error at column 4: expected something\n"
                                   "  \xc3\xa9\xe6\xbc\xa2 x\n"
                                   "     ^");
}

// Control characters (an ANSI escape) and bytes that are not UTF-8 are escaped when the
// line is echoed; the caret moves over what each one printed as.
TEST(ParserErrors, ControlCharactersAndInvalidBytesAreEscaped) {
  const std::string text = "\x1b[31m\xff x";
  ExprError e(text, /*byte column of x=*/8, "here");
  EXPECT_EQ(e.column(), 8);
  EXPECT_EQ(std::string(e.what()), "error at column 8: here\n"
                                   "  \\x1b[31m\\xff x\n"
                                   "               ^");
  // The lexer names the whole character, or the byte that starts none.
  Failure accent = fails_anywhere("matmul(A\xc3\xa9[4]:f32)");
  EXPECT_NE(accent.message.find("unexpected character '\xc3\xa9' (U+00E9)"), std::string::npos)
      << accent.message;
  Failure bell = fails_anywhere("matmul(A\a[4]:f32)");
  EXPECT_NE(bell.message.find("unexpected character '\\x07' (U+0007)"), std::string::npos)
      << bell.message;
  Failure byte = fails_anywhere("matmul(A\xff[4]:f32)");
  EXPECT_NE(byte.message.find("unexpected byte 0xFF"), std::string::npos) << byte.message;
  for (const Failure* f : {&accent, &bell, &byte})
    for (size_t i = 0; i < f->what.size();) {
      size_t n = utf8_length(f->what, i);
      ASSERT_NE(n, 0u) << "invalid UTF-8 at byte " << i << ": " << f->what;
      ASSERT_FALSE(n == 1 && uint8_t(f->what[i]) < 0x20 && f->what[i] != '\n')
          << "raw control character at byte " << i << ": " << f->what;
      i += n;
    }
}

// Every tensor, inputs and results, is held to 2^48 bytes: past it the element count or
// byte count of a tensor (or its index math) would overflow int64.
TEST(ParserErrors, TensorsPastTheSizeLimitAreRefused) {
  auto message = [](const std::string& text) {
    try {
      parse_expression(text);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  const std::string wrap = message("matmul(A[4294967296,4294967296]:f16, B[4294967296,8]:f16)");
  EXPECT_NE(wrap.find("tensor A[4294967296,4294967296] is too large"), std::string::npos) << wrap;
  EXPECT_NE(wrap.find("2^48"), std::string::npos) << wrap;
  const std::string out = message("matmul(A[16777216,1]:f32, B[1,16777216]:f32)");
  EXPECT_NE(out.find("the result of matmul [16777216,16777216] is too large"), std::string::npos) << out;
  // At the limit exactly: 2^47 f16 elements are 2^48 bytes.
  EXPECT_EQ(message("matmul(A[8388608,16777216]:f16, B[16777216,8]:f16)"), "parsed");
  // Bound later: symbols count once they have values.
  Graph g = parse_expression("matmul(A[M,K]:f32, B[K,N]:f32)");
  EXPECT_NO_THROW(check_tensor_sizes(g, {{"M", 4096}, {"K", 4096}}));
  EXPECT_THROW(check_tensor_sizes(g, {{"M", int64_t(1) << 40}, {"K", int64_t(1) << 20}}), Error);
}

// Numbers become f32 constants of the epilogue: one that overflows f32 or rounds to 0
// (NVRTC would refuse its literal, and the answer would change) is an error naming the
// value and f32's range, with the caret under it; every other value is accepted as written.
TEST(ParserErrors, NumbersOutsideF32) {
  for (const char* n : {"1e39", "-3.5e38", "1e-46", "-1e-300", "1e400"}) {
    const std::string text = std::string("add(matmul(A[2,2]:f32, B[2,2]:f32), ") + n + ")";
    Failure f = fails(text);
    EXPECT_EQ(f.column, column_of(text, n)) << n;
    EXPECT_NE(f.message.find(std::string("number ") + n), std::string::npos) << f.message;
    EXPECT_NE(f.message.find(std::string(n).find("e-") != std::string::npos ? "rounds to 0 in f32"
                                                                          : "overflows f32"),
              std::string::npos)
        << f.message;
    EXPECT_NE(f.message.find("f32 holds magnitudes up to 3.40282347e+38 and down to "
                             "1.40129846e-45"),
              std::string::npos)
        << f.message;
  }
  for (auto [text, value] : {std::pair{"3.4028234e38", 3.4028234e38}, {"1e-45", 1e-45},
                             {"-1e-40", -1e-40}, {"0", 0.0}}) {
    Graph g = parse_expression(std::string("mul(matmul(A[2,2]:f32, B[2,2]:f32), ") + text + ")");
    EXPECT_DOUBLE_EQ(*result(g).scalar, value) << text;
  }
}

// Names starting with loom_ are the generated CUDA's (tensors loom_t_, symbols loom_d_).
TEST(ParserErrors, LoomPrefixIsReserved) {
  std::string text = "matmul(loom_t_A[2,2]:f32, B[2,2]:f32)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "loom_t_A"));
  EXPECT_EQ(f.message, "tensor name 'loom_t_A' starts with loom_, which the generated CUDA "
                       "reserves for its own names; rename it");
  text = "matmul(A[M,loom_d_K]:f32, B[loom_d_K,2]:f32)";
  f = fails(text);
  EXPECT_NE(f.message.find("symbol name 'loom_d_K' starts with loom_"), std::string::npos) << f.message;
  EXPECT_EQ(parse_expression("matmul(loom[2,2]:f32, loomx[2,2]:f32)").nodes.size(), 3u);
}

// `out` and `lse` name the program's results (the driver reads them back by name).
TEST(ParserErrors, ResultNamesAreReserved) {
  for (const char* name : {"out", "lse"}) {
    const std::string text = std::string("matmul(A[2,2]:f32, ") + name + "[2,2]:f32)";
    Failure f = fails(text);
    EXPECT_EQ(f.column, column_of(text, name));
    EXPECT_NE(f.message.find(std::string("tensor name '") + name + "' is reserved"), std::string::npos)
        << f.message;
    EXPECT_NE(f.message.find("rename the input"), std::string::npos) << f.message;
  }
}

}  // namespace
}  // namespace loom
