// The tensor-core atoms against the hardware. One warp per atom: the host packs random A,
// B, C into per-lane fragment registers using the atom table's layouts, the kernel calls
// the device-header wrapper once, and the host unpacks D with the table's C layout and
// compares with a CPU reference — so a wrong layout in the table fails here. ldmatrix is
// checked the same way: every lane's registers against what the "dst" layout says, and
// against the mma fragments when lanes address rows with ldmatrix_row_starts.
//
// The NVRTC compile of every wrapper for sm_80 and sm_90a needs no GPU and runs
// everywhere (it lives here because this binary links the runtime and the embedded device
// header); the launches skip with the reason on a machine without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "atoms/atoms.h"
#include "codegen/cuda.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"

namespace loom {
namespace {

// Each kernel is one warp; arrays are indexed [lane * registers + i].
const char* kSource = R"(#include "loom_device.cuh"

#define LOOM_MMA_F32_KERNEL(name, wrapper, load)                                   \
  extern "C" __global__ void name(const unsigned* a, const unsigned* b, float* d) { \
    const int l = threadIdx.x;                                                     \
    unsigned ra[4], rb[2];                                                         \
    float rd[4];                                                                   \
    for (int i = 0; i < 4; ++i) ra[i] = load(a[4 * l + i]);                        \
    for (int i = 0; i < 2; ++i) rb[i] = load(b[2 * l + i]);                        \
    for (int i = 0; i < 4; ++i) rd[i] = d[4 * l + i];                              \
    loom::wrapper(rd, ra, rb);                                                     \
    for (int i = 0; i < 4; ++i) d[4 * l + i] = rd[i];                              \
  }
#define LOOM_AS_IS(x) (x)
#define LOOM_TO_TF32(x) loom::cvt_rna_tf32(__uint_as_float(x))

LOOM_MMA_F32_KERNEL(mma_m16n8k16_f32_f16, mma_m16n8k16_f32_f16, LOOM_AS_IS)
LOOM_MMA_F32_KERNEL(mma_m16n8k16_f32_bf16, mma_m16n8k16_f32_bf16, LOOM_AS_IS)
// tf32 operands arrive as raw f32 bits and are rounded in the kernel, as a GEMM would.
LOOM_MMA_F32_KERNEL(mma_m16n8k8_f32_tf32, mma_m16n8k8_f32_tf32, LOOM_TO_TF32)

extern "C" __global__ void mma_m16n8k16_f16_f16(const unsigned* a, const unsigned* b,
                                                unsigned* c) {
  const int l = threadIdx.x;
  unsigned ra[4], rb[2], rc[2];
  for (int i = 0; i < 4; ++i) ra[i] = a[4 * l + i];
  for (int i = 0; i < 2; ++i) rb[i] = b[2 * l + i];
  for (int i = 0; i < 2; ++i) rc[i] = c[2 * l + i];
  loom::mma_m16n8k16_f16_f16(rc, ra, rb);
  for (int i = 0; i < 2; ++i) c[2 * l + i] = rc[i];
}

extern "C" __global__ void round_tf32(const float* in, unsigned* out, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = loom::cvt_rna_tf32(in[i]);
}

// A 256-element b16 tile in shared memory; offsets[variant * 32 + lane] is the element
// where the row that lane addresses starts (variants: x4, x2, x4.trans, x2.trans).
// out[lane * 12 + ...] gets the 4 + 2 + 4 + 2 registers.
extern "C" __global__ void ldmatrix_all(const unsigned short* tile, const int* offsets,
                                        unsigned* out) {
  __shared__ __align__(16) unsigned short s[256];
  const int l = threadIdx.x;
  for (int i = l; i < 256; i += 32) s[i] = tile[i];
  __syncthreads();
  unsigned r[12];
  loom::ldmatrix_x4(r, s + offsets[l]);
  loom::ldmatrix_x2(r + 4, s + offsets[32 + l]);
  loom::ldmatrix_x4_trans(r + 6, s + offsets[64 + l]);
  loom::ldmatrix_x2_trans(r + 10, s + offsets[96 + l]);
  for (int i = 0; i < 12; ++i) out[12 * l + i] = r[i];
}

// The b32 view on a 128-word tile; offsets[variant * 32 + lane] in words (variants:
// x4_b32, x2_b32); out[lane * 6 + ...] gets the 4 + 2 registers' bits.
extern "C" __global__ void ldmatrix_b32_all(const unsigned* tile, const int* offsets,
                                            unsigned* out) {
  __shared__ __align__(16) float s[128];
  const int l = threadIdx.x;
  for (int i = l; i < 128; i += 32) s[i] = __uint_as_float(tile[i]);
  __syncthreads();
  float r[6];
  loom::ldmatrix_x4_b32(r, s + offsets[l]);
  loom::ldmatrix_x2_b32(r + 4, s + offsets[32 + l]);
  for (int i = 0; i < 6; ++i) out[6 * l + i] = __float_as_uint(r[i]);
}
)";

const char* kKernels[] = {"mma_m16n8k16_f32_f16", "mma_m16n8k16_f32_bf16",
                          "mma_m16n8k8_f32_tf32", "mma_m16n8k16_f16_f16", "round_tf32",
                          "ldmatrix_all", "ldmatrix_b32_all"};

CompileResult compile_for(const std::string& arch, const std::string& source = kSource) {
  CompileRequest req;
  req.name = "test_mma_atoms.cu";
  req.source = source;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = arch;
  return compile(req, nullptr);
}

// ---- compile: no GPU needed -------------------------------------------------------------

class MmaAtomsCompile : public testing::TestWithParam<std::string> {};

TEST_P(MmaAtomsCompile, EveryWrapperCompilesWithoutSpills) {
  CompileResult r = compile_for(GetParam());
  ASSERT_GT(r.cubin.size(), 0u);
  // Where a driver is installed NVRTC (CUDA 12.9+) may serve a repeated compile from the
  // driver's compute cache (~/.nv/ComputeCache) without running ptxas, so there is no
  // resource report to check; CUDA_CACHE_DISABLE=1 forces it.
  if (r.log.find("ptxas info") == std::string::npos)
    GTEST_SKIP() << "compiled for " << GetParam()
                 << ", but NVRTC's cache skipped ptxas' report (set CUDA_CACHE_DISABLE=1)";
  for (const char* k : kKernels) {
    ASSERT_TRUE(r.resources.count(k)) << k << "\n" << r.log;
    EXPECT_EQ(r.resources.at(k).spill_store_bytes, 0) << k;
    EXPECT_EQ(r.resources.at(k).spill_load_bytes, 0) << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, MmaAtomsCompile, testing::Values("sm_80", "sm_90a"));

TEST(MmaAtomsCompileGuard, MmaBelowSm80IsACompileErrorNamingTheWrapper) {
  // The header hides sm_80 instructions from older targets, so misuse fails in the
  // front end with the wrapper's name rather than in ptxas; ldmatrix (sm_75) stays.
  const std::string mma =
      "#include \"loom_device.cuh\"\n"
      "extern \"C\" __global__ void k(float* d, const unsigned* a) {\n"
      "  loom::mma_m16n8k16_f32_f16(d, a, a);\n}\n";
  try {
    compile_for("sm_75", mma);
    FAIL() << "mma.sync m16n8k16 needs sm_80";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mma_m16n8k16_f32_f16"), std::string::npos)
        << e.what();
  }
  const std::string ldm =
      "#include \"loom_device.cuh\"\n"
      "extern \"C\" __global__ void k(unsigned* o) {\n"
      "  __shared__ __align__(16) unsigned short s[64];\n"
      "  s[threadIdx.x] = threadIdx.x; s[threadIdx.x + 32] = threadIdx.x; __syncthreads();\n"
      "  loom::ldmatrix_x2(o + 2 * threadIdx.x, s + 8 * (threadIdx.x % 8));\n}\n";
  EXPECT_GT(compile_for("sm_75", ldm).cubin.size(), 0u);
}

// ---- on the GPU -----------------------------------------------------------------------

class GpuMmaAtoms : public testing::Test {
 public:
  void SetUp() override {
    std::string why;
    dev_ = probe_device(0, &why);
    if (!dev_) GTEST_SKIP() << "no GPU: " << why;
    if (dev_->cc_major * 10 + dev_->cc_minor < 80)
      GTEST_SKIP() << dev_->name << " is sm_" << dev_->cc_major << dev_->cc_minor
                   << "; mma.sync m16n8k16 needs sm_80";
    module_.emplace(Module::load(compile_for(dev_->arch()).cubin));
  }

  // Launches `kernel` as one warp over device copies of `bufs`, then copies them back.
  void run_warp(const char* kernel, std::vector<std::vector<uint32_t>*> bufs,
                std::vector<int> scalars = {}) {
    std::vector<void*> dptr(bufs.size());
    for (size_t i = 0; i < bufs.size(); ++i) {
      const size_t bytes = bufs[i]->size() * sizeof(uint32_t);
      check_cuda(cudaMalloc(&dptr[i], bytes), "cudaMalloc");
      check_cuda(cudaMemcpy(dptr[i], bufs[i]->data(), bytes, cudaMemcpyHostToDevice),
                 "cudaMemcpy");
    }
    std::vector<void*> args;
    for (auto& p : dptr) args.push_back(&p);
    for (auto& s : scalars) args.push_back(&s);
    LaunchConfig cfg;
    cfg.block[0] = 32;
    launch(module_->function(kernel), cfg, args.data());
    check_cuda(cudaDeviceSynchronize(), kernel);
    for (size_t i = 0; i < bufs.size(); ++i) {
      check_cuda(cudaMemcpy(bufs[i]->data(), dptr[i], bufs[i]->size() * sizeof(uint32_t),
                            cudaMemcpyDeviceToHost),
                 "cudaMemcpy");
      cudaFree(dptr[i]);
    }
  }

  std::optional<DeviceInfo> dev_;
  std::optional<Module> module_;
};

// An element's bits as it sits in a fragment register, and its value as the hardware
// sees it (inputs rounded to their type; tf32 is sent raw and rounded on the device).
uint32_t element_bits(DType t, float x) {
  switch (t) {
    case DType::F16: return f32_to_f16_bits(x);
    case DType::BF16: return f32_to_bf16_bits(x);
    default: return std::bit_cast<uint32_t>(x);
  }
}
double element_value(DType t, float x) {
  switch (t) {
    case DType::F16: return f16_bits_to_f32(f32_to_f16_bits(x));
    case DType::BF16: return bf16_bits_to_f32(f32_to_bf16_bits(x));
    case DType::TF32: return round_to_tf32(x);
    default: return x;
  }
}

// Packs tile[rows x cols] (row-major) into 32 lanes' registers with `l`: value v of a
// lane goes to register v / per_reg, bits 16 * (v % per_reg) (PTX ISA: a0 low, a1 high).
std::vector<uint32_t> pack(const OperandLayout& l, DType t, const std::vector<float>& tile) {
  const int per_reg = 4 / dtype_bytes(t), regs = l.values_per_thread / per_reg;
  std::vector<uint32_t> words(32 * regs, 0);
  for (int lane = 0; lane < 32; ++lane)
    for (int v = 0; v < l.values_per_thread; ++v) {
      auto [r, c] = l.map(lane, v);
      words[lane * regs + v / per_reg] |= element_bits(t, tile[r * l.cols + c])
                                          << (16 * (v % per_reg));
    }
  return words;
}

std::vector<float> unpack(const OperandLayout& l, DType t, const std::vector<uint32_t>& words) {
  const int per_reg = 4 / dtype_bytes(t), regs = l.values_per_thread / per_reg;
  std::vector<float> tile(l.rows * l.cols, NAN);
  for (int lane = 0; lane < 32; ++lane)
    for (int v = 0; v < l.values_per_thread; ++v) {
      auto [r, c] = l.map(lane, v);
      uint32_t w = words[lane * regs + v / per_reg];
      tile[r * l.cols + c] = t == DType::F16 ? f16_bits_to_f32(uint16_t(w >> (16 * (v % 2))))
                                             : std::bit_cast<float>(w);
    }
  return tile;
}

void check_mma(GpuMmaAtoms& fx, const std::string& id, uint32_t seed) {
  SCOPED_TRACE(id);
  const AtomDef& a = atom(id);
  const OperandLayout &LA = operand_layout(a, "A"), &LB = operand_layout(a, "B"),
                      &LC = operand_layout(a, "C");
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto random_tile = [&](int n) {
    std::vector<float> t(n);
    for (auto& x : t) x = u(rng);
    return t;
  };
  std::vector<float> A = random_tile(a.m * a.k), B = random_tile(a.k * a.n),
                     C = random_tile(a.m * a.n);
  std::vector<uint32_t> wa = pack(LA, a.a_type, A), wb = pack(LB, a.b_type, B),
                        wc = pack(LC, a.acc_type, C);
  fx.run_warp(id.c_str(), {&wa, &wb, &wc});
  std::vector<float> D = unpack(LC, a.acc_type, wc);

  // f32 accumulate: products of f16/bf16/tf32 are exact in f32, so only the K-step sums
  // round (tensor cores may align and truncate a few bits more than IEEE adds).
  // f16 accumulate: every partial sum may round to 11 significant bits.
  const double rel = a.acc_type == DType::F32 ? std::ldexp(1.0, -16) : std::ldexp(1.0, -8);
  for (int i = 0; i < a.m; ++i)
    for (int j = 0; j < a.n; ++j) {
      double ref = element_value(a.acc_type, C[i * a.n + j]);
      double scale = std::fabs(ref);
      for (int k = 0; k < a.k; ++k) {
        double p = element_value(a.a_type, A[i * a.k + k]) *
                   element_value(a.b_type, B[k * a.n + j]);
        ref += p;
        scale += std::fabs(p);
      }
      double got = D[i * a.n + j], tol = rel * scale;
      ASSERT_TRUE(std::fabs(got - ref) <= tol)  // false for NaN too
          << "D(" << i << "," << j << ") = " << got << ", reference " << ref
          << ", tolerance " << tol;
    }
}

TEST_F(GpuMmaAtoms, MmaF32AccumulateF16) { check_mma(*this, "mma_m16n8k16_f32_f16", 1); }
TEST_F(GpuMmaAtoms, MmaF32AccumulateBf16) { check_mma(*this, "mma_m16n8k16_f32_bf16", 2); }
TEST_F(GpuMmaAtoms, MmaF16AccumulateF16) { check_mma(*this, "mma_m16n8k16_f16_f16", 3); }
TEST_F(GpuMmaAtoms, MmaF32AccumulateTf32) { check_mma(*this, "mma_m16n8k8_f32_tf32", 4); }

TEST_F(GpuMmaAtoms, CvtRnaTf32MatchesTheHostRounding) {
  // Ties (low 13 bits exactly 0x1000) round away from zero; include both signs, carries
  // into the exponent, subnormals and infinities.
  std::vector<float> in = {1.0f, -1.0f, 0.0f, -0.0f, INFINITY, -INFINITY,
                           std::bit_cast<float>(0x3f801000u), std::bit_cast<float>(0xbf801000u),
                           std::bit_cast<float>(0x3f803000u), std::bit_cast<float>(0x3fffffffu),
                           std::bit_cast<float>(0x00001000u), std::bit_cast<float>(0x3f800fffu)};
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  while (in.size() < 1024) {
    float x = std::bit_cast<float>(bits(rng));
    if (!std::isnan(x)) in.push_back(x);
  }
  std::vector<uint32_t> win(in.size()), out(in.size(), 0xdeadbeefu);
  for (size_t i = 0; i < in.size(); ++i) win[i] = std::bit_cast<uint32_t>(in[i]);
  run_warp("round_tf32", {&win, &out}, {int(in.size())});
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(out[i], std::bit_cast<uint32_t>(round_to_tf32(in[i])))
        << "input bits 0x" << std::hex << win[i];
}

struct LdmatrixRun {
  std::vector<uint32_t> tile;  // 256 b16 values, two per word
  std::vector<uint32_t> offsets = std::vector<uint32_t>(128);
  std::vector<uint32_t> out = std::vector<uint32_t>(32 * 12, 0xdeadbeefu);
  uint16_t at(int i) const { return uint16_t(tile[i / 2] >> (16 * (i % 2))); }
};

const char* kVariants[] = {"ldmatrix_x4", "ldmatrix_x2", "ldmatrix_x4_trans",
                           "ldmatrix_x2_trans"};
const int kFirstReg[] = {0, 4, 6, 10};

LdmatrixRun ldmatrix_tile() {
  LdmatrixRun r;
  r.tile.resize(128);
  // Distinct values with both halves non-trivial, so a swapped half or row shows.
  for (int i = 0; i < 256; ++i)
    r.tile[i / 2] |= uint32_t(0x1000 + 37 * i) << (16 * (i % 2));
  return r;
}

uint16_t received(const LdmatrixRun& r, int variant, int lane, int v) {
  return uint16_t(r.out[12 * lane + kFirstReg[variant] + v / 2] >> (16 * (v % 2)));
}

TEST_F(GpuMmaAtoms, LdmatrixDeliversWhatTheDstLayoutSays) {
  // The tile as 32 rows of 8; stacked row sr lives at memory row perm(sr), so only the
  // per-lane addresses (from ldmatrix_row_provider) put the rows in stacked order.
  auto perm = [](int sr) { return (13 * sr + 5) % 32; };
  LdmatrixRun r = ldmatrix_tile();
  for (int var = 0; var < 4; ++var) {
    const int count = operand_layout(atom(kVariants[var]), "dst").rows / 8;
    for (int lane = 0; lane < 32; ++lane)
      r.offsets[32 * var + lane] = 8 * perm(ldmatrix_row_provider(lane, count));
  }
  run_warp("ldmatrix_all", {&r.tile, &r.offsets, &r.out});
  for (int var = 0; var < 4; ++var) {
    const OperandLayout& dst = operand_layout(atom(kVariants[var]), "dst");
    for (int lane = 0; lane < 32; ++lane)
      for (int v = 0; v < dst.values_per_thread; ++v) {
        auto [sr, sc] = dst.map(lane, v);
        ASSERT_EQ(received(r, var, lane, v), r.at(8 * perm(sr) + sc))
            << kVariants[var] << " lane " << lane << " value " << v;
      }
  }
}

TEST_F(GpuMmaAtoms, LdmatrixWithRowStartsLoadsTheMmaFragments) {
  // A 16x16 tile (leading dimension 16) read four ways: x4 -> A row-major, x2 -> B stored
  // N x K, x4.trans -> A column-major, x2.trans -> B stored K x N.
  struct Use {
    const char* operand;
    Major major;
  };
  const Use uses[] = {{"A", Major::Row}, {"B", Major::Col}, {"A", Major::Col}, {"B", Major::Row}};
  const AtomDef& f16 = atom("mma_m16n8k16_f32_f16");
  auto offset = [](int r, int c, Major m) { return m == Major::Row ? r * 16 + c : c * 16 + r; };
  LdmatrixRun run = ldmatrix_tile();
  for (int var = 0; var < 4; ++var) {
    auto starts = ldmatrix_row_starts(atom(kVariants[var]),
                                      operand_layout(f16, uses[var].operand), uses[var].major);
    for (int lane = 0; lane < 32; ++lane)
      run.offsets[32 * var + lane] = offset(starts[lane].first, starts[lane].second,
                                            uses[var].major);
  }
  run_warp("ldmatrix_all", {&run.tile, &run.offsets, &run.out});
  for (int var = 0; var < 4; ++var) {
    const OperandLayout& frag = operand_layout(f16, uses[var].operand);
    for (int lane = 0; lane < 32; ++lane)
      for (int v = 0; v < frag.values_per_thread; ++v) {
        auto [r, c] = frag.map(lane, v);
        ASSERT_EQ(received(run, var, lane, v), run.at(offset(r, c, uses[var].major)))
            << kVariants[var] << " as " << uses[var].operand << " lane " << lane << " value "
            << v;
      }
  }
}

// The b32 view (tf32 fragments): each lane receives whole 32-bit words, register i the
// word its dst layout names — first on a permuted tile (the per-lane addresses alone put
// rows in stacked order), then as the tf32 A fragment of a 16x8 K-contiguous tile and the
// B fragment of an 8x8 tile stored [N][K], addressed by ldmatrix_row_starts. The words
// are distinct bit patterns (NaN payloads included), so a half-word swap would show.
TEST_F(GpuMmaAtoms, LdmatrixB32DeliversWordsAndTheTf32Fragments) {
  const char* ids[] = {"ldmatrix_x4_b32", "ldmatrix_x2_b32"};
  const int first[] = {0, 4};
  std::vector<uint32_t> tile(128), offsets(64), out(32 * 6);
  for (int i = 0; i < 128; ++i) tile[i] = 0x9e3779b9u * uint32_t(i + 1);
  auto perm = [](int sr) { return (13 * sr + 5) % 32; };
  for (int var = 0; var < 2; ++var) {
    const int count = operand_layout(atom(ids[var]), "dst").rows / 8;
    for (int lane = 0; lane < 32; ++lane)
      offsets[32 * var + lane] = 4 * perm(ldmatrix_row_provider(lane, count));
  }
  std::fill(out.begin(), out.end(), 0xdeadbeefu);
  run_warp("ldmatrix_b32_all", {&tile, &offsets, &out});
  for (int var = 0; var < 2; ++var) {
    const OperandLayout& dst = operand_layout(atom(ids[var]), "dst");
    for (int lane = 0; lane < 32; ++lane)
      for (int v = 0; v < dst.values_per_thread; ++v) {
        auto [sr, sc] = dst.map(lane, v);
        ASSERT_EQ(out[6 * lane + first[var] + v], tile[4 * perm(sr) + sc])
            << ids[var] << " lane " << lane << " value " << v;
      }
  }
  // Fragments: A (16x8) row-major at leading dimension 8; B (K x N = 8x8) stored [N][K].
  const AtomDef& tf32 = atom("mma_m16n8k8_f32_tf32");
  const struct { const char* operand; Major major; } uses[] = {{"A", Major::Row}, {"B", Major::Col}};
  auto offset = [](int r, int c, Major m) { return m == Major::Row ? r * 8 + c : c * 8 + r; };
  for (int var = 0; var < 2; ++var) {
    auto starts = ldmatrix_row_starts(atom(ids[var]), operand_layout(tf32, uses[var].operand),
                                      uses[var].major);
    for (int lane = 0; lane < 32; ++lane)
      offsets[32 * var + lane] = offset(starts[lane].first, starts[lane].second, uses[var].major);
  }
  std::fill(out.begin(), out.end(), 0xdeadbeefu);
  run_warp("ldmatrix_b32_all", {&tile, &offsets, &out});
  for (int var = 0; var < 2; ++var) {
    const OperandLayout& frag = operand_layout(tf32, uses[var].operand);
    for (int lane = 0; lane < 32; ++lane)
      for (int v = 0; v < frag.values_per_thread; ++v) {
        auto [r, c] = frag.map(lane, v);
        ASSERT_EQ(out[6 * lane + first[var] + v], tile[offset(r, c, uses[var].major)])
            << ids[var] << " as " << uses[var].operand << " lane " << lane << " value " << v;
      }
  }
}

}  // namespace
}  // namespace loom
