// Generated kernels compile with NVRTC for sm_90a and sm_80 over a grid of expressions
// and knob sets (no GPU needed), and ptxas reports no spills for the shipped defaults.
// Also the error paths of the compile driver: each names the problem and the fix.
#include <gtest/gtest.h>

#include "codegen/cuda.h"
#include "driver/compile.h"
#include "driver/run.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "runtime/nvrtc.h"

#include "../../gpu/acc_f16_cases.h"

namespace loom {
namespace {

CompileResult nvrtc(const CompiledProgram& c, const std::string& arch) {
  CompileRequest req;
  req.source = c.cuda;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = arch;
  return compile(req, nullptr);
}

const std::vector<std::string> kExpressions = {
    "matmul(A[256,128]:f32, B[128,192]:f32)",
    "matmul(A[M,K]:f16, B[N,K]:f16.T)",
    "bmm(A[4,100,72]:bf16, B[4,72,40]:bf16)",
    "gelu(linear(X[129,64]:bf16, W[33,64]:bf16, bias[33]:bf16))",
    "add(gelu_tanh(linear(X[129,64]:f16, W[40,64]:f16)), R[129,40]:f16)",
    "add(mul(matmul(A[K,M]:tf32.T, B[K,N]:tf32), 0.5), R[M,N]:f32)",
    "silu(matmul(A[64,64]:f16, B[64,64]:f16, out=f32))",
    // The split-K default (atomic combine: vector reductions on sm_90, atomicAdd on sm_80).
    "matmul(A[128,16384]:f32, B[16384,128]:f32)",
};

const std::vector<std::string> kKnobSets = {"", "BM=32,BN=32,FM=2,FN=2", "BM=128,BN=64,FM=8,FN=4",
                                            "BM=16,BN=64,FM=1,FN=4"};

TEST(CompileKernels, NvrtcCompilesEveryVariantForSm90aAndSm80) {
  for (const std::string arch : {"sm_90a", "sm_80"})
    for (const auto& e : kExpressions)
      for (const auto& k : kKnobSets) {
        SCOPED_TRACE(arch + " " + e + " knobs=" + k);
        CompileOptions opt;
        opt.knobs = Knobs::parse(k);
        opt.target = Target::for_arch(arch);
        CompiledProgram c = compile_expression(e, opt);
        CompileResult r = nvrtc(c, arch);
        EXPECT_GT(r.cubin.size(), 0u);
        for (const auto& kern : c.state.kernel.kernels) {
          ASSERT_TRUE(r.resources.count(kern.name)) << r.log;
          EXPECT_GT(r.resources.at(kern.name).registers, 0);
        }
      }
}

TEST(CompileKernels, DefaultsOfConstantShapesDoNotSpill) {
  for (const auto& e : {"matmul(A[4096,4096]:f32, B[4096,4096]:f32)",
                        "matmul(A[1000,777]:f16, B[3000,777]:f16.T)",
                        "relu(linear(X[512,256]:bf16, W[128,256]:bf16, bias[128]:bf16))"}) {
    CompiledProgram c = compile_expression(e, CompileOptions{});
    CompileResult r = nvrtc(c, "sm_90a");
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << e;
      EXPECT_EQ(rep.spill_load_bytes, 0) << e;
    }
  }
}

// The sm_90a wgmma defaults (persistent, warp-specialized, 128x256) compile without
// spills at every K: a short K once unrolled the whole 32-step ring and spilled 380 B.
TEST(CompileKernels, HopperDefaultsDoNotSpill) {
  for (const char* e : {"matmul(A[2048,2048]:bf16, B[2048,2048]:bf16)",
                        "matmul(A[4096,4096]:f16, B[4096,4096]:f16)",
                        "linear(X[8192,4096]:bf16, W[1024,4096]:bf16)",
                        "matmul(A[8192,8192]:bf16, B[8192,1024]:bf16)"}) {
    SCOPED_TRACE(e);
    CompiledProgram c = compile_expression(e, CompileOptions{});
    ASSERT_NE(c.cuda.find("wgmma_m64n256k16"), std::string::npos);
    CompileResult r = nvrtc(c, "sm_90a");
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0);
      EXPECT_EQ(rep.spill_load_bytes, 0);
      EXPECT_EQ(rep.stack_frame_bytes, 0);
    }
  }
}

