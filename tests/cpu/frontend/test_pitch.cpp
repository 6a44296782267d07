// Views into larger buffers: `A[M,K|1056]` (docs/cli.md, "Strides"). Every valid form
// parses to the pitch it names, the C++ builder makes the same graph, and every bad
// pitch fails with a message that names it and a caret under it.
#include <gtest/gtest.h>

#include "frontend/diagnostic.h"
#include "frontend/parser.h"
#include "loom/builder.h"

namespace loom {
namespace {

const Node& input(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    if (n.kind == OpKind::Input && n.name == name) return n;
  throw std::runtime_error("no input " + name);
}

std::string strides_text(const Node& n) {
  std::string s;
  for (const Expr& e : n.storage_strides()) s += (s.empty() ? "" : ",") + e.str();
  return s;
}

TEST(Pitch, RowPitchOfAColumnSlice) {
  Graph g = parse_expression("matmul(A[M,1000|1024]:bf16, B[1000,N]:bf16)");
  const Node& a = input(g, "A");
  EXPECT_EQ(a.pitch, std::vector<int64_t>({1024}));
  EXPECT_EQ(strides_text(a), "1024");
  EXPECT_NE(g.str().find("input A: bf16[M, 1000|1024]"), std::string::npos) << g.str();
  EXPECT_TRUE(input(g, "B").pitch.empty());
  EXPECT_TRUE(input(g, "B").storage_strides().empty());
}

TEST(Pitch, TransposedViewOfAPitchedTensor) {
  // B[N,K|1056].T: the logical [K,N] operand stored as rows of K in a buffer 1056 wide.
  Graph g = parse_expression("matmul(A[M,K]:f16, B[N,K|1056]:f16.T)");
  const Node& b = input(g, "B");
  EXPECT_TRUE(b.transposed);
  EXPECT_EQ(b.pitch, std::vector<int64_t>({1056}));
  EXPECT_EQ(strides_text(b), "1056");
}

TEST(Pitch, BatchStridesDefaultDenseOverTheRowPitch) {
  Graph g = parse_expression("bmm(A[B,M,64|72]:bf16, C[B,64,N]:bf16)");
  EXPECT_EQ(strides_text(input(g, "A")), "M * 72,72");
  // A KV cache with capacity past its length: the batch stride is given too.
  g = parse_expression("bmm(Q[4,16,64]:bf16, K[4,64,100|12800,128]:bf16)");
  EXPECT_EQ(strides_text(input(g, "K")), "12800,128");
  g = parse_expression("matmul(A[2,3,M,K|9999,3333,64]:f32, B[K,N]:f32)");
  EXPECT_EQ(strides_text(input(g, "A")), "9999,3333,64");
}

TEST(Pitch, ElementwiseOperandsMayBePitched) {
  Graph g = parse_expression(
      "add(linear(X[M,K|640]:bf16, W[N,K|520]:bf16, bias[N]:bf16), R[M,N|4096]:bf16)");
  EXPECT_EQ(input(g, "X").pitch, std::vector<int64_t>({640}));
  EXPECT_EQ(input(g, "W").pitch, std::vector<int64_t>({520}));
  EXPECT_EQ(input(g, "R").pitch, std::vector<int64_t>({4096}));
}

TEST(Pitch, EqualToTheWidthIsAllowed) {
  Graph g = parse_expression("matmul(A[64,32|32]:f32, B[32,16]:f32)");
  EXPECT_EQ(strides_text(input(g, "A")), "32");
}

TEST(Pitch, BuilderMakesTheSameGraph) {
  const char* text = "relu(linear(X[M,1000|1024]:bf16, W[N,1000|1056]:bf16))";
  GraphBuilder b;
  auto x = b.input("X", {dim("M"), dim(1000)}, DType::BF16, false, {1024});
  auto w = b.input("W", {dim("N"), dim(1000)}, DType::BF16, false, {1056});
  EXPECT_EQ(b.build(b.relu(b.linear(x, w))).str(), parse_expression(text).str());
}

TEST(Pitch, ThreeDimensionalLinear) {
  // X [B,S,K] · W[N,K]ᵀ: W is shared by every batch entry, the bias broadcasts.
  Graph g = parse_expression("linear(X[8,512,4096]:bf16, W[1024,4096]:bf16, b[1024]:bf16)");
  const Node& mm = g.node(g.nodes[g.result()].inputs[0]);
  EXPECT_EQ(mm.kind, OpKind::Matmul);
  ASSERT_EQ(g.node(g.result()).shape.size(), 3u);
  EXPECT_EQ(g.node(g.result()).shape[0].value, 8);
  EXPECT_EQ(g.node(g.result()).shape[2].value, 1024);
  g = parse_expression("linear(X[2,4,S,64|80]:f16, W[N,64]:f16)");
  EXPECT_EQ(g.node(g.result()).shape.size(), 4u);
  EXPECT_EQ(strides_text(input(g, "X")), "S * 320,S * 80,80");
  GraphBuilder b;
  auto x = b.input("X", {dim(8), dim(512), dim(4096)}, DType::BF16);
  auto w = b.input("W", {dim(1024), dim(4096)}, DType::BF16);
  EXPECT_EQ(b.build(b.linear(x, w)).str(),
            parse_expression("linear(X[8,512,4096]:bf16, W[1024,4096]:bf16)").str());
}

TEST(Pitch, PitchedOutput) {
  // The result written into a slice of a larger buffer: rows 64 apart, 48 wide.
  Graph g = parse_expression("relu(matmul(A[64,32]:bf16, B[32,48]:bf16, out_pitch=64))");
  EXPECT_EQ(g.out_pitch, std::vector<int64_t>({64}));
  ASSERT_EQ(g.out_strides().size(), 1u);
  EXPECT_EQ(g.out_strides()[0].str(), "64");
  EXPECT_NE(g.str().find("output pitch |64"), std::string::npos) << g.str();
  g = parse_expression("bmm(A[2,16,8]:f32, B[2,8,12]:f32, out_pitch=16)");
  ASSERT_EQ(g.out_strides().size(), 2u);
  EXPECT_EQ(g.out_strides()[0].str(), "256");  // dense over the pitched rows
  GraphBuilder b;
  auto x = b.input("A", {dim(64), dim(32)}, DType::BF16);
  auto y = b.input("B", {dim(32), dim(48)}, DType::BF16);
  EXPECT_EQ(b.build(b.relu(b.matmul(x, y)), {64}).str(),
            parse_expression("relu(matmul(A[64,32]:bf16, B[32,48]:bf16, out_pitch=64))").str());
}

struct Failure {
  int column = 0;
  std::string message;
};

Failure fails(const std::string& text) {
  try {
    Graph g = parse_expression(text);
    ADD_FAILURE() << "parsed without error: " << text << "\n" << g.str();
  } catch (const ExprError& e) {
    return {e.column(), e.message()};
  }
  return {};
}

int column_of(const std::string& text, const std::string& needle) {
  return int(text.find(needle)) + 1;
}

TEST(PitchErrors, BelowTheWidth) {
  std::string text = "matmul(A[M,1000|999]:bf16, B[1000,N]:bf16)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "999"));
  EXPECT_NE(f.message.find("A[M,1000|999]: its row pitch 999 is below the 1000 elements of a row"),
            std::string::npos) << f.message;
  EXPECT_NE(f.message.find("give at least 1000"), std::string::npos) << f.message;
}

TEST(PitchErrors, BatchStrideBelowABatchEntry) {
  Failure f = fails("bmm(A[4,16,64|1000,72]:bf16, C[4,64,8]:bf16)");
  // One entry spans (16 - 1) * 72 + 64 = 1144 elements.
  EXPECT_NE(f.message.find("stride of dimension 0 1000 is below the 1144"), std::string::npos)
      << f.message;
}

TEST(PitchErrors, NotAPositiveInteger) {
  for (const char* bad : {"10.5", "0", "1e3"}) {
    std::string text = std::string("matmul(A[M,K|") + bad + "]:f16, B[K,N]:f16)";
    Failure f = fails(text);
    EXPECT_EQ(f.column, column_of(text, bad)) << text;
    EXPECT_NE(f.message.find("a stride of A must be a positive integer number of elements, found " +
                             std::string(bad)),
              std::string::npos) << f.message;
  }
  std::string text = "matmul(A[M,K|-8]:f16, B[K,N]:f16)";
  EXPECT_NE(fails(text).message.find("positive integer number of elements, found -8"),
            std::string::npos) << fails(text).message;
  text = "matmul(A[M,K|99999999999999999999]:f16, B[K,N]:f16)";
  EXPECT_NE(fails(text).message.find("is too large"), std::string::npos);
}

TEST(PitchErrors, SymbolIsNotAPitch) {
  std::string text = "matmul(A[M,K|LDA]:f16, B[K,N]:f16)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "LDA"));
  EXPECT_NE(f.message.find("must be a number of elements, found the symbol LDA"), std::string::npos)
      << f.message;
}

TEST(PitchErrors, TooManyStrides) {
  std::string text = "matmul(A[M,K|1056,1]:f16, B[K,N]:f16)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "1056"));
  EXPECT_NE(f.message.find("gives 2 strides for rank 2"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("at most 1"), std::string::npos) << f.message;
  EXPECT_NE(fails("linear(X[K|8]:f16, W[N,K]:f16)").message.find("gives 1 strides for rank 1"),
            std::string::npos);
}

TEST(PitchErrors, MalformedList) {
  EXPECT_NE(fails("matmul(A[M,K|1056:f16, B[K,N]:f16)").message.find(
                "expected ']' to close the strides of A, found ':'"),
            std::string::npos);
  EXPECT_NE(fails("matmul(A[M,K|]:f16, B[K,N]:f16)").message.find("expected a stride"),
            std::string::npos);
  EXPECT_NE(fails("matmul(A[M K]:f16, B[K,N]:f16)").message.find("or '|' and its row pitch"),
            std::string::npos);
}

TEST(PitchErrors, OneTensorTwoPitches) {
  Failure f = fails("matmul(A[M,M|64]:f16, A[M,M|72]:f16.T)");
  EXPECT_NE(f.message.find("tensor A is used twice with different storage: A[M,M|64]:f16 and "
                           "A[M,M|72].T:f16"),
            std::string::npos) << f.message;
  // The same pitch twice is one tensor, read both ways.
  Graph g = parse_expression("matmul(A[M,M|64]:f16, A[M,M|64]:f16.T)");
  EXPECT_EQ(g.nodes.size(), 3u);
}

TEST(PitchErrors, AttentionOperandsAreDense) {
  Failure f = fails("attention(Q[1,2,64,64|8192,4096,64]:bf16, K[1,2,64,64]:bf16, V[1,2,64,64]:bf16)");
  EXPECT_NE(f.message.find("attention: Q is Q[1,2,64,64|8192,4096,64], a pitched view"),
            std::string::npos) << f.message;
}

TEST(PitchErrors, PitchedOutput) {
  std::string text = "matmul(A[64,32]:bf16, B[32,48]:bf16, out_pitch=40)";
  Failure f = fails(text);
  EXPECT_EQ(f.column, column_of(text, "40"));
  EXPECT_NE(f.message.find("tensor out[64,48|40]: its row pitch 40 is below the 48 elements of a row"),
            std::string::npos) << f.message;
  f = fails("matmul(A[64,32]:bf16, B[32,48]:bf16, out_pitch=52)");
  EXPECT_NE(f.message.find("out_pitch=52: the output's rows must start at 16-byte units (52 x 2 B "
                           "of bf16 is not)"),
            std::string::npos) << f.message;
  EXPECT_NE(f.message.find("give a multiple of 8"), std::string::npos) << f.message;
  EXPECT_NE(fails("matmul(A[64,32]:f32, B[32,48]:f32, out_pitch=64, out_pitch=64)")
                .message.find("out_pitch= is given twice"),
            std::string::npos);
  EXPECT_NE(fails("matmul(A[64,32]:f32, B[32,48]:f32, out_pitch=M)").message.find("found the symbol M"),
            std::string::npos);
  EXPECT_NE(fails("matmul(A[64,32]:f32, B[32,48]:f32, pitch=64)").message.find("out_pitch=<elements>"),
            std::string::npos);
}

TEST(PitchErrors, FootprintOverTheLimit) {
  // 4 rows 2^60 elements apart: 8 elements, but the view spans 3 * 2^60 of them.
  Failure f = fails("matmul(A[4,8|1152921504606846976]:f32, B[8,4]:f32)");
  EXPECT_NE(f.message.find("is too large"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("over Loom's limit of 2^48"), std::string::npos) << f.message;
  f = fails("matmul(A[4,8|9223372036854775807]:f32, B[8,4]:f32)");  // INT64_MAX: no overflow
  EXPECT_NE(f.message.find("is too large"), std::string::npos) << f.message;
  f = fails("matmul(A[4,8]:f32, B[8,4]:f32, out_pitch=4611686018427387904)");
  EXPECT_NE(f.message.find("is too large"), std::string::npos) << f.message;
}

TEST(PitchErrors, BuilderRefusesNonPositiveStrides) {
  GraphBuilder b;
  try {
    b.input("A", {dim("M"), dim(8)}, DType::F16, false, {0});
    ADD_FAILURE() << "accepted a zero pitch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a stride must be a positive number of elements, found 0"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
