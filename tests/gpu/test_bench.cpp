// The benchmark harness on a GPU: the cuBLAS reference against the fp64 reference for
// every dtype and both transposes, DGEMM against the host loop, and the timing protocol
// on operations of known size. Every test skips with probe_device's reason without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "bench/cublas_ref.h"
#include "bench/reference.h"
#include "bench/reference_matmul.h"
#include "bench/report.h"
#include "bench/timing.h"
#include "bench/verify.h"
#include "runtime/device.h"
#include "runtime/driver.h"

namespace loom {
namespace {

class BenchGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!probe_device(0, &why)) GTEST_SKIP() << why;
  }
};

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { check_cuda(cudaMalloc(&p_, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  void upload(const HostTensor& t) {
    std::vector<char> b = to_storage_bytes(t);
    ASSERT_EQ(b.size(), bytes_);
    check_cuda(cudaMemcpy(p_, b.data(), b.size(), cudaMemcpyHostToDevice), "upload");
  }
  HostTensor download(DType t, std::vector<int64_t> shape) const {
    std::vector<char> b(bytes_);
    check_cuda(cudaMemcpy(b.data(), p_, bytes_, cudaMemcpyDeviceToHost), "download");
    return from_device_bytes(b.data(), b.size(), t, std::move(shape));
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

HostTensor random_tensor(DType t, std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  HostTensor h;
  h.dtype = t;
  h.shape = shape;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  for (int64_t i = 0; i < n; ++i) h.data.push_back(round_to_dtype(t, dist(rng)));
  return h;
}

Node input_node(int id, const std::string& name, std::vector<int64_t> logical, DType t,
                bool transposed) {
  Node n;
  n.id = id;
  n.kind = OpKind::Input;
  n.name = name;
  n.dtype = t;
  for (int64_t d : logical) n.shape.push_back(Dim{d, ""});
  n.transposed = transposed;
  return n;
}

// The graph C[batch,M,N] = A[batch,M,K] · B[batch,K,N], operands stored as `p` says.
Graph gemm_graph(const GemmProblem& p) {
  Graph g;
  g.nodes.push_back(input_node(0, "A", {p.batch, p.M, p.K}, p.in, p.a_transposed));
  g.nodes.push_back(input_node(1, "B", {p.batch, p.K, p.N}, p.in, p.b_transposed));
  Node mm;
  mm.id = 2;
  mm.kind = OpKind::Matmul;
  mm.name = "matmul";
  mm.dtype = p.out;
  mm.inputs = {0, 1};
  for (int64_t d : {p.batch, p.M, p.N}) mm.shape.push_back(Dim{d, ""});
  g.nodes.push_back(mm);
  return g;
}

// Runs cuBLAS on random inputs stored as `stored` says and verifies against the fp64
// reference of the graph `claimed` describes (the same, unless a test lies on purpose).
VerifyResult run_cublas(const GemmProblem& stored, const GemmProblem& claimed, uint64_t seed) {
  const std::vector<int64_t> a_shape = stored.a_transposed
      ? std::vector<int64_t>{stored.batch, stored.K, stored.M}
      : std::vector<int64_t>{stored.batch, stored.M, stored.K};
  const std::vector<int64_t> b_shape = stored.b_transposed
      ? std::vector<int64_t>{stored.batch, stored.N, stored.K}
      : std::vector<int64_t>{stored.batch, stored.K, stored.N};
  HostTensor A = random_tensor(stored.in, a_shape, seed);
  HostTensor B = random_tensor(stored.in, b_shape, seed + 1);
  const size_t esz = dtype_bytes(stored.in), osz = dtype_bytes(stored.out);
  DeviceBuffer dA(A.data.size() * esz), dB(B.data.size() * esz);
  DeviceBuffer dC(size_t(stored.batch * stored.M * stored.N) * osz);
  dA.upload(A);
  dB.upload(B);
  // Poison: 0xFF bytes are NaN in f32, f16 and bf16, so unwritten elements fail.
  check_cuda(cudaMemset(dC.get(), 0xFF, size_t(stored.batch * stored.M * stored.N) * osz), "poison");
  CublasGemm gemm(claimed);
  gemm.run(dA.get(), dB.get(), dC.get(), nullptr);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  HostTensor C = dC.download(stored.out, {stored.batch, stored.M, stored.N});
  HostTensor ref = reference_eval(gemm_graph(stored), {{"A", A}, {"B", B}}, false);
  return verify_output(C, ref, verify_threshold(stored.in, stored.out));
}

TEST_F(BenchGpu, CublasReferenceMatchesFp64ForEveryDtypeAndTranspose) {
  const std::pair<DType, DType> types[] = {{DType::F32, DType::F32}, {DType::TF32, DType::F32},
                                           {DType::F16, DType::F16}, {DType::BF16, DType::BF16},
                                           {DType::F16, DType::F32}, {DType::BF16, DType::F32}};
  uint64_t seed = 100;
  for (auto [in, out] : types)
    for (bool at : {false, true})
      for (bool bt : {false, true}) {
        GemmProblem p{2, 37, 29, 53, in, out, at, bt};
        VerifyResult r = run_cublas(p, p, seed += 2);
        EXPECT_TRUE(r.passed) << dtype_name(in) << "->" << dtype_name(out) << " a_t=" << at
                              << " b_t=" << bt << ": " << r.message;
      }
}

TEST_F(BenchGpu, CublasReferenceWithWrongTransposeFlagFails) {
  GemmProblem stored{1, 33, 33, 33, DType::F32, DType::F32, false, true};
  GemmProblem claimed = stored;
  claimed.b_transposed = false;
  VerifyResult r = run_cublas(stored, claimed, 7);
  EXPECT_FALSE(r.passed) << r.message;
}

TEST_F(BenchGpu, DgemmMatchesHostLoop) {
  const int64_t M = 45, K = 71, N = 38;
  for (bool at : {false, true})
    for (bool bt : {false, true}) {
      HostTensor A = random_tensor(DType::F64, {3, M, K}, 1);
      HostTensor B = random_tensor(DType::F64, {K, N}, 2);  // shared over the batch
      MatOperand ma{A.data.data(), {3}, M, K, at};
      MatOperand mb{B.data.data(), {}, K, N, bt};
      std::vector<double> gpu;
      ASSERT_TRUE(dgemm_f64(ma, mb, {3}, gpu));
      std::vector<double> host = matmul_f64_host(ma, mb, {3});
      ASSERT_EQ(gpu.size(), host.size());
      for (size_t i = 0; i < host.size(); ++i)
        ASSERT_NEAR(gpu[i], host[i], 1e-12 * (1 + std::abs(host[i]))) << "a_t=" << at << " b_t=" << bt << " i=" << i;
    }
}

TEST_F(BenchGpu, TimingOfKnownOperationsIsSane) {
  const size_t big = 256u << 20;
  DeviceBuffer src(big), dst(big), tiny(4096);
  cudaStream_t s;
  check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
  TimingOptions opt;
  opt.reps = 20;
  std::vector<Timing> t = time_interleaved(
      {[&](cudaStream_t st) { check_cuda(cudaMemsetAsync(tiny.get(), 1, 4096, st), "memset"); },
       [&](cudaStream_t st) {
         check_cuda(cudaMemcpyAsync(dst.get(), src.get(), big, cudaMemcpyDeviceToDevice, st), "copy");
       }},
      s, opt);
  ASSERT_EQ(t.size(), 2u);
  for (const Timing& x : t) {
    EXPECT_EQ(x.reps, 20);
    EXPECT_GT(x.min_us, 0.0);
    EXPECT_LE(x.min_us, x.p10_us);
    EXPECT_LE(x.p10_us, x.median_us);
    EXPECT_LE(x.median_us, x.p90_us);
  }
  // 512 MB moved at 1-5 TB/s: 100-500 µs; allow a wide margin for clocks and sharing.
  EXPECT_GT(t[1].median_us, 50.0);
  EXPECT_LT(t[1].median_us, 5000.0);
  // Timed together they are one comparison: the short launch makes both replay.
  ASSERT_TRUE(t[1].graph_median_us.has_value());
  EXPECT_GT(*t[1].graph_median_us, 50.0);
  EXPECT_LT(t[0].median_us, t[1].median_us);
  ASSERT_TRUE(t[0].graph_median_us.has_value());
  EXPECT_GT(*t[0].graph_median_us, 0.0);
  EXPECT_LT(*t[0].graph_median_us, 20.0);
  // Alone, the long copy is not replayed: launch overhead is no visible share of it.
  t = time_interleaved({[&](cudaStream_t st) {
                         check_cuda(cudaMemcpyAsync(dst.get(), src.get(), big,
                                                    cudaMemcpyDeviceToDevice, st), "copy");
                       }},
                       s, opt);
  EXPECT_FALSE(t[0].graph_median_us.has_value());

  opt.max_seconds = 0;
  opt.reps = 50;
  opt.graph_replay_if_short = false;
  t = time_interleaved({[&](cudaStream_t st) {
                         check_cuda(cudaMemsetAsync(tiny.get(), 2, 4096, st), "memset");
                       }},
                       s, opt);
  EXPECT_EQ(t[0].reps, 5);  // stopped by max_seconds at the 5-rep floor
  cudaStreamDestroy(s);
}

TEST_F(BenchGpu, CublasSmallGemmIsCapturedForGraphReplay) {
  GemmProblem p{1, 64, 64, 64, DType::F16, DType::F16};
  DeviceBuffer dA(64 * 64 * 2), dB(64 * 64 * 2), dC(64 * 64 * 2);
  dA.upload(random_tensor(DType::F16, {64, 64}, 3));
  dB.upload(random_tensor(DType::F16, {64, 64}, 4));
  CublasGemm gemm(p);
  cudaStream_t s;
  check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
  TimingOptions opt;
  opt.reps = 10;
  std::vector<Timing> t = time_interleaved(
      {[&](cudaStream_t st) { gemm.run(dA.get(), dB.get(), dC.get(), st); }}, s, opt);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_LT(t[0].median_us, kGraphReplayBelowUs);
  ASSERT_TRUE(t[0].graph_median_us.has_value());
  EXPECT_GT(*t[0].graph_median_us, 0.0);
  cudaStreamDestroy(s);
}

// The timing protocol on a compute-bound GEMM must land between a plausible floor and
// the physical limit (989 TFLOP/s dense bf16 on H100/H200): an error in the events or
// the per-launch bookkeeping shows up as a throughput far outside that band.
TEST_F(BenchGpu, CublasBf16GemmThroughputIsPhysicallyPlausible) {
  const int64_t n = 4096;
  GemmProblem p{1, n, n, n, DType::BF16, DType::BF16};
  DeviceBuffer dA(n * n * 2), dB(n * n * 2), dC(n * n * 2);
  dA.upload(random_tensor(DType::BF16, {n, n}, 5));
  dB.upload(random_tensor(DType::BF16, {n, n}, 6));
  CublasGemm gemm(p);
  cudaStream_t s;
  check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
  TimingOptions opt;
  opt.reps = 20;
  auto run = [&](cudaStream_t st) { gemm.run(dA.get(), dB.get(), dC.get(), st); };
  std::vector<Timing> t = time_interleaved({run, run}, s, opt);
  cudaStreamDestroy(s);
  const double flops = 2.0 * n * n * n;
  std::printf("%s", format_backends({{"cuBLAS", t[0]}, {"cuBLAS again", t[1]}}, flops).c_str());
  for (const Timing& x : t) {
    const double tflops = flops / (x.median_us * 1e-6) / 1e12;
    EXPECT_GT(tflops, 150.0);
    EXPECT_LT(tflops, 1000.0);
  }
  // The same launch timed interleaved with itself: the two medians agree closely.
  EXPECT_NEAR(t[0].median_us / t[1].median_us, 1.0, 0.1);
}

}  // namespace
}  // namespace loom