// An explicit ATOM=mma_* takes the mma defaults of the shape: 4x8 atoms per warp for
// aligned M and N, 4x4 where bounds guards would push 4x8 into spills.
TEST(CompileKernels, MmaDefaultsDoNotSpill) {
  for (const std::string atom : {"mma_f16", "mma_bf16", "mma_tf32"}) {
    const std::string dt = atom == "mma_f16" ? "f16" : atom == "mma_bf16" ? "bf16" : "tf32";
    for (const std::string& shape : {"A[4096,4096]:" + dt + ", B[4096,4096]:" + dt,
                                     "A[1000,333]:" + dt + ", B[333,777]:" + dt}) {
      const std::string e = "matmul(" + shape + ")";
      SCOPED_TRACE(atom + " " + e);
      CompileOptions opt;
      opt.knobs = Knobs::parse("ATOM=" + atom);
      CompiledProgram c = compile_expression(e, opt);
      CompileResult r = nvrtc(c, "sm_90a");
      ASSERT_FALSE(r.resources.empty()) << r.log;
      for (const auto& [name, rep] : r.resources) {
        EXPECT_EQ(rep.spill_store_bytes, 0);
        EXPECT_EQ(rep.spill_load_bytes, 0);
      }
    }
  }
}

TEST(CompileKernels, ConstantShapesUse32BitIndices) {
  CompiledProgram c = compile_expression("matmul(A[4096,4096]:f32, B[4096,4096]:f32)", {});
  EXPECT_NE(c.cuda.find("const int tile = blockIdx.x;"), std::string::npos) << c.cuda;  // GROUP_M=8
  CompiledProgram s = compile_expression("matmul(A[M,K]:f32, B[K,N]:f32)", {});
  EXPECT_NE(s.cuda.find("long long loom_d_M"), std::string::npos) << s.cuda;
}

TEST(CompileKernels, GeneratedSourceHasSchedulerMainloopEpilogue) {
  CompiledProgram c = compile_expression("relu(matmul(A[64,64]:f32, B[64,64]:f32))", {});
  auto sched = c.cuda.find("scheduler");
  auto main = c.cuda.find("mainloop");
  auto epi = c.cuda.find("epilogue");
  ASSERT_NE(sched, std::string::npos);
  ASSERT_NE(main, std::string::npos);
  ASSERT_NE(epi, std::string::npos);
  EXPECT_LT(sched, main);
  EXPECT_LT(main, epi);
  EXPECT_NE(c.cuda.find("loom::fma_f32"), std::string::npos);
}

