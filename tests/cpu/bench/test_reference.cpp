#include "bench/reference.h"

#include <gtest/gtest.h>

#include <random>

#include "bench/reference_matmul.h"
#include "ir/error.h"

namespace loom {
namespace {

Dim sym(const char* s) { return Dim{0, s}; }
Dim num(int64_t v) { return Dim{v, ""}; }

// Builds a Graph by hand, so these tests depend on the IR only, not on the parser.
struct GraphBuilder {
  Graph g;
  int input(const std::string& name, std::vector<Dim> logical, bool transposed = false) {
    Node n;
    n.kind = OpKind::Input;
    n.name = name;
    n.shape = std::move(logical);
    n.transposed = transposed;
    return add(std::move(n));
  }
  int matmul(int a, int b, std::vector<Dim> shape) {
    Node n;
    n.kind = OpKind::Matmul;
    n.name = "matmul";
    n.inputs = {a, b};
    n.shape = std::move(shape);
    return add(std::move(n));
  }
  int binary(ScalarOp op, int a, int b, std::vector<Dim> shape) {
    Node n;
    n.kind = OpKind::Binary;
    n.name = scalar_op_name(op);
    n.op = op;
    n.inputs = {a, b};
    n.shape = std::move(shape);
    return add(std::move(n));
  }
  int binary_scalar(ScalarOp op, int a, double s) {
    Node n;
    n.kind = OpKind::Binary;
    n.name = scalar_op_name(op);
    n.op = op;
    n.inputs = {a};
    n.scalar = s;
    n.shape = g.nodes.at(a).shape;
    return add(std::move(n));
  }
  int unary(ScalarOp op, int a) {
    Node n;
    n.kind = OpKind::Unary;
    n.name = scalar_op_name(op);
    n.op = op;
    n.inputs = {a};
    n.shape = g.nodes.at(a).shape;
    return add(std::move(n));
  }
  int add(Node n) {
    n.id = int(g.nodes.size());
    g.nodes.push_back(std::move(n));
    return g.nodes.back().id;
  }
};

HostTensor host(std::vector<int64_t> shape, std::vector<double> data, DType t = DType::F32) {
  HostTensor h;
  h.dtype = t;
  h.shape = std::move(shape);
  h.data = std::move(data);
  return h;
}

HostTensor random_host(std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  HostTensor h = host(shape, {});
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  for (int64_t i = 0; i < n; ++i) h.data.push_back(double(float(dist(rng))));
  return h;
}

// A[2,3] · B[3,2] with B stored transposed as [2,3]:
//   A = [[1,2,3],[4,5,6]], B(logical) = [[1,2],[0,1],[-1,0]]  ->  C = [[-2,4],[-2,13]]
struct LinearCase {
  GraphBuilder b;
  std::map<std::string, HostTensor> in{
      {"A", host({2, 3}, {1, 2, 3, 4, 5, 6})},
      {"B", host({2, 3}, {1, 0, -1, 2, 1, 0})},  // storage [N,K]
      {"bias", host({2}, {0.5, -10})},
  };
  int mm = -1;
  LinearCase() {
    int a = b.input("A", {sym("M"), sym("K")});
    int w = b.input("B", {sym("K"), sym("N")}, /*transposed=*/true);
    mm = b.matmul(a, w, {sym("M"), sym("N")});
  }
};

TEST(ReferenceEval, MatmulWithTransposedOperand) {
  LinearCase c;
  HostTensor r = reference_eval(c.b.g, c.in, false);
  EXPECT_EQ(r.dtype, DType::F64);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r.data, (std::vector<double>{-2, 4, -2, 13}));
}

TEST(ReferenceEval, BiasBroadcastThenRelu) {
  LinearCase c;
  int bias = c.b.input("bias", {sym("N")});
  int add = c.b.binary(ScalarOp::Add, c.mm, bias, {sym("M"), sym("N")});
  HostTensor with_bias = reference_eval(c.b.g, c.in, false);
  EXPECT_EQ(with_bias.data, (std::vector<double>{-1.5, -6, -1.5, 3}));
  c.b.unary(ScalarOp::Relu, add);
  HostTensor r = reference_eval(c.b.g, c.in, false);
  EXPECT_EQ(r.data, (std::vector<double>{0, 0, 0, 3}));
}

TEST(ReferenceEval, TransposedLeftOperandAndScalarMultiply) {
  GraphBuilder b;
  // A logical [2,3] stored [3,2]: storage [[1,4],[2,5],[3,6]] is A = [[1,2,3],[4,5,6]].
  int a = b.input("A", {num(2), num(3)}, true);
  int w = b.input("W", {num(3), num(1)});
  int mm = b.matmul(a, w, {num(2), num(1)});
  b.binary_scalar(ScalarOp::Mul, mm, 0.5);
  std::map<std::string, HostTensor> in{{"A", host({3, 2}, {1, 4, 2, 5, 3, 6})},
                                       {"W", host({3, 1}, {1, 1, 2})}};
  HostTensor r = reference_eval(b.g, in, false);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(r.data, (std::vector<double>{4.5, 10.5}));  // (1+2+6)/2, (4+5+12)/2
}

TEST(ReferenceEval, BatchedMatmulBroadcastsSharedOperand) {
  GraphBuilder b;
  int a = b.input("A", {num(2), num(1), num(2)});
  int w = b.input("W", {num(2), num(2)});
  b.matmul(a, w, {num(2), num(1), num(2)});
  std::map<std::string, HostTensor> in{{"A", host({2, 1, 2}, {1, 2, 3, 4})},
                                       {"W", host({2, 2}, {1, 10, 100, 1000})}};
  HostTensor r = reference_eval(b.g, in, false);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 1, 2}));
  EXPECT_EQ(r.data, (std::vector<double>{201, 2010, 403, 4030}));
}

