// The wgmma atom cases of tests/gpu/test_wgmma_atoms.cpp: one warpgroup multiplies a
// 64 x BK tile of A by a BK x N tile of B read from shared memory laid out exactly as Loom
// lays out wgmma operands (TensorDecl::physical), through descriptors built with the
// rules of src/atoms/wgmma_desc.h. Shared by the GPU test and by a CPU test that compiles
// every case's kernel with NVRTC for sm_90a, so only the numerics are left to the GPU.
#pragma once
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "atoms/atoms.h"
#include "atoms/wgmma_desc.h"
#include "codegen/wgmma_wrappers.h"
#include "ir/program.h"

namespace loom::wgmma_test {

struct Case {
  std::string name;
  DType type = DType::BF16;
  int n = 64;
  bool rs = false;  // A from registers
  WgmmaMajor a_major = WgmmaMajor::K, b_major = WgmmaMajor::K;
  int a_span = 128, b_span = 128;  // swizzle bytes
  int b_chunks = 1;  // N-major B: span-wide chunks per row (N = chunks * span / 2)
};

inline std::vector<Case> cases() {
  using M = WgmmaMajor;
  std::vector<Case> out;
  for (DType t : {DType::BF16, DType::F16})
    for (int n : {8, 64, 128, 256})
      out.push_back({std::string(dtype_name(t)) + "_kk128_n" + std::to_string(n), t, n});
  for (int chunks : {1, 2, 4})
    out.push_back({"bf16_kn128_chunks" + std::to_string(chunks), DType::BF16, 64 * chunks, false,
                   M::K, M::MN, 128, 128, chunks});
  out.push_back({"f16_kn128_chunks2", DType::F16, 128, false, M::K, M::MN, 128, 128, 2});
  out.push_back({"bf16_kk64_n128", DType::BF16, 128, false, M::K, M::K, 64, 64});
  out.push_back({"bf16_kk32_n128", DType::BF16, 128, false, M::K, M::K, 32, 32});
  out.push_back({"f16_kn64_chunks2", DType::F16, 64, false, M::K, M::MN, 64, 64, 2});
  out.push_back({"bf16_kn32_chunks4", DType::BF16, 64, false, M::K, M::MN, 32, 32, 4});
  out.push_back({"f16_mk128_n128", DType::F16, 128, false, M::MN, M::K, 128, 128});
  out.push_back({"bf16_mn128_chunks2", DType::BF16, 128, false, M::MN, M::MN, 128, 128, 2});
  out.push_back({"tf32_kk128_n128", DType::TF32, 128});
  out.push_back({"tf32_kk64_n64", DType::TF32, 64, false, M::K, M::K, 64, 64});
  out.push_back({"bf16_rs_kk128_n64", DType::BF16, 64, true});
  out.push_back({"f16_rs_kn128_n64", DType::F16, 64, true, M::K, M::MN, 128, 128, 1});
  out.push_back({"tf32_rs_kk128_n64", DType::TF32, 64, true});
  return out;
}

// Where everything lies: A as [2][..][..] (the tile in ring slot 1, rows 64..127 of M
// where A is K-major), B as [2][..][..] (slot 1), both in one buffer, B 1024-aligned.
struct Layout {
  const AtomDef* atom = nullptr;
  TensorDecl a, b;
  int64_t a_rs = 0, a_cs = 0, b_rs = 0, b_cs = 0;  // strides of A(m, k) and B(k, n)
  int64_t a_origin = 0, b_origin = 0;              // flat offsets of A(0,0), B(0,0)
  int bk = 0, ksteps = 0;
  int64_t b_base = 0, bytes = 0;  // B's byte offset; buffer size (multiple of 16)
  WgmmaDescFields fa, fb;
  // Byte offsets of the k-step's descriptor starts in the buffer.
  int64_t a_start(int kk) const {
    return wgmma_start_byte(a, a_origin + int64_t(kk) * atom->k * a_cs);
  }
  int64_t b_start(int kk) const {
    return b_base + wgmma_start_byte(b, b_origin + int64_t(kk) * atom->k * b_rs);
  }
};

inline TensorDecl shared_slab(const char* name, DType t, int64_t rows, int64_t cols, int span,
                              int64_t row_chunk) {
  TensorDecl d;
  d.name = name;
  d.dtype = t;
  d.role = TensorRole::Shared;
  d.shape = {Expr(2), Expr(rows), Expr(cols)};
  int bits = 0;
  while ((16 << bits) < span) ++bits;
  const int base = dtype_bytes(t) == 2 ? 3 : 2;
  if (span) d.swizzle = Swizzle{bits, base, 3};
  d.row_chunk = row_chunk;
  return d;
}

inline Layout layout_of(const Case& c) {
  Layout l;
  l.atom = wgmma_atom(c.type, c.n);
  const int bytes = dtype_bytes(c.type);
  // A K-major operand's rows are one span: that fixes BK; two MN-major operands take 64.
  l.bk = c.a_major == WgmmaMajor::K   ? c.a_span / bytes
         : c.b_major == WgmmaMajor::K ? c.b_span / bytes
                                      : 64;
  l.ksteps = l.bk / l.atom->k;
  const int64_t BM = 128, BK = l.bk;
  if (c.a_major == WgmmaMajor::K) {
    l.a = shared_slab("A_s", c.type, BM, BK, c.a_span, 0);
    l.a_rs = BK, l.a_cs = 1, l.a_origin = BM * BK + 64 * BK;
  } else {
    l.a = shared_slab("A_s", c.type, BK, BM, c.a_span, c.a_span / bytes);
    l.a_rs = 1, l.a_cs = BM, l.a_origin = BK * BM + 64;
  }
  if (c.b_major == WgmmaMajor::K) {
    l.b = shared_slab("B_s", c.type, c.n, BK, c.b_span, 0);
    l.b_rs = 1, l.b_cs = BK, l.b_origin = int64_t(c.n) * BK;
  } else {
    const int64_t BN = int64_t(c.b_chunks) * c.b_span / bytes;
    l.b = shared_slab("B_s", c.type, BK, BN, c.b_span, c.b_span / bytes);
    l.b_rs = BN, l.b_cs = 1, l.b_origin = BK * BN;
  }
  l.fa = wgmma_desc_for(l.a, WgmmaOperand::A, l.a_rs, l.a_cs);
  l.fb = wgmma_desc_for(l.b, WgmmaOperand::B, l.b_rs, l.b_cs);
  const int64_t a_bytes = l.a.footprint().const_value() * bytes;
  l.b_base = (a_bytes + 1023) / 1024 * 1024;
  l.bytes = (l.b_base + l.b.footprint().const_value() * bytes + 15) / 16 * 16;
  return l;
}

// One kernel per case, `wgmma_case_<i>`, after the generated wrappers it calls. Launch
// with 128 threads and `bytes` of dynamic shared memory. Arguments: the buffer (global,
// copied byte for byte into 1024-aligned shared memory), its size, the descriptor starts
// [kk][A, B], the A fragments [kk][thread][4] (register variants), D [thread][N/2], then
// A's and B's LBO, SBO and swizzle mode.
inline std::string kernel_source(const std::vector<Case>& cs) {
  std::ostringstream s;
  s << "#include \"loom_device.cuh\"\n\n";
  std::set<std::string> pasted;
  for (const Case& c : cs) {
    const AtomDef* a = wgmma_atom(c.type, c.n);
    if (pasted.insert(wgmma_variant_id(*a, c.rs)).second) s << wgmma_wrapper_source(*a, c.rs);
  }
  for (size_t i = 0; i < cs.size(); ++i) {
    const Case& c = cs[i];
    const Layout l = layout_of(c);
    const int nd = c.n / 2;
    const bool tf32 = c.type == DType::TF32;
    std::string call = "loom::" + wgmma_variant_id(*l.atom, c.rs);
    if (!tf32)
      call += c.rs ? "<" + std::to_string(int(l.fb.transposed)) + ">"
                   : "<" + std::to_string(int(l.fa.transposed)) + ", " +
                         std::to_string(int(l.fb.transposed)) + ">";
    s << "\n// " << c.name << "\n"
      << "extern \"C\" __global__ void __launch_bounds__(128) wgmma_case_" << i
      << "(const unsigned char* g, int bytes, const int* starts, const unsigned* a_frag,\n"
      << "    float* out, unsigned a_lbo, unsigned a_sbo, int a_mode, unsigned b_lbo,\n"
      << "    unsigned b_sbo, int b_mode) {\n"
      << "  extern __shared__ __align__(1024) unsigned char smem[];\n"
      << "  loom::require_smem_aligned_1024(smem);\n"
      << "  for (int i = 16 * threadIdx.x; i < bytes; i += 16 * 128)\n"
      << "    *reinterpret_cast<uint4*>(smem + i) = *reinterpret_cast<const uint4*>(g + i);\n"
      << "  // Thread stores feed the async proxy that wgmma reads shared memory through.\n"
      << "  loom::fence_proxy_async_shared();\n"
      << "  __syncthreads();\n"
      << "  constexpr int kSteps = " << l.ksteps << ";\n"
      << "  float d[" << nd << "];\n"
      << "  for (int i = 0; i < " << nd << "; ++i) d[i] = 0.0f;\n";
    if (c.rs)
      s << "  unsigned a[kSteps][4];\n"
        << "  for (int kk = 0; kk < kSteps; ++kk)\n"
        << "    for (int j = 0; j < 4; ++j) a[kk][j] = a_frag[(kk * 128 + threadIdx.x) * 4 + j];\n";
    s << "  loom::wgmma_fence_operand(d);\n"
      << "  loom::wgmma_fence();\n"
      << "#pragma unroll\n"
      << "  for (int kk = 0; kk < kSteps; ++kk) {\n"
      << "    const unsigned long long db = loom::wgmma_desc(smem + starts[2 * kk + 1], b_lbo, "
         "b_sbo, b_mode);\n";
    if (c.rs)
      s << "    " << call << "(d, a[kk], db, kk > 0);\n";
    else
      s << "    const unsigned long long da = loom::wgmma_desc(smem + starts[2 * kk], a_lbo, "
           "a_sbo, a_mode);\n"
        << "    " << call << "(d, da, db, kk > 0);\n";
    s << "  }\n"
      << "  loom::wgmma_commit_group();\n"
      << "  loom::wgmma_wait_group<0>();\n"
      << "  loom::wgmma_fence_operand(d);\n"
      << "  for (int i = 0; i < " << nd << "; ++i) out[threadIdx.x * " << nd << " + i] = d[i];\n"
      << "}\n";
  }
  return s.str();
}

}  // namespace loom::wgmma_test