// Tensor-core kernels (ATOM=mma_*): every atom, odd shapes with transposes, an epilogue,
// batch, both staging transports; fragments as the source must hold them and no spills.
// f16/bf16 fragments are packed .b32 registers that ldmatrix fills (LDMATRIX=1, the
// default: A.T takes x4.trans, B.T the plain x2, B the x2.trans) or element loads fill
// half by half (LDMATRIX=0), and mma.sync reads them as they are; tf32 packs with cvt.rna.
TEST(CompileKernels, MmaKernelsCompileForSm90aAndSm80WithoutSpills) {
  struct MmaVariant { std::string atom, dtype, wrapper, pack; };
  const std::string packed = "(&acc3[m_a][n_a][0], &in0[m_a][0], &in1[n_a][0]);";
  const std::vector<MmaVariant> atoms = {
      {"mma_f16", "f16", "loom::mma_m16n8k16_f32_f16" + packed, "loom::ldmatrix_x4"},
      {"mma_bf16", "bf16", "loom::mma_m16n8k16_f32_bf16" + packed, "loom::ldmatrix_x2"},
      {"mma_f16,LDMATRIX=0", "f16", "loom::mma_m16n8k16_f32_f16" + packed, "loom::set_b16_half<1>(in0[m_a][0], "},
      {"mma_tf32", "f32", "loom::mma_m16n8k8_f32_tf32(&acc3[m_a][n_a][0], a_, b_);", "loom::cvt_rna_tf32("}};
  for (const std::string arch : {"sm_90a", "sm_80"})
    for (const auto& a : atoms)
      for (const auto& [e, k] : std::vector<std::pair<std::string, std::string>>{
               {"relu(add(matmul(A[1000,333]:" + a.dtype + ".T, B[777,1000]:" + a.dtype +
                    ".T), bias[777]:f32))",
                "WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=sync,STAGES=2"},
               {"bmm(A[4,M,K]:" + a.dtype + ", B[4,K,N]:" + a.dtype + ")",
                "WM=4,WN=1,FM=1,FN=4,BK=16,STAGE=cp_async,STAGES=3"}}) {
        SCOPED_TRACE(arch + " " + e + " ATOM=" + a.atom + "," + k);
        CompileOptions opt;
        opt.knobs = Knobs::parse("ATOM=" + a.atom + "," + k);
        opt.target = Target::for_arch(arch);
        CompiledProgram c = compile_expression(e, opt);
        EXPECT_NE(c.cuda.find(a.wrapper), std::string::npos) << c.cuda;
        EXPECT_NE(c.cuda.find(a.pack), std::string::npos) << c.cuda;
        // Packed operands are never repacked from floats.
        if (a.dtype != "f32") {
          EXPECT_EQ(c.cuda.find("pack_"), std::string::npos);
        }
        CompileResult r = nvrtc(c, arch);
        EXPECT_GT(r.cubin.size(), 0u);
        for (const auto& kern : c.state.kernel.kernels) {
          ASSERT_TRUE(r.resources.count(kern.name)) << r.log;
          EXPECT_EQ(r.resources.at(kern.name).spill_store_bytes, 0);
          EXPECT_EQ(r.resources.at(kern.name).spill_load_bytes, 0);
        }
      }
}

// Double-buffered fragments (FRAG_BUFFERS=2): the prefetch indexes buffer (k_i + 1) % 2,
// which must fold to constants once the step loop is unrolled, or the fragments would
// live in local memory. The mma defaults (4x8 atoms per warp) on a constant square shape,
// and 4x4 atoms on ragged ones (4x8 there spills with one buffer already).
TEST(CompileKernels, FragBuffersCompileForSm90aAndSm80WithoutSpills) {
  for (const std::string arch : {"sm_90a", "sm_80"})
    for (const auto& [e, k] : std::vector<std::pair<std::string, std::string>>{
             {"matmul(A[4096,4096]:f16, B[4096,4096]:f16)", "ATOM=mma_f16"},
             {"matmul(A[1000,333]:f16, B[333,777]:f16)", "ATOM=mma_f16,FN=4,BK=64"},
             {"relu(add(matmul(A[1000,333]:bf16, B[777,333]:bf16.T), bias[777]:f32))",
              "ATOM=mma_bf16,FN=4,BK=32,STAGE=sync,STAGES=2"},
             {"matmul(A[1000,333]:f32, B[333,777]:f32)", "ATOM=mma_tf32,WM=2,WN=2,FM=2,FN=4,BK=32"}}) {
      SCOPED_TRACE(arch + " " + e + " " + k);
      CompileOptions opt;
      opt.knobs = Knobs::parse(k + ",FRAG_BUFFERS=2");
      opt.target = Target::for_arch(arch);
      CompiledProgram c = compile_expression(e, opt);
      EXPECT_NE(c.cuda.find("in0[(k_i + 1) % 2][m_a]"), std::string::npos) << c.cuda;
      EXPECT_NE(c.cuda.find("in0[k_i % 2][m_a]"), std::string::npos) << c.cuda;
      CompileResult r = nvrtc(c, arch);
      EXPECT_GT(r.cubin.size(), 0u);
      for (const auto& kern : c.state.kernel.kernels) {
        ASSERT_TRUE(r.resources.count(kern.name)) << r.log;
        EXPECT_EQ(r.resources.at(kern.name).spill_store_bytes, 0);
        EXPECT_EQ(r.resources.at(kern.name).spill_load_bytes, 0);
      }
    }
}

