// The wgmma atoms against the hardware. One warpgroup per case (tests/gpu/wgmma_cases.h):
// the host places random A and B at Loom's physical byte offsets (TensorDecl::physical)
// for each shared layout Loom makes for wgmma operands, the kernel copies the buffer
// byte for byte into 1024-aligned shared memory and multiplies through descriptors built
// with src/atoms/wgmma_desc.h's rules (and, for the register variants, A fragments packed
// with the table's "A" layout); the host reads D with the table's "C" layout and compares
// with an fp64 reference. A wrong descriptor rule, swizzle, layout or wrapper fails here.
//
// Every case's kernel compiles with NVRTC for sm_90a on any machine (also checked by
// tests/cpu/driver/test_wgmma_compile.cpp); the launches skip without an sm_90 GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "codegen/cuda.h"
#include "ir/dtype.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"
#include "wgmma_cases.h"

namespace loom {
namespace {

using wgmma_test::Case;
using wgmma_test::Layout;

CompileResult compile_cases() {
  CompileRequest req;
  req.name = "test_wgmma_atoms.cu";
  req.source = wgmma_test::kernel_source(wgmma_test::cases());
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = "sm_90a";
  return compile(req, nullptr);
}

TEST(WgmmaAtomsCompile, EveryCaseCompilesForSm90a) {
  CompileResult r = compile_cases();
  EXPECT_GT(r.cubin.size(), 0u);
}

// An element's bits as it sits in shared memory or a fragment register, and the value
// the tensor core sees (tf32 inputs are rounded on the host, so their bits are exact).
uint32_t bits_of(DType t, float x) {
  switch (t) {
    case DType::F16: return f32_to_f16_bits(x);
    case DType::BF16: return f32_to_bf16_bits(x);
    default: return std::bit_cast<uint32_t>(round_to_tf32(x));
  }
}
double value_of(DType t, float x) {
  switch (t) {
    case DType::F16: return f16_bits_to_f32(f32_to_f16_bits(x));
    case DType::BF16: return bf16_bits_to_f32(f32_to_bf16_bits(x));
    default: return round_to_tf32(x);
  }
}

class GpuWgmmaAtoms : public testing::TestWithParam<int> {
 public:
  static void SetUpTestSuite() {
    std::string why;
    dev_ = probe_device(0, &why);
    if (!dev_) {
      skip_ = "no GPU: " + why;
      return;
    }
    if (dev_->cc_major != 9) {
      skip_ = dev_->name + " is not sm_90: wgmma needs sm_90a";
      return;
    }
    module_.emplace(Module::load(compile_cases().cubin));
  }
  static void TearDownTestSuite() { module_.reset(); }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }

  static inline std::optional<DeviceInfo> dev_;
  static inline std::optional<Module> module_;
  static inline std::string skip_;
};

void* to_device(const void* p, size_t bytes) {
  void* d = nullptr;
  check_cuda(cudaMalloc(&d, bytes), "cudaMalloc");
  check_cuda(cudaMemcpy(d, p, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

TEST_P(GpuWgmmaAtoms, MatchesTheFp64Reference) {
  const int index = GetParam();
  const Case c = wgmma_test::cases()[size_t(index)];
  SCOPED_TRACE(c.name);
  const Layout l = wgmma_test::layout_of(c);
  const int bytes = dtype_bytes(c.type), K = l.bk, N = c.n;
  std::mt19937 rng(1234 + index);
  std::uniform_real_distribution<float> u(-1.f, 1.f);

  // Random values everywhere (both ring slots), stored at their physical offsets.
  std::vector<unsigned char> buf(size_t(l.bytes), 0);
  auto fill = [&](const TensorDecl& t, int64_t base, std::vector<float>& vals) {
    vals.resize(size_t(t.numel().const_value()));
    for (size_t i = 0; i < vals.size(); ++i) {
      vals[i] = u(rng);
      const uint32_t b = bits_of(c.type, vals[i]);
      std::memcpy(&buf[size_t(base + t.physical(int64_t(i)) * bytes)], &b, size_t(bytes));
    }
  };
  std::vector<float> av, bv;
  fill(l.a, 0, av);
  fill(l.b, l.b_base, bv);
  auto A = [&](int m, int k) { return value_of(c.type, av[size_t(l.a_origin + m * l.a_rs + k * l.a_cs)]); };
  auto B = [&](int k, int n) { return value_of(c.type, bv[size_t(l.b_origin + k * l.b_rs + n * l.b_cs)]); };

  std::vector<int> starts;
  for (int kk = 0; kk < l.ksteps; ++kk) {
    starts.push_back(int(l.a_start(kk)));
    starts.push_back(int(l.b_start(kk)));
  }
  // Register A: per k-step, each thread's fragment packed as the table's "A" layout says
  // (16-bit: value v in register v/2, even values low).
  const OperandLayout& LA = operand_layout(*l.atom, "A");
  std::vector<uint32_t> frag(size_t(l.ksteps) * 128 * 4, 0);
  for (int kk = 0; kk < l.ksteps; ++kk)
    for (int t = 0; t < 128; ++t)
      for (int v = 0; v < LA.values_per_thread; ++v) {
        auto [m, k] = LA.map(t, v);
        const float x = av[size_t(l.a_origin + m * l.a_rs + (kk * l.atom->k + k) * l.a_cs)];
        const int per_reg = 4 / bytes;
        frag[size_t((kk * 128 + t) * 4 + v / per_reg)] |= bits_of(c.type, x)
                                                          << (16 * (v % per_reg));
      }

  std::vector<float> out(size_t(128 * N / 2), NAN);
  void* d_buf = to_device(buf.data(), buf.size());
  void* d_starts = to_device(starts.data(), starts.size() * sizeof(int));
  void* d_frag = to_device(frag.data(), frag.size() * sizeof(uint32_t));
  void* d_out = to_device(out.data(), out.size() * sizeof(float));
  int nbytes = int(l.bytes);
  unsigned a_lbo = unsigned(l.fa.lbo_bytes), a_sbo = unsigned(l.fa.sbo_bytes),
           b_lbo = unsigned(l.fb.lbo_bytes), b_sbo = unsigned(l.fb.sbo_bytes);
  int a_mode = l.fa.swizzle_mode, b_mode = l.fb.swizzle_mode;
  void* args[] = {&d_buf, &nbytes, &d_starts, &d_frag, &d_out, &a_lbo, &a_sbo,
                  &a_mode, &b_lbo, &b_sbo, &b_mode};
  const std::string kernel = "wgmma_case_" + std::to_string(index);
  CUfunction f = module_->function(kernel);
  set_dynamic_smem(f, int(l.bytes));
  LaunchConfig cfg;
  cfg.block[0] = 128;
  cfg.dynamic_smem = unsigned(l.bytes);
  launch(f, cfg, args);
  check_cuda(cudaDeviceSynchronize(), kernel.c_str());
  check_cuda(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost),
             "cudaMemcpy");
  for (void* p : {d_buf, d_starts, d_frag, d_out}) cudaFree(p);

  const OperandLayout& LC = operand_layout(*l.atom, "C");
  for (int t = 0; t < 128; ++t)
    for (int v = 0; v < N / 2; ++v) {
      auto [m, n] = LC.map(t, v);
      double ref = 0, scale = 0;
      for (int k = 0; k < K; ++k) {
        const double p = A(m, k) * B(k, n);
        ref += p;
        scale += std::fabs(p);
      }
      const double got = out[size_t(t * (N / 2) + v)];
      ASSERT_TRUE(std::fabs(got - ref) <= 1e-3 * scale + 1e-6)  // false for NaN too
          << "D(" << m << ", " << n << ") = " << got << ", reference " << ref;
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuWgmmaAtoms,
                         testing::Range(0, int(wgmma_test::cases().size())),
                         [](const testing::TestParamInfo<int>& i) {
                           return wgmma_test::cases()[size_t(i.param)].name;
                         });

}  // namespace
}  // namespace loom
