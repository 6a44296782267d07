// GraphBuilder makes the same graphs as the expression language, applies the same
// rules, and Graph's printer, symbols and verifier behave as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "frontend/parser.h"
#include "ir/error.h"
#include "loom/builder.h"

namespace loom {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(Builder, MatchesParserForMatmulWithTransposedB) {
  GraphBuilder b;
  auto a = b.input("A", {dim("M"), dim("K")}, DType::F16);
  auto bt = b.input("B", {dim("N"), dim("K")}, DType::F16, true);
  Graph g = b.build(b.matmul(a, bt, DType::F32));
  EXPECT_EQ(g.str(), parse_expression("matmul(A[M,K]:f16, B[N,K]:f16.T, out=f32)").str());
  EXPECT_EQ(g.str(),
            "%0 = input A: f16[M, K]\n"
            "%1 = input B: f16[N, K] .T  (logical [K, N])\n"
            "%2 = matmul(%0, %1): f32[M, N]\n");
}

TEST(Builder, MatchesParserForBmm) {
  GraphBuilder b;
  auto x = b.input("A", {dim(8), dim(512), dim(1024)}, DType::BF16);
  auto y = b.input("B", {dim(8), dim(1024), dim(512)}, DType::BF16);
  EXPECT_EQ(b.build(b.bmm(x, y)).str(),
            parse_expression("bmm(A[8,512,1024]:bf16, B[8,1024,512]:bf16)").str());
}

TEST(Builder, MatchesParserForLinearWithBiasAndActivation) {
  GraphBuilder b;
  auto x = b.input("X", {dim("M"), dim("K")}, DType::BF16);
  auto w = b.input("W", {dim("N"), dim("K")}, DType::BF16);
  auto bias = b.input("bias", {dim("N")}, DType::BF16);
  Graph g = b.build(b.gelu(b.linear(x, w, bias)));
  EXPECT_EQ(g.str(),
            parse_expression("gelu(linear(X[M,K]:bf16, W[N,K]:bf16, bias[N]:bf16))").str());
  EXPECT_EQ(g.str(),
            "%0 = input X: bf16[M, K]\n"
            "%1 = input W: bf16[N, K] .T  (logical [K, N])\n"
            "%2 = matmul(%0, %1): bf16[M, N]  (from linear)\n"
            "%3 = input bias: bf16[N]\n"
            "%4 = add(%2, %3): bf16[M, N]  (from linear)\n"
            "%5 = gelu(%4): bf16[M, N]\n");
}

// The residual R is made first here but after the matmul in the text: numbering
// follows the result's operands, not the order of construction.
TEST(Builder, MatchesParserForScalarChain) {
  GraphBuilder b;
  auto a = b.input("A", {dim(4096), dim(4096)}, DType::F32);
  auto c = b.input("B", {dim(4096), dim(4096)}, DType::F32);
  auto r = b.input("R", {dim(4096), dim(4096)}, DType::F16);
  auto y = b.max(b.sub(b.add(b.mul(b.matmul(a, c), 0.5), r), 1.25), 0.0);
  EXPECT_EQ(b.build(y).str(),
            parse_expression("max(sub(add(mul(matmul(A[4096,4096]:f32, B[4096,4096]:f32), "
                             "0.5), R[4096,4096]:f16), 1.25), 0)")
                .str());
}

TEST(Builder, BuildKeepsOnlyWhatTheResultNeeds) {
  GraphBuilder b;
  auto unused = b.input("U", {dim(3)}, DType::F32);
  auto a = b.input("A", {dim(4), dim(4)}, DType::F32);
  auto m = b.matmul(a, a);
  b.relu(m);  // a branch the result does not use
  Graph g = b.build(b.silu(m));
  EXPECT_EQ(g.str(),
            "%0 = input A: f32[4, 4]\n"
            "%1 = matmul(%0, %0): f32[4, 4]\n"
            "%2 = silu(%1): f32[4, 4]\n");
  (void)unused;
}

TEST(Builder, CommutativeOperandsAreReordered) {
  GraphBuilder b;
  auto a = b.input("A", {dim("M"), dim("K")}, DType::F16);
  auto c = b.input("B", {dim("K"), dim("N")}, DType::F16);
  auto r = b.input("R", {dim("N")}, DType::F16);
  Graph g = b.build(b.mul(r, b.matmul(a, c)));
  EXPECT_EQ(g.node(g.result()).inputs, (std::vector<int>{2, 3}));
  EXPECT_EQ(g.nodes[2].kind, OpKind::Matmul);
  std::string e = error_of([&] { b.sub(r, b.matmul(a, c)); });
  EXPECT_NE(e.find("sub: the contraction's result must be the first operand"),
            std::string::npos)
      << e;
}

TEST(Builder, ErrorsHaveNoColumn) {
  GraphBuilder b;
  auto a = b.input("A", {dim(4096), dim(1024)}, DType::F32);
  auto c = b.input("B", {dim(512), dim(4096)}, DType::F32);
  EXPECT_EQ(error_of([&] { b.matmul(a, c); }),
            "matmul: inner dimensions differ: A[4096,1024] has K=1024 but B[512,4096] has "
            "K=512");
}

TEST(Builder, RejectsBadInputs) {
  GraphBuilder b;
  EXPECT_NE(error_of([&] { b.input("A", {dim(0), dim(4)}, DType::F32); })
                .find("positive integer, found 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.input("A", {dim("M K")}, DType::F32); }).find("'M K'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.input("A", {}, DType::F32); }).find("at least one dimension"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.input("A", {dim(4)}, DType::F32, true); }).find("rank 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.input("A", {dim(4)}, DType::F64); }).find("input dtypes are"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.input("2A", {dim(4)}, DType::F32); }).find("not an identifier"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.relu(TensorRef{7}); }).find("invalid TensorRef"),
            std::string::npos);
}