// f16 accumulation (ACC=f16): the GPU test's cases (tests/gpu/acc_f16_cases.h) compile
// for both targets without spills, with the accumulators as packed f16x2 registers that
// the f16-accumulating mma updates in place and the epilogue unpacks value by value (or
// stores as they are into an f16 output), never an f32 accumulator array.
TEST(CompileKernels, AccF16KernelsCompileForSm90aAndSm80WithoutSpills) {
  for (const std::string arch : {"sm_90a", "sm_80"})
    for (const auto& [e, k] : acc_f16_gemm_cases()) {
      SCOPED_TRACE(arch + " " + e + " " + k);
      CompileOptions opt;
      opt.knobs = Knobs::parse(k);
      opt.target = Target::for_arch(arch);
      CompiledProgram c = compile_expression(e, opt);
      EXPECT_NE(c.cuda.find("unsigned acc3["), std::string::npos) << c.cuda;
      EXPECT_EQ(c.cuda.find("float acc3["), std::string::npos);
      EXPECT_NE(c.cuda.find("loom::mma_m16n8k16_f16_f16(&acc3["), std::string::npos);
      EXPECT_EQ(c.cuda.find("mma_m16n8k16_f32_f16"), std::string::npos);
      EXPECT_NE(c.cuda.find("loom::set_b16_half<1>(acc3["), std::string::npos);  // zeroing
      CompileResult r = nvrtc(c, arch);
      EXPECT_GT(r.cubin.size(), 0u);
      for (const auto& kern : c.state.kernel.kernels) {
        ASSERT_TRUE(r.resources.count(kern.name)) << r.log;
        EXPECT_EQ(r.resources.at(kern.name).spill_store_bytes, 0);
        EXPECT_EQ(r.resources.at(kern.name).spill_load_bytes, 0);
      }
    }
}

