// Tuning keys: one key for two spellings of one computation, different keys for a
// different dtype, layout, epilogue, shape or GPU.
#include <gtest/gtest.h>

#include "driver/run.h"
#include "frontend/parser.h"
#include "tune/tuning_key.h"

namespace {

using namespace loom;
using loom::tune::key_for;
using loom::tune::TuningKey;

DeviceInfo h100() {
  DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.sm_count = 132;
  d.cc_major = 9;
  d.runtime_version = 13000;
  d.driver_version = 13000;
  return d;
}

TuningKey key_of(const std::string& expr, const std::map<std::string, int64_t>& dims = {},
                 const DeviceInfo& dev = h100()) {
  Graph g = bind_sizes(parse_expression(expr), dims);
  auto k = key_for(g, dev);
  EXPECT_TRUE(k) << expr;
  return k.value_or(TuningKey{});
}

TEST(TuningKey, ReadsAsGpuOpAndShape) {
  TuningKey k = key_of("matmul(A[4096,1024]:bf16, B[2048,1024]:bf16.T)");
  EXPECT_EQ(k.op, "matmul(bf16[M,K], bf16[N,K].T):bf16");
  EXPECT_EQ(k.shape, "M=4096,N=2048,K=1024");
  EXPECT_EQ(k.str(), "NVIDIA H100 80GB HBM3 (132 SMs, CUDA 13.0, driver 13.0) | "
                     "matmul(bf16[M,K], bf16[N,K].T):bf16 | M=4096,N=2048,K=1024");
  EXPECT_EQ(key_of("bmm(A[8,64,32]:f16, B[8,32,48]:f16, out=f32)").op,
            "matmul(f16[batch,M,K], f16[batch,K,N]):f32");
  EXPECT_EQ(key_of("bmm(A[8,64,32]:f16, B[8,32,48]:f16)").shape, "batch=8,M=64,N=48,K=32");
}

TEST(TuningKey, TwoSpellingsShareAKey) {
  // Tensor names, symbols bound by --dims, and linear() against its expansion.
  EXPECT_EQ(key_of("matmul(A[256,128]:f32, B[128,64]:f32)"),
            key_of("matmul(X[M,K]:f32, W[K,N]:f32)", {{"M", 256}, {"N", 64}, {"K", 128}}));
  TuningKey lin = key_of("relu(linear(X[512,256]:bf16, W[1024,256]:bf16, bias[1024]:bf16))");
  EXPECT_EQ(lin, key_of("relu(add(matmul(A[512,256]:bf16, B[1024,256]:bf16.T), b[1024]:bf16))"));
  EXPECT_EQ(lin.op, "relu(add(matmul(bf16[M,K], bf16[N,K].T):bf16, bf16[N]):bf16):bf16");
  // An immediate's value does not change the schedule.
  EXPECT_EQ(key_of("mul(matmul(A[64,64]:f32, B[64,64]:f32), 0.5)"),
            key_of("mul(matmul(A[64,64]:f32, B[64,64]:f32), 2)"));
}

TEST(TuningKey, DifferentProblemsDifferentKeys) {
  const std::string base = "matmul(A[256,128]:f32, B[128,64]:f32)";
  TuningKey k = key_of(base);
  EXPECT_NE(k, key_of("matmul(A[256,128]:bf16, B[128,64]:bf16)"));
  EXPECT_NE(k, key_of("matmul(A[256,128]:tf32, B[128,64]:tf32)"));
  EXPECT_NE(k, key_of("matmul(A[256,128]:f32, B[64,128]:f32.T)"));
  EXPECT_NE(k, key_of("matmul(A[128,256]:f32.T, B[128,64]:f32)"));
  EXPECT_NE(k, key_of("matmul(A[256,256]:f32, B[256,64]:f32)"));
  EXPECT_NE(k, key_of("relu(" + base + ")"));
  EXPECT_NE(key_of("add(" + base + ", r[256,64]:f32)"), key_of("add(" + base + ", b[64]:f32)"));
  EXPECT_NE(key_of("matmul(A[256,128]:f16, B[128,64]:f16)"),
            key_of("matmul(A[256,128]:f16, B[128,64]:f16, out=f32)"));
  DeviceInfo h200 = h100();
  h200.name = "NVIDIA H200";
  EXPECT_NE(k, key_of(base, {}, h200));
  DeviceInfo newer = h100();
  newer.driver_version = 13010;
  TuningKey kn = key_of(base, {}, newer);
  EXPECT_NE(k, kn);
  EXPECT_TRUE(k.same_problem(kn));
  EXPECT_FALSE(k.same_problem(key_of(base, {}, h200)));
}

TEST(TuningKey, SymbolicSizesHaveNoKey) {
  std::string why;
  EXPECT_FALSE(key_for(parse_expression("matmul(A[M,K]:f32, B[K,N]:f32)"), h100(), &why));
  EXPECT_NE(why.find("--dims"), std::string::npos) << why;
}

}  // namespace
