// loom::Plan and the C ABI on the GPU (skips without one): a GEMM and an attention
// executed on the caller's buffers and stream match the reference; new pointers rebind;
// run-time sizes (attention's B and S, a GEMM's M) give right answers at several sizes;
// a split-K plan (its workspace is a Temp) executed concurrently from threads on their
// own streams, and from two threads on one stream, stays right (each stream has its own
// workspace); an execution captured in a CUDA graph replays right; pointers that are
// host memory, or buffers smaller than their tensor, are refused; a plan with an explicit target is
// compile-only; the C ABI creates, executes and reports on the GPU. Also prints the
// host cost of one execute() with unchanged pointers.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "bench/cuda_call.h"
#include "bench/verify.h"
#include "bench/verify_attention.h"
#include "driver/run.h"
#include "frontend/parser.h"
#include "loom/loom_c.h"
#include "loom/plan.h"
#include "runtime/device.h"

namespace loom {
namespace {

class PlanGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = no_gpu_reason(0);
    if (!why.empty()) GTEST_SKIP() << why;
    make_device_current(0);
  }
};

// bf16 bit patterns of small integers (exact) and back.
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A bf16 GEMM problem on the device: integer inputs in [-2, 2], so the f32 accumulation
// is exact and the only error is the output's rounding to bf16 (half an ulp, 2^-8 of
// the value at most).
struct Gemm {
  int M, N, K;
  std::vector<float> a, b;
  void* da = nullptr;
  void* db = nullptr;
  void* dc = nullptr;
  Gemm(int m, int n, int k, uint32_t seed) : M(m), N(n), K(k), a(size_t(m) * k), b(size_t(k) * n) {
    std::mt19937 rng(seed);
    for (auto& x : a) x = float(int(rng() % 5) - 2);
    for (auto& x : b) x = float(int(rng() % 5) - 2);
    std::vector<uint16_t> ha(a.size()), hb(b.size());
    for (size_t i = 0; i < a.size(); ++i) ha[i] = to_bf16(a[i]);
    for (size_t i = 0; i < b.size(); ++i) hb[i] = to_bf16(b[i]);
    LOOM_CUDA_RT(cudaMalloc(&da, ha.size() * 2));
    LOOM_CUDA_RT(cudaMalloc(&db, hb.size() * 2));
    LOOM_CUDA_RT(cudaMalloc(&dc, size_t(M) * N * 2));
    LOOM_CUDA_RT(cudaMemcpy(da, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
    LOOM_CUDA_RT(cudaMemcpy(db, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
  }
  ~Gemm() {
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
  }
  std::map<std::string, void*> ptrs() const { return {{"A", da}, {"B", db}, {"out", dc}}; }
  void poison(cudaStream_t s) const { LOOM_CUDA_RT(cudaMemsetAsync(dc, 0xFF, size_t(M) * N * 2, s)); }
  // Rows and columns sampled across the whole output; "" when every sample matches.
  std::string check() const {
    std::vector<uint16_t> hc(size_t(M) * N);
    LOOM_CUDA_RT(cudaMemcpy(hc.data(), dc, hc.size() * 2, cudaMemcpyDeviceToHost));
    for (int i = 0; i < M; i += 7)
      for (int j = 0; j < N; j += 5) {
        double ref = 0;
        for (int k = 0; k < K; ++k) ref += double(a[size_t(i) * K + k]) * b[size_t(k) * N + j];
        const double got = from_bf16(hc[size_t(i) * N + j]);
        if (!(std::fabs(got - ref) <= std::fabs(ref) * std::ldexp(1.0, -8)))
          return "out[" + std::to_string(i) + "," + std::to_string(j) + "] = " + std::to_string(got) +
                 ", expected " + std::to_string(ref);
      }
    return "";
  }
};

const char* kGemm = "matmul(A[256,4096]:bf16, B[4096,256]:bf16)";

TEST_F(PlanGpu, GemmOnCallerBuffersAndStream) {
  Plan plan(kGemm);
  ASSERT_TRUE(plan.executable()) << plan.not_executable_reason();
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  for (uint32_t seed : {1u, 2u}) {  // the second problem's pointers rebind the launch
    SCOPED_TRACE(seed);
    Gemm g(256, 256, 4096, seed);
    g.poison(s);
    plan.execute(g.ptrs(), s);
    LOOM_CUDA_RT(cudaStreamSynchronize(s));
    EXPECT_EQ(g.check(), "") << plan.describe();
    g.poison(s);
    plan.execute({g.da, g.db, g.dc}, s);  // positional, in the order of tensors()
    LOOM_CUDA_RT(cudaStreamSynchronize(s));
    EXPECT_EQ(g.check(), "");
  }
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

// Executes attention plan `plan` of `e` with run-time `sizes` on fresh random buffers and
// checks it against the fp64 reference: "" when it passes, else why.
std::string attention_check(const Plan& plan, const std::string& e,
                            const std::map<std::string, int64_t>& sizes, cudaStream_t s, uint32_t seed) {
  Graph g = bind_sizes(parse_expression(e), sizes);
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::map<std::string, HostTensor> inputs;
  std::map<std::string, void*> ptrs;
  for (const auto& t0 : plan.tensors()) {
    const TensorInfo t = plan.tensor(t0.name, sizes);
    void* d = nullptr;
    LOOM_CUDA_RT(cudaMalloc(&d, size_t(t.bytes)));
    ptrs[t.name] = d;
    if (t.role != "input") continue;
    HostTensor h;
    h.dtype = DType::BF16;
    h.shape = t.shape;
    h.data.resize(size_t(t.bytes / 2));
    for (auto& v : h.data) v = round_to_dtype(DType::BF16, nd(rng));
    std::vector<char> bytes = to_storage_bytes(h);
    LOOM_CUDA_RT(cudaMemcpy(d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    inputs[t.name] = h;
  }
  const TensorInfo o = plan.tensor("out", sizes);
  LOOM_CUDA_RT(cudaMemsetAsync(ptrs["out"], 0xFF, size_t(o.bytes), s));
  plan.execute(ptrs, sizes, s);
  LOOM_CUDA_RT(cudaStreamSynchronize(s));
  std::vector<char> raw(size_t(o.bytes));
  LOOM_CUDA_RT(cudaMemcpy(raw.data(), ptrs["out"], raw.size(), cudaMemcpyDeviceToHost));
  for (auto& [n, p] : ptrs) cudaFree(p);
  HostTensor out = from_device_bytes(raw.data(), raw.size(), DType::BF16, o.shape);
  AttentionVerify v = verify_attention(g, inputs, out, nullptr);
  return v.passed() ? "" : v.message();
}

TEST_F(PlanGpu, AttentionMatchesReference) {
  const std::string e =
      "attention(Q[1,8,512,128]:bf16, K[1,2,512,128]:bf16, V[1,2,512,128]:bf16, causal=true)";
  Plan plan(e);
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  EXPECT_EQ(attention_check(plan, e, {}, s, 7), "");
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

// One plan, batch and sequence length given at each execute (docs/api.md).
TEST_F(PlanGpu, AttentionWithRuntimeSizes) {
  const std::string e =
      "attention(Q[B,8,S,128]:bf16, K[B,2,S,128]:bf16, V[B,2,S,128]:bf16, causal=true)";
  PlanOptions o;
  o.runtime_sizes = {"B", "S"};
  Plan plan(e, o);
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  for (auto [b, len] : {std::pair<int64_t, int64_t>{2, 300}, {1, 1000}, {3, 64}}) {
    SCOPED_TRACE("B=" + std::to_string(b) + " S=" + std::to_string(len));
    EXPECT_EQ(attention_check(plan, e, {{"B", b}, {"S", len}}, s, uint32_t(len)), "");
  }
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

// Decode with a run-time key length and a fixed split-KV count (B bound: the workspace
// grows with B): right from lengths shorter than the splits to long ones.
TEST_F(PlanGpu, DecodeWithRuntimeLengthAndSplitKv) {
  const std::string e = "attention(Q[2,16,1,128]:bf16, K[2,4,S,128]:bf16, V[2,4,S,128]:bf16)";
  PlanOptions o;
  o.runtime_sizes = {"S"};
  o.knobs = "SPLIT_KV=8";
  Plan plan(e, o);
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  for (int64_t len : {int64_t(100), int64_t(1000), int64_t(4096)}) {
    SCOPED_TRACE("S=" + std::to_string(len));
    EXPECT_EQ(attention_check(plan, e, {{"S", len}}, s, uint32_t(len)), "");
  }
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

// A GEMM with a run-time M (the CUDA-core kernels): right for sizes off the tile grid.
TEST_F(PlanGpu, GemmWithRuntimeM) {
  PlanOptions o;
  o.runtime_sizes = {"M"};
  Plan plan("matmul(A[M,4096]:bf16, B[4096,256]:bf16)", o);
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  for (int m : {256, 77}) {
    SCOPED_TRACE(m);
    Gemm g(m, 256, 4096, uint32_t(m));
    g.poison(s);
    plan.execute(g.ptrs(), {{"M", m}}, s);
    LOOM_CUDA_RT(cudaStreamSynchronize(s));
    EXPECT_EQ(g.check(), "");
  }
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

// Split-K's partial tiles live in a Temp that every launch writes: shared between two
// streams, concurrent executions would add each other's partial sums.
PlanOptions split_k() {
  PlanOptions o;
  o.knobs = "SPLITK=4";
  o.use_tuning_db = false;
  return o;
}

TEST_F(PlanGpu, ConcurrentExecuteFromThreadsOnTheirStreams) {
  Plan plan(kGemm, split_k());
  constexpr int kThreads = 4, kRounds = 20;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        // A fresh thread: execute() binds the plan's GPU itself.
        Gemm g(256, 256, 4096, 100 + t);
        cudaStream_t s;
        LOOM_CUDA_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        for (int r = 0; r < kRounds && failures[t].empty(); ++r) {
          g.poison(s);
          plan.execute(g.ptrs(), s);
          LOOM_CUDA_RT(cudaStreamSynchronize(s));
          failures[t] = g.check();
        }
        LOOM_CUDA_RT(cudaStreamDestroy(s));
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

TEST_F(PlanGpu, ConcurrentExecuteOnOneStreamAndPerThreadStreams) {
  Plan plan(kGemm, split_k());
  cudaStream_t shared;
  LOOM_CUDA_RT(cudaStreamCreateWithFlags(&shared, cudaStreamNonBlocking));
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      try {
        Gemm g(256, 256, 4096, 200 + t);
        // Threads 0-1 share one stream; 2-3 use cudaStreamPerThread (a stream per thread
        // behind one handle).
        cudaStream_t s = t < 2 ? shared : cudaStreamPerThread;
        for (int r = 0; r < 10 && failures[t].empty(); ++r) {
          g.poison(s);
          plan.execute(g.ptrs(), s);
          LOOM_CUDA_RT(cudaStreamSynchronize(s));
          failures[t] = g.check();
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  LOOM_CUDA_RT(cudaStreamDestroy(shared));
}

// docs/api.md: execute once on a stream, then an execution captured on it replays right.
TEST_F(PlanGpu, CapturedInACudaGraph) {
  Plan plan(kGemm, split_k());
  Gemm g(256, 256, 4096, 8);
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  plan.execute(g.ptrs(), s);  // allocates the stream's workspace outside the capture
  LOOM_CUDA_RT(cudaStreamSynchronize(s));
  cudaGraph_t graph;
  LOOM_CUDA_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  plan.execute(g.ptrs(), s);
  LOOM_CUDA_RT(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  LOOM_CUDA_RT(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 3; ++r) {
    g.poison(s);
    LOOM_CUDA_RT(cudaGraphLaunch(exec, s));
    LOOM_CUDA_RT(cudaStreamSynchronize(s));
    EXPECT_EQ(g.check(), "") << "replay " << r;
  }
  LOOM_CUDA_RT(cudaGraphExecDestroy(exec));
  LOOM_CUDA_RT(cudaGraphDestroy(graph));
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

TEST_F(PlanGpu, HostMemoryIsRefused) {
  Plan plan(kGemm);
  Gemm g(256, 256, 4096, 3);
  std::vector<char> host(size_t(256) * 256 * 2 + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(host.data()) + 15) & ~uintptr_t(15));
  auto ptrs = g.ptrs();
  ptrs["out"] = aligned;
  try {
    plan.execute(ptrs);
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("pointer for out"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("host memory"), std::string::npos) << e.what();
  }
  void* pinned = nullptr;
  LOOM_CUDA_RT(cudaMallocHost(&pinned, size_t(256) * 4096 * 2));
  ptrs = g.ptrs();
  ptrs["A"] = pinned;
  try {
    plan.check(ptrs);
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("host memory (pinned)"), std::string::npos) << e.what();
  }
  LOOM_CUDA_RT(cudaFreeHost(pinned));
  EXPECT_NO_THROW(plan.check(g.ptrs()));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the checks leave no error behind
}

// A buffer that ends before its tensor does: the kernel would write past it.
TEST_F(PlanGpu, BufferTooSmallIsRefused) {
  Plan plan(kGemm);
  Gemm g(256, 256, 4096, 9);
  void* small = nullptr;
  LOOM_CUDA_RT(cudaMalloc(&small, size_t(256) * 256));  // half the 131072 bytes out needs
  auto ptrs = g.ptrs();
  ptrs["out"] = small;
  try {
    plan.execute(ptrs);
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("buffer for out"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("needs 131072"), std::string::npos) << e.what();
  }
  // A pointer into the middle of a large enough allocation, running past its end.
  ptrs = g.ptrs();
  ptrs["B"] = static_cast<char*>(g.db) + (1 << 20);  // B is 2 MiB
  try {
    plan.check(ptrs);
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("buffer for B"), std::string::npos) << e.what();
  }
  // Inside a larger allocation and ending within it: accepted (a slice of a pool).
  void* big = nullptr;
  LOOM_CUDA_RT(cudaMalloc(&big, size_t(256) * 256 * 2 + 4096));
  ptrs = g.ptrs();
  ptrs["out"] = static_cast<char*>(big) + 4096;
  EXPECT_NO_THROW(plan.check(ptrs));
  cudaFree(big);
  cudaFree(small);
}

TEST_F(PlanGpu, PointerOnAnotherGpuIsRefused) {
  int n = 0;
  LOOM_CUDA_RT(cudaGetDeviceCount(&n));
  if (n < 2) GTEST_SKIP() << "one GPU: no pointer of another GPU to pass";
  Plan plan(kGemm);
  Gemm g(256, 256, 4096, 4);
  LOOM_CUDA_RT(cudaSetDevice(1));
  void* other = nullptr;
  LOOM_CUDA_RT(cudaMalloc(&other, size_t(256) * 256 * 2));
  auto ptrs = g.ptrs();
  ptrs["out"] = other;
  try {
    plan.execute(ptrs);
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("on GPU 1 but the plan runs on GPU 0"), std::string::npos)
        << e.what();
  }
  int current = -1;
  LOOM_CUDA_RT(cudaGetDevice(&current));
  EXPECT_EQ(current, 1);  // execute() gave the caller's device back
  cudaFree(other);
  LOOM_CUDA_RT(cudaSetDevice(0));
}

TEST_F(PlanGpu, PlanWithATargetIsCompileOnly) {
  PlanOptions o;
  o.target = "sm_80";
  Plan plan("matmul(A[64,64]:f16, B[64,64]:f16)", o);
  EXPECT_FALSE(plan.executable());
  EXPECT_NE(plan.not_executable_reason().find("compiled for sm_80 only"), std::string::npos)
      << plan.not_executable_reason();
}

TEST_F(PlanGpu, CAbiExecutesAndReports) {
  loom_plan_t p = nullptr;
  ASSERT_EQ(loom_plan_create(kGemm, nullptr, &p), LOOM_SUCCESS) << loom_last_error();
  int executable = 0;
  ASSERT_EQ(loom_plan_executable(p, &executable), LOOM_SUCCESS);
  EXPECT_EQ(executable, 1);
  Gemm g(256, 256, 4096, 5);
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  const char* names[3] = {"B", "A", "out"};  // any order by name
  void* ptrs[3] = {g.db, g.da, g.dc};
  g.poison(s);
  ASSERT_EQ(loom_plan_execute(p, names, ptrs, 3, s), LOOM_SUCCESS) << loom_last_error();
  LOOM_CUDA_RT(cudaStreamSynchronize(s));
  EXPECT_EQ(g.check(), "");
  void* positional[3] = {g.da, g.db, g.dc};
  g.poison(s);
  ASSERT_EQ(loom_plan_execute_positional(p, positional, 3, s), LOOM_SUCCESS) << loom_last_error();
  LOOM_CUDA_RT(cudaStreamSynchronize(s));
  EXPECT_EQ(g.check(), "");
  std::vector<char> host(64);
  void* on_host[3] = {g.da, g.db, reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(host.data()) + 15) & ~uintptr_t(15))};
  EXPECT_EQ(loom_plan_execute_positional(p, on_host, 3, s), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(loom_last_error()).find("host memory"), std::string::npos) << loom_last_error();
  LOOM_CUDA_RT(cudaStreamDestroy(s));
  EXPECT_EQ(loom_plan_destroy(p), LOOM_SUCCESS);
  EXPECT_EQ(loom_plan_destroy(p), LOOM_ERROR_INVALID_HANDLE);
}

// Not a pass/fail test of speed: the host cost of execute() with the pointers of the
// last call (argument resolution cached), printed for the report.
TEST_F(PlanGpu, ExecuteHostCost) {
  Plan plan(kGemm);
  Gemm g(256, 256, 4096, 6);
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  const auto ptrs = g.ptrs();
  plan.execute(ptrs, s);
  LOOM_CUDA_RT(cudaStreamSynchronize(s));
  constexpr int kCalls = 200;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) plan.execute(ptrs, s);
  auto t1 = std::chrono::steady_clock::now();
  LOOM_CUDA_RT(cudaStreamSynchronize(s));
  auto t2 = std::chrono::steady_clock::now();
  const double host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / kCalls;
  const double total_us = std::chrono::duration<double, std::micro>(t2 - t0).count() / kCalls;
  std::printf("plan.execute host cost: %.2f us/call; %.2f us/call including the kernels (%s)\n",
              host_us, total_us, plan.knobs_string().c_str());
  RecordProperty("execute_host_us", std::to_string(host_us));
  EXPECT_EQ(g.check(), "");
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

// Buffers that change every call (PyTorch's allocator hands each call a new output):
// the launch is rebound, not rebuilt, and the tensor maps of the moved buffers are encoded
// again. Alternating two problems (A, B, A, ...) checks both directions of the rebind, and
// the printed cost is what each call of a torch op pays for it.
TEST_F(PlanGpu, AlternatingBuffersRebindAndTheirHostCost) {
  Plan plan(kGemm);
  ASSERT_TRUE(plan.executable()) << plan.not_executable_reason();
  Gemm g1(256, 256, 4096, 11), g2(256, 256, 4096, 12);
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    for (Gemm* g : {&g1, &g2}) {
      g->poison(s);
      plan.execute(g->ptrs(), s);
      LOOM_CUDA_RT(cudaStreamSynchronize(s));
      EXPECT_EQ(g->check(), "") << plan.describe();
    }
  }
  const auto p1 = g1.ptrs(), p2 = g2.ptrs();
  constexpr int kCalls = 200;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) plan.execute(i % 2 ? p2 : p1, s);
  auto t1 = std::chrono::steady_clock::now();
  LOOM_CUDA_RT(cudaStreamSynchronize(s));
  const double host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / kCalls;
  std::printf("plan.execute host cost with new buffers every call: %.2f us/call (%s)\n", host_us,
              plan.knobs_string().c_str());
  RecordProperty("execute_rebind_host_us", std::to_string(host_us));
  EXPECT_EQ(g1.check(), "");
  EXPECT_EQ(g2.check(), "");
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

// Not a pass/fail test of speed: one attention shape through a bound plan and a plan
// with run-time B and S (the same knobs), each timed over 20 executions after a warm-up;
// the ratio is printed for the report.
TEST_F(PlanGpu, RuntimeSizesSpeed) {
  const std::map<std::string, int64_t> sizes = {{"B", 2}, {"S", 2048}};
  PlanOptions defaults;  // both from the defaults: the comparison is of the sizes alone
  defaults.use_tuning_db = false;
  Plan bound("attention(Q[2,16,2048,128]:bf16, K[2,4,2048,128]:bf16, V[2,4,2048,128]:bf16, causal=true)",
             defaults);
  PlanOptions o = defaults;
  o.runtime_sizes = {"B", "S"};
  Plan sized("attention(Q[B,16,S,128]:bf16, K[B,4,S,128]:bf16, V[B,4,S,128]:bf16, causal=true)", o);
  std::map<std::string, void*> ptrs;
  for (const auto& t : bound.tensors()) {
    LOOM_CUDA_RT(cudaMalloc(&ptrs[t.name], size_t(t.bytes)));
    LOOM_CUDA_RT(cudaMemset(ptrs[t.name], 0, size_t(t.bytes)));  // zeros: no NaN paths
  }
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  LOOM_CUDA_RT(cudaEventCreate(&e0));
  LOOM_CUDA_RT(cudaEventCreate(&e1));
  auto time_us = [&](const std::function<void()>& launch) {
    for (int i = 0; i < 3; ++i) launch();
    LOOM_CUDA_RT(cudaEventRecord(e0, s));
    for (int i = 0; i < 20; ++i) launch();
    LOOM_CUDA_RT(cudaEventRecord(e1, s));
    LOOM_CUDA_RT(cudaEventSynchronize(e1));
    float ms = 0;
    LOOM_CUDA_RT(cudaEventElapsedTime(&ms, e0, e1));
    return ms * 1000.0 / 20;
  };
  const double t_bound = time_us([&] { bound.execute(ptrs, s); });
  const double t_sized = time_us([&] { sized.execute(ptrs, sizes, s); });
  std::printf("attention B=2 H=16/4 S=2048 D=128 causal: bound %.1f us, run-time sizes %.1f us "
              "(ratio %.3f; knobs %s | %s)\n",
              t_bound, t_sized, t_sized / t_bound, bound.knobs_string().c_str(), sized.knobs_string().c_str());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  for (auto& [n, p] : ptrs) cudaFree(p);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

}  // namespace
}  // namespace loom