// tf32 fragments three ways (test_tf32_fragments.cpp runs them on the interpreter):
// ldmatrix on 32-bit data where the slab has K contiguous (A [BM][BK]; B given
// transposed), B transposed into shared memory (SLAB_B=kinner: 4-byte cp.async or
// register-staged), B row-major read element-wise from its own pad (PAD_KOUTER); then
// the TF32 article's rungs at 4096^3. The ldmatrix'd words still go through cvt.rna
// before the mma, and nothing spills.
TEST(CompileKernels, Tf32FragmentStrategiesCompileForSm90aAndSm80WithoutSpills) {
  struct Tf32Case { std::string expr, knobs; bool a_ldmatrix, b_ldmatrix; };
  const std::string tile = "ATOM=mma_tf32,WM=2,WN=2,FM=2,FN=4,BK=32,";
  const std::string rung = "ATOM=mma_tf32,WM=2,WN=4,FM=4,FN=4,BK=16,STAGE=cp_async,";
  std::vector<Tf32Case> cases = {
      {"matmul(A[1000,333]:f32, B[333,777]:f32)", "ATOM=mma_tf32", true, false},
      {"matmul(A[1024,1024]:f32, B[1024,1024]:f32)", "ATOM=mma_tf32", true, false},
      {"matmul(A[1000,333]:tf32, B[777,333]:tf32.T)", tile + "STAGE=cp_async,STAGES=3", true, true},
      {"bmm(A[4,M,K]:f32, B[4,N,K]:f32.T)", tile + "STAGE=sync,STAGES=2", true, true},
      {"bmm(A[4,129,72]:f32, B[4,100,72]:f32.T)", tile + "STAGE=sync,STAGES=2", true, true},
      {"bmm(A[4,129,72]:tf32, B[4,72,100]:tf32)", tile + "STAGE=cp_async,STAGES=2,SLAB_B=kinner", true, true},
      {"matmul(A[333,1000]:tf32.T, B[333,777]:tf32)", tile + "STAGE=cp_async,STAGES=3,PAD_SMEM=4,PAD_KOUTER=8", false, false},
      {"matmul(A[1000,333]:f32, B[333,777]:f32)", tile + "STAGE=cp_async,STAGES=3,SLAB_B=kinner", true, true},
      {"relu(add(matmul(A[1000,333]:f32, B[333,777]:f32), bias[777]:f32))", tile + "STAGE=sync,STAGES=2,SLAB_B=kinner", true, true},
      {"matmul(A[333,1000]:f32.T, B[333,777]:f32)", tile + "STAGE=cp_async,STAGES=3,SLAB_A=kinner,SLAB_B=kinner", true, true},
      {"matmul(A[1000,333]:f32, B[333,777]:f32)", tile + "STAGE=cp_async,STAGES=3,PAD_SMEM=4,PAD_KOUTER=8", true, false},
      {"matmul(A[1000,333]:f32, B[333,777]:f32)", tile + "STAGE=cp_async,STAGES=3,SWIZZLE=128B,PAD_KOUTER=8,FRAG_BUFFERS=2", true, false}};
  // Two blocks per SM (the article's __launch_bounds__(256, 2)) fit 128 registers on
  // aligned shapes; the bounds guards of a ragged one would spill under that cap.
  for (const auto& [e, cap] : std::vector<std::pair<std::string, std::string>>{
           {"matmul(A[4096,4096]:f32, B[4096,4096]:f32)", ",MIN_BLOCKS=2"},
           {"matmul(A[1024,1024]:f32, B[1024,1024]:f32)", ",MIN_BLOCKS=2"},
           {"matmul(A[1000,333]:f32, B[333,777]:f32)", ""}}) {
    cases.push_back({e, rung + "STAGES=1,SLAB_B=kinner" + cap, true, true});
    cases.push_back({e, rung + "STAGES=1,SLAB_B=kinner,SWIZZLE=64B" + cap, true, true});
    cases.push_back({e, rung + "STAGES=2,SLAB_B=kinner,SWIZZLE=64B,GROUP_M=8" + cap, true, true});
    cases.push_back({e, rung + "STAGES=1,SWIZZLE=64B,PAD_KOUTER=8,GROUP_M=8" + cap, true, false});
    cases.push_back({e, rung + "STAGES=2,SWIZZLE=64B,PAD_KOUTER=8,GROUP_M=8" + cap, true, false});
  }
  for (const std::string arch : {"sm_90a", "sm_80"})
    for (const auto& c : cases) {
      SCOPED_TRACE(arch + " " + c.expr + " " + c.knobs);
      CompileOptions opt;
      opt.knobs = Knobs::parse(c.knobs);
      opt.target = Target::for_arch(arch);
      CompiledProgram p = compile_expression(c.expr, opt);
      EXPECT_EQ(p.cuda.find("loom::ldmatrix_x4_b32(&in0[") != std::string::npos, c.a_ldmatrix);
      EXPECT_EQ(p.cuda.find("loom::ldmatrix_x2_b32(&in1[") != std::string::npos, c.b_ldmatrix);
      // The mma rounds what ldmatrix (or an f32 element load) left raw.
      EXPECT_NE(p.cuda.find("= loom::cvt_rna_tf32(in0["), std::string::npos) << p.cuda;
      CompileResult r = nvrtc(p, arch);
      EXPECT_GT(r.cubin.size(), 0u);
      for (const auto& kern : p.state.kernel.kernels) {
        ASSERT_TRUE(r.resources.count(kern.name)) << r.log;
        EXPECT_EQ(r.resources.at(kern.name).spill_store_bytes, 0);
        EXPECT_EQ(r.resources.at(kern.name).spill_load_bytes, 0);
      }
    }
}

