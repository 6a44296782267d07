// One compiled wgmma plan serving every size (tests/gpu/wgmma_symbolic_cases.h): a plan
// with run-time sizes (PlanOptions::runtime_sizes) executed at M = 1, 7, 64, 1000, 4097
// (both ends of every range where the default holds a kernel per range of M, so each of
// its kernels runs, in turn and back; and run-time N and K, with tails, where the case has
// them) on fresh random bf16/f16 inputs, the
// output poisoned with NaN first, each result against the fp64 reference (cuBLAS DGEMM
// above 10^7 multiply-adds) under the dtype's threshold. The persistent grid (t:027) is
// sized at each launch from M, and the tensor maps are encoded from the launch's sizes,
// so a stale grid or map fails the next size. Skips without a GPU (every case still
// compiles for sm_90a first).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <random>

#include "bench/cuda_call.h"
#include "bench/reference.h"
#include "bench/verify.h"
#include "compile_first.h"
#include "frontend/parser.h"
#include "loom/plan.h"
#include "wgmma_symbolic_cases.h"

namespace loom {
namespace {

void PrintTo(const SymbolicCase& c, std::ostream* os) {
  *os << c.expr << " knobs " << (c.knobs.empty() ? "(default)" : c.knobs);
}

class GpuHopperSymbolic : public ::testing::TestWithParam<SymbolicCase> {
 protected:
  void SetUp() override {
    // The compile check binds the first sizes; the plan below keeps them symbolic.
    compile_then_require_gpu(GetParam().expr, GetParam().knobs, GetParam().sizes.front());
  }
};

std::string sizes_str(const std::map<std::string, int64_t>& sizes) {
  std::string s;
  for (const auto& [k, v] : sizes) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

// Executes `plan` at `sizes` and checks it against the fp64 reference: "" or why not.
std::string check_at(const Plan& plan, const std::string& expr,
                     const std::map<std::string, int64_t>& sizes, uint32_t seed, cudaStream_t s) {
  const Graph g = bind_sizes(parse_expression(expr), sizes);
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::map<std::string, HostTensor> inputs;
  std::map<std::string, void*> ptrs;
  DType out_dtype = DType::F32, in_dtype = DType::F32;
  for (const auto& t0 : plan.tensors()) {
    const TensorInfo t = plan.tensor(t0.name, sizes);
    void* d = nullptr;
    LOOM_CUDA_RT(cudaMalloc(&d, size_t(t.bytes)));
    ptrs[t.name] = d;
    const DType dt = *parse_dtype(t.dtype);
    if (t.role != "input") {
      out_dtype = dt;
      LOOM_CUDA_RT(cudaMemsetAsync(d, 0xFF, size_t(t.bytes), s));  // NaN: unwritten fails
      continue;
    }
    in_dtype = dt;
    HostTensor h;
    h.dtype = dt;
    h.shape = t.shape;
    h.data.resize(size_t(t.bytes) / size_t(dtype_bytes(dt)));
    for (auto& v : h.data) v = round_to_dtype(dt, nd(rng));
    const std::vector<char> bytes = to_storage_bytes(h);
    LOOM_CUDA_RT(cudaMemcpy(d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    inputs[t.name] = std::move(h);
  }
  const TensorInfo o = plan.tensor("out", sizes);
  plan.execute(ptrs, sizes, s);
  LOOM_CUDA_RT(cudaStreamSynchronize(s));
  std::vector<char> raw(size_t(o.bytes));
  LOOM_CUDA_RT(cudaMemcpy(raw.data(), ptrs["out"], raw.size(), cudaMemcpyDeviceToHost));
  for (auto& [n, p] : ptrs) cudaFree(p);
  const HostTensor out = from_device_bytes(raw.data(), raw.size(), out_dtype, o.shape);
  const HostTensor ref = reference_eval(g, inputs, true);
  const VerifyResult v = verify_output(out, ref, verify_threshold(in_dtype, out_dtype));
  return v.passed ? "" : v.message;
}

TEST_P(GpuHopperSymbolic, OnePlanServesEverySize) {
  const SymbolicCase& c = GetParam();
  PlanOptions o;
  o.knobs = c.knobs;
  o.use_tuning_db = false;
  o.runtime_sizes = c.runtime;
  Plan plan(c.expr, o);
  EXPECT_NE(plan.cuda_source().find("wgmma"), std::string::npos) << plan.knobs_string();
  cudaStream_t s;
  LOOM_CUDA_RT(cudaStreamCreate(&s));
  uint32_t seed = 5;
  for (const auto& sizes : c.sizes) {
    SCOPED_TRACE(sizes_str(sizes) + ", kernel " + plan.variants()[plan.variant_for(sizes)].knobs);
    EXPECT_EQ(check_at(plan, c.expr, sizes, seed++, s), "");
  }
  // The first size again after the largest: nothing of a launch outlives it.
  SCOPED_TRACE("again " + sizes_str(c.sizes.front()));
  EXPECT_EQ(check_at(plan, c.expr, c.sizes.front(), 99, s), "");
  LOOM_CUDA_RT(cudaStreamDestroy(s));
}

INSTANTIATE_TEST_SUITE_P(Hopper, GpuHopperSymbolic, ::testing::ValuesIn(symbolic_cases()));

}  // namespace
}  // namespace loom