TEST(Builder, RejectsBadContractions) {
  GraphBuilder b;
  auto a = b.input("A", {dim("M"), dim("K")}, DType::F16);
  auto c = b.input("B", {dim("K"), dim("N")}, DType::F16);
  auto m = b.matmul(a, c);
  EXPECT_NE(error_of([&] { b.matmul(m, c); }).find("must be input tensors"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.add(m, b.matmul(a, c)); }).find("one contraction"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.add(b.relu(m), m); }).find("both operands"), std::string::npos);
  EXPECT_NE(error_of([&] { b.matmul(a, c, DType::TF32); }).find("input-only"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.build(a); }).find("no contraction"), std::string::npos);
  EXPECT_NE(error_of([&] { b.mul(m, std::nan("")); }).find("finite"), std::string::npos);
  EXPECT_NE(error_of([&] { b.mul(m, 1e39); }).find("mul: the number operand 1e+39 overflows f32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.add(m, 1e-46); }).find("add: the number operand 1e-46 rounds to 0 in f32"),
            std::string::npos);
}

TEST(Builder, SetColumnStampsNodes) {
  GraphBuilder b;
  b.set_column(5);
  auto a = b.input("A", {dim(2), dim(2)}, DType::F32);
  b.set_column(9);
  Graph g = b.build(b.matmul(a, a));
  EXPECT_EQ(g.nodes[0].column, 5);
  EXPECT_EQ(g.nodes[1].column, 9);
}

// ---- Graph ---------------------------------------------------------------------------

Graph small_graph() {
  return parse_expression("add(matmul(A[M,K]:f16, B[N,K]:f16.T), R[M,N]:f16)");
}

TEST(Graph, StorageShapeUndoesTheSwap) {
  Graph g = parse_expression("bmm(A[Bt,K,M]:f16.T, B[Bt,K,N]:f16)");
  EXPECT_EQ(g.nodes[0].shape[1].str(), "M");
  EXPECT_EQ(g.nodes[0].storage_shape()[1].str(), "K");
  EXPECT_EQ(g.nodes[0].storage_shape()[0].str(), "Bt");
  EXPECT_EQ(g.nodes[1].storage_shape()[2].str(), "N");
}

TEST(Graph, SymbolsInFirstUseOrder) {
  EXPECT_EQ(parse_expression("matmul(A[K,M]:f16.T, B[N,K]:f16.T)").symbols(),
            (std::vector<std::string>{"K", "M", "N"}));
  EXPECT_EQ(small_graph().symbols(), (std::vector<std::string>{"M", "K", "N"}));
}

TEST(Graph, VerifyAcceptsBuiltGraphs) { EXPECT_NO_THROW(small_graph().verify()); }

TEST(Graph, VerifyRejectsOutOfOrderOperands) {
  Graph g = small_graph();
  g.nodes[2].inputs[1] = 3;
  EXPECT_NE(error_of([&] { g.verify(); }).find("topological order"), std::string::npos);
}

TEST(Graph, VerifyRejectsWrongMatmulShape) {
  Graph g = small_graph();
  g.nodes[2].shape[1] = dim("K");
  EXPECT_NE(error_of([&] { g.verify(); }).find("should be [M, N]"), std::string::npos);
}

TEST(Graph, VerifyRejectsWrongArity) {
  Graph g = small_graph();
  g.nodes[4].inputs.pop_back();
  EXPECT_NE(error_of([&] { g.verify(); }).find("expects 2 tensor operand(s), has 1"),
            std::string::npos);
}

TEST(Graph, VerifyRejectsNonBroadcastingOperand) {
  Graph g = small_graph();
  g.nodes[3].shape = {dim("N"), dim("N")};
  EXPECT_NE(error_of([&] { g.verify(); }).find("does not broadcast"), std::string::npos);
}

TEST(Graph, VerifyRejectsDtypeChanges) {
  Graph g = small_graph();
  g.nodes[4].dtype = DType::F32;
  EXPECT_NE(error_of([&] { g.verify(); }).find("dtype differs"), std::string::npos);
  g = small_graph();
  g.nodes[1].dtype = DType::BF16;
  EXPECT_NE(error_of([&] { g.verify(); }).find("operand dtypes differ"), std::string::npos);
}

TEST(Graph, VerifyRejectsConflictingInputs) {
  Graph g = parse_expression("matmul(A[N,N]:f16, A[N,N]:f16.T)");
  g.nodes[1].dtype = DType::BF16;
  EXPECT_NE(error_of([&] { g.verify(); }).find("different storage shape, pitch or dtype"),
            std::string::npos);
}

TEST(Graph, VerifyRejectsEmptyGraph) {
  EXPECT_NE(error_of([] { Graph{}.verify(); }).find("no nodes"), std::string::npos);
}

}  // namespace
}  // namespace loom