// The staged epilogue (EPILOGUE=smem, k:054): the mma defaults of f16, bf16 and tf32 on
// aligned and ragged shapes, and every case tests/gpu/test_mma_gemm.cpp and
// tests/gpu/test_gemm.cpp run with it (the same lists), compile for sm_90a and sm_80;
// the mma ones without spills, as their direct epilogues.
TEST(CompileKernels, StagedEpilogueCompilesWithoutSpills) {
  struct Case { std::string expr, knobs; bool no_spills; };
  std::vector<Case> cases;
  for (auto [atom, dt] : std::vector<std::pair<std::string, std::string>>{
           {"mma_f16", "f16"}, {"mma_bf16", "bf16"}, {"mma_tf32", "tf32"}}) {
    const std::string staged = "ATOM=" + atom + ",EPILOGUE=smem";
    cases.push_back({"matmul(A[4096,4096]:" + dt + ", B[4096,4096]:" + dt + ")", staged, true});
    cases.push_back({"matmul(A[512,512]:" + dt + ", B[512,512]:" + dt + ")", staged, true});
    cases.push_back({"matmul(A[1000,333]:" + dt + ", B[333,777]:" + dt + ")", staged, true});
    cases.push_back({"relu(add(matmul(A[1000,333]:" + dt + ", B[776,333]:" + dt + ".T), bias[776]:f32))", staged, true});
    cases.push_back({"matmul(A[333,1000]:" + dt + ".T, B[777,333]:" + dt + ".T)",
                     staged + ",WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=sync,STAGES=2", true});
    cases.push_back({"bmm(A[4,129,72]:" + dt + ", B[4,72,100]:" + dt + ")", staged, true});
  }
  cases.push_back({"gelu(linear(X[1000,333]:f16, W[777,333]:f16, bias[777]:f16))", "ATOM=mma_f16,EPILOGUE=smem", true});
  cases.push_back({"matmul(A[1000,333]:bf16, B[333,776]:bf16, out=f32)", "ATOM=mma_bf16,EPILOGUE=smem", true});
  cases.push_back({"matmul(A[1000,333]:f32, B[333,777]:f32)", "ATOM=mma_tf32,EPILOGUE=smem", true});
  // SIMT (tests/gpu/test_gemm.cpp).
  cases.push_back({"matmul(A[1000,777]:f32, B[777,3000]:f32)", "EPILOGUE=smem", false});
  cases.push_back({"matmul(A[M,K]:f32, B[K,N]:f32)", "EPILOGUE=smem", false});
  for (const std::string stage : {"BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=sync,STAGES=2",
                                  "BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=cp_async,STAGES=3",
                                  "BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=tma,STAGES=2"})
    cases.push_back({"relu(add(matmul(A[1000,776]:f32, B[776,3000]:f32), bias[3000]:f32))",
                     stage + ",EPILOGUE=smem", false});
  cases.push_back({"gelu(linear(X[333,96]:f16, W[200,96]:f16, bias[200]:f16))", "EPILOGUE=smem", false});
  cases.push_back({"matmul(A[128,16384]:f32, B[16384,128]:f32)", "SPLITK=128,SPLITK_MODE=reduce,EPILOGUE=smem", false});
  for (const std::string arch : {"sm_90a", "sm_80"})
    for (const Case& c : cases) {
      if (arch == "sm_80" && c.knobs.find("STAGE=tma") != std::string::npos) continue;
      SCOPED_TRACE(arch + " " + c.expr + " knobs=" + c.knobs);
      CompileOptions opt;
      opt.knobs = Knobs::parse(c.knobs);
      opt.target = Target::for_arch(arch);
      CompiledProgram p = compile_expression(c.expr, opt);
      EXPECT_NE(p.cuda.find("__syncthreads();\n  for ("), std::string::npos)
          << "no copy loop after the tile's barrier\n" << p.cuda;
      // A 16-bit tile is copied out as bits, without an f32 round trip.
      const bool half = p.cuda.find("loom_f16* __restrict__ loom_t_out") != std::string::npos ||
                        p.cuda.find("loom_bf16* __restrict__ loom_t_out") != std::string::npos;
      EXPECT_EQ(p.cuda.find("loom::mov") != std::string::npos, half);
      CompileResult r = nvrtc(p, arch);
      for (const auto& kern : p.state.kernel.kernels) {
        ASSERT_TRUE(r.resources.count(kern.name)) << r.log;
        if (!c.no_spills) continue;
        EXPECT_EQ(r.resources.at(kern.name).spill_store_bytes, 0) << kern.name;
        EXPECT_EQ(r.resources.at(kern.name).spill_load_bytes, 0) << kern.name;
      }
    }
}