TEST(ReferenceEval, ResultIsATransposedInputInLogicalLayout) {
  GraphBuilder b;
  int x = b.input("X", {num(2), num(3)}, true);
  b.binary_scalar(ScalarOp::Add, x, 0.0);
  HostTensor r = reference_eval(b.g, {{"X", host({3, 2}, {1, 4, 2, 5, 3, 6})}}, false);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.data, (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(ReferenceEval, MissingInputThrows) {
  LinearCase c;
  c.in.erase("B");
  EXPECT_THROW(reference_eval(c.b.g, c.in, false), Error);
}

TEST(ReferenceEval, InconsistentSymbolThrowsNamingIt) {
  LinearCase c;
  c.in["B"] = host({2, 4}, std::vector<double>(8, 1.0));  // K = 4 against A's K = 3
  try {
    reference_eval(c.b.g, c.in, false);
    FAIL() << "expected loom::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbol K"), std::string::npos) << e.what();
  }
}

// The threaded host path against a plain triple loop, on a shape that splits over threads.
TEST(ReferenceEval, ThreadedHostMatmulMatchesNaiveLoop) {
  const int64_t M = 67, K = 129, N = 131;
  GraphBuilder b;
  int a = b.input("A", {num(M), num(K)});
  int w = b.input("B", {num(K), num(N)}, true);
  b.matmul(a, w, {num(M), num(N)});
  HostTensor A = random_host({M, K}, 11), B = random_host({N, K}, 12);
  HostTensor r = reference_eval(b.g, {{"A", A}, {"B", B}}, false);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += A.data[i * K + k] * B.data[j * K + k];
      ASSERT_NEAR(r.data[i * N + j], s, 1e-12) << i << "," << j;
    }
}

// use_gpu on a problem above the DGEMM size: DGEMM where a GPU exists, the host loop
// where none does; either way the same numbers.
TEST(ReferenceEval, LargeProblemGivesTheSameAnswerWithOrWithoutGpu) {
  const int64_t M = 256, K = 160, N = 264;
  ASSERT_GT(double(M * N * K), kGpuReferenceMacs);
  GraphBuilder b;
  int a = b.input("A", {num(M), num(K)}, true);
  int w = b.input("B", {num(K), num(N)});
  b.matmul(a, w, {num(M), num(N)});
  HostTensor A = random_host({K, M}, 21), B = random_host({K, N}, 22);
  std::map<std::string, HostTensor> in{{"A", A}, {"B", B}};
  HostTensor host_r = reference_eval(b.g, in, false);
  HostTensor any_r = reference_eval(b.g, in, true);
  ASSERT_EQ(host_r.data.size(), any_r.data.size());
  for (size_t i = 0; i < host_r.data.size(); ++i)
    ASSERT_NEAR(host_r.data[i], any_r.data[i], 1e-11) << i;
  // Spot-check one element against the definition (A stored [K,M]).
  double s = 0;
  for (int64_t k = 0; k < K; ++k) s += A.data[k * M + 5] * B.data[k * N + 7];
  EXPECT_NEAR(host_r.data[5 * N + 7], s, 1e-12);
}

TEST(MatmulF64, HostLoopHandlesTransposedRightOperand) {
  // B logical [2,2] = [[1,2],[3,4]] stored transposed [[1,3],[2,4]].
  std::vector<double> a{1, 1}, bt{1, 3, 2, 4};
  MatOperand ma{a.data(), {}, 1, 2, false};
  MatOperand mb{bt.data(), {}, 2, 2, true};
  EXPECT_EQ(matmul_f64_host(ma, mb, {}), (std::vector<double>{4, 6}));
}

}  // namespace
}  // namespace loom