// How the epilogue reads a packed f16 accumulator, by output type: an aligned f16 output
// takes each register (c0,c1 or c2,c3, adjacent columns) as one 4-byte store; f32 and
// bf16 outputs and fused ops widen each half to f32 first. And the accumulators need
// about half the registers of f32 ones at the default 4x8 atoms per warp.
TEST(CompileKernels, AccF16EpilogueUnpacksOrStoresAsAccumulated) {
  auto cuda = [](const std::string& e, const std::string& k) {
    CompileOptions opt;
    opt.knobs = Knobs::parse(k);
    return compile_expression(e, opt);
  };
  const std::string knobs = "ATOM=mma_f16,ACC=f16,WM=2,WN=2,FM=2,FN=4,BK=16,STAGE=sync";
  const std::string f16 = cuda("matmul(A[64,64]:f16, B[64,64]:f16)", knobs).cuda;
  EXPECT_NE(f16.find("loom::st_global_b32(&loom_t_out["), std::string::npos) << f16;
  EXPECT_NE(f16.find(", acc3[m_a][n_a][1]);"), std::string::npos) << f16;
  EXPECT_EQ(f16.find("cvt_f32_f16(loom::b16_half"), std::string::npos);
  const std::string f32 = cuda("matmul(A[64,64]:f16, B[64,64]:f16, out=f32)", knobs).cuda;
  EXPECT_NE(f32.find("loom::cvt_f32_f16(loom::b16_half<1>(acc3[m_a][n_a][1]))"), std::string::npos) << f32;
  EXPECT_NE(f32.find("loom::st_v2_f32("), std::string::npos);
  const std::string bf16 = cuda("matmul(A[64,64]:f16, B[64,64]:f16, out=bf16)", knobs).cuda;
  EXPECT_NE(bf16.find("loom::st_v2_bf16("), std::string::npos) << bf16;
  // Ragged N: one guarded value at a time; into f16 its bits go out as they are.
  const std::string ragged = cuda("matmul(A[64,64]:f16, B[64,60]:f16)", knobs).cuda;
  EXPECT_NE(ragged.find("loom::st_b16(&loom_t_out["), std::string::npos) << ragged;
  const std::string relu = cuda("relu(add(matmul(A[64,64]:f16, B[64,64]:f16), bias[64]:f32))", knobs).cuda;
  EXPECT_NE(relu.find("= loom::cvt_f32_f16(loom::b16_half<0>(acc3[m_a][n_a][0])) + "), std::string::npos) << relu;
  auto regs = [&](const std::string& k) {
    CompiledProgram c = cuda("matmul(A[4096,4096]:f16, B[4096,4096]:f16)", k);
    CompileResult r = nvrtc(c, "sm_90a");
    EXPECT_EQ(r.resources.at("k_matmul").spill_store_bytes, 0);
    return r.resources.at("k_matmul").registers;
  };
  const int f16_regs = regs("ATOM=mma_f16,ACC=f16"), f32_regs = regs("ATOM=mma_f16");
  EXPECT_LT(f16_regs + 48, f32_regs) << "4x8 atoms: 64 accumulator registers fewer";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CompileKernels, ErrorsNameTheProblem) {
  auto has = [](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg;
  };
  has(error_of([] { compile_expression("matmul(A[4,4]:f32, B[5,4]:f32)", {}); }), "K=4");
  has(error_of([] { compile_expression("matmul(A[4,4]:f32, B[4,4]:f16)", {}); }), "f16");
  has(error_of([] { compile_expression("matmul(A[4,4:f32, B[4,4]:f32)", {}); }), "column");
  has(error_of([] { Target::for_arch("sm_70"); }), "sm_90a");
  has(error_of([] { bind_sizes(parse_expression("matmul(A[M,K]:f32, B[K,N]:f32)"), {{"M", 4}}); }),
      "--dims");
  has(error_of([] {
        CompileOptions o;
        o.knobs = Knobs::parse("BM=64,BN=64,FM=1,FN=1");
        compile_expression("matmul(A[64,64]:f32, B[64,64]:f32)", o);
      }),
      "4096 threads per block; the limit is 1024");
  has(error_of([] { Knobs::parse("TILE=3"); }), "unknown knob 'TILE'");
  has(error_of([] { Knobs::parse("FM=100"); }), "outside its range [1, 64]");
  has(error_of([] {
        CompileOptions o;
        o.knobs = Knobs::parse("ATOM=mma_bf16,ACC=f16");
        compile_expression("matmul(A[64,64]:bf16, B[64,64]:bf16)", o);
      }),
      "accumulates in f32 only");
  has(error_of([] {
        CompileOptions o;
        o.knobs = Knobs::parse("ATOM=fma,ACC=f16");
        compile_expression("matmul(A[64,64]:f16, B[64,64]:f16)", o);
      }),
      "set ATOM=mma_f16");
}

}  // namespace
}  // namespace loom
