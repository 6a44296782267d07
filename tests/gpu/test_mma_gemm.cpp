// GPU correctness of tensor-core (mma.sync) GEMMs: ATOM=mma_f16 / mma_bf16 / mma_tf32 with
// fragments loaded by ldmatrix (LDMATRIX=1, the default; tf32 through its b32 view where
// the slab has K contiguous) or element-wise from shared slabs (LDMATRIX=0, tf32 M- or
// N-contiguous slabs, a padding that breaks 16-byte rows), on square and odd shapes, both
// transposes, fused epilogues, batch, both staging transports, tf32 slab layouts
// (SLAB_A/SLAB_B, PAD_KOUTER) and the TF32 article's rungs. Each case runs
// through run_expression: seeded inputs, output poisoned with NaN, fp64 reference,
// relative Frobenius error under the dtype's threshold (f16-accumulating kernels, ACC=f16:
// under the threshold of that contract). Skips with the reason on a GPU-less machine.
#include <gtest/gtest.h>

#include <iostream>

#include "acc_f16_cases.h"
#include "compile_first.h"
#include "driver/run.h"
#include "frontend/parser.h"
#include "ir/dtype.h"
#include "runtime/device.h"

namespace loom {
namespace {

struct MmaGemmCase {
  std::string expr;
  std::string knobs;
  // f32 tensors through mma_tf32 are rounded to tf32 on the way in, which the fp64
  // reference of f32 inputs does not do: judge them by the tf32 threshold.
  bool tf32_rounded = false;
  // The source must (1) or must not (0) call ldmatrix; -1: either.
  int ldmatrix = -1;
};

void PrintTo(const MmaGemmCase& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs; }

class GpuMmaGemm : public ::testing::TestWithParam<MmaGemmCase> {
 protected:
  void SetUp() override {
    const auto& c = GetParam();
    compile_then_require_gpu(c.expr, c.knobs);
  }
};

TEST_P(GpuMmaGemm, MatchesFp64Reference) {
  const MmaGemmCase& c = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(c.knobs);
  opt.seed = 11;
  RunReport r = run_expression(c.expr, opt);
  EXPECT_NE(r.program.cuda.find("loom::mma_m16n8k"), std::string::npos) << "not a tensor-core kernel";
  if (c.ldmatrix >= 0) {
    EXPECT_EQ(r.program.cuda.find("loom::ldmatrix_x") != std::string::npos, c.ldmatrix == 1)
        << "LDMATRIX expectation " << c.ldmatrix;
  }
  // The staged epilogue (k:054) declares its tile; the direct one has none. The knob in
  // effect is the summary's (aligned 16-bit mma defaults stage the epilogue too).
  EXPECT_EQ(r.program.cuda.find("const loom_t_out_s = ") != std::string::npos,
            r.program.summary.find("EPILOGUE=smem") != std::string::npos)
      << r.program.summary;
  if (c.knobs.find("EPILOGUE=smem") != std::string::npos) {
    EXPECT_NE(r.program.summary.find("EPILOGUE=smem"), std::string::npos);
  }
  if (c.tf32_rounded)
    EXPECT_LE(r.verify.rel_fro_error, verify_threshold(DType::TF32, DType::F32)) << r.verify.message;
  else
    EXPECT_TRUE(r.verify.passed) << r.verify.message;
}

std::vector<MmaGemmCase> staged_epilogue_cases() {
  std::vector<MmaGemmCase> v;
  for (auto [atom, dt] : std::vector<std::pair<std::string, std::string>>{
           {"mma_f16", "f16"}, {"mma_bf16", "bf16"}, {"mma_tf32", "tf32"}}) {
    const std::string staged = "ATOM=" + atom + ",EPILOGUE=smem";
    v.push_back({"matmul(A[512,512]:" + dt + ", B[512,512]:" + dt + ")", staged});
    v.push_back({"matmul(A[1000,333]:" + dt + ", B[333,777]:" + dt + ")", staged});
    v.push_back({"relu(add(matmul(A[1000,333]:" + dt + ", B[776,333]:" + dt + ".T), bias[776]:f32))", staged});
    v.push_back({"matmul(A[333,1000]:" + dt + ".T, B[777,333]:" + dt + ".T)",
                 staged + ",WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=sync,STAGES=2"});
    v.push_back({"bmm(A[4,129,72]:" + dt + ", B[4,72,100]:" + dt + ")", staged});
  }
  v.push_back({"gelu(linear(X[1000,333]:f16, W[777,333]:f16, bias[777]:f16))", "ATOM=mma_f16,EPILOGUE=smem"});
  v.push_back({"matmul(A[1000,333]:bf16, B[333,776]:bf16, out=f32)", "ATOM=mma_bf16,EPILOGUE=smem"});
  v.push_back({"matmul(A[1000,333]:f32, B[333,777]:f32)", "ATOM=mma_tf32,EPILOGUE=smem", true});
  return v;
}

std::vector<MmaGemmCase> cases() {
  std::vector<MmaGemmCase> v;
  const std::string base = "WM=2,WN=2,FM=2,FN=4,";
  for (auto [atom, dt] : std::vector<std::pair<std::string, std::string>>{
           {"mma_f16", "f16"}, {"mma_bf16", "bf16"}, {"mma_tf32", "tf32"}}) {
    const std::string sync = "ATOM=" + atom + "," + base + "BK=32,STAGE=sync,STAGES=2";
    const std::string async = "ATOM=" + atom + "," + base + "BK=32,STAGE=cp_async,STAGES=3";
    v.push_back({"matmul(A[256,256]:" + dt + ", B[256,256]:" + dt + ")", sync});
    v.push_back({"matmul(A[512,512]:" + dt + ", B[512,512]:" + dt + ")", "ATOM=" + atom + "," + base + "BK=32,STAGE=sync"});
    v.push_back({"matmul(A[1000,333]:" + dt + ", B[333,777]:" + dt + ")", sync});
    v.push_back({"matmul(A[1000,333]:" + dt + ", B[333,777]:" + dt + ")", async});
    v.push_back({"matmul(A[333,1000]:" + dt + ".T, B[777,333]:" + dt + ".T)", async});
    v.push_back({"matmul(A[333,1000]:" + dt + ".T, B[333,777]:" + dt + ")", sync});
    v.push_back({"relu(add(matmul(A[1000,333]:" + dt + ", B[777,333]:" + dt + ".T), bias[777]:f32))", async});
    v.push_back({"bmm(A[4,129,72]:" + dt + ", B[4,72,100]:" + dt + ")", sync});
  }
  // f32 tensors rounded by the atom, the default-ish knobs, other warp splits.
  v.push_back({"matmul(A[1000,333]:f32, B[333,777]:f32)", "ATOM=mma_tf32,WM=2,WN=2,FM=2,FN=4,BK=16,STAGE=cp_async,STAGES=3", true});
  v.push_back({"gelu(linear(X[1000,333]:f16, W[777,333]:f16, bias[777]:f16))", "ATOM=mma_f16"});
  v.push_back({"matmul(A[1000,333]:bf16, B[333,777]:bf16, out=f32)", "ATOM=mma_bf16,WM=4,WN=1,FM=1,FN=8,BK=16,STAGE=sync,PAD_SMEM=8"});
  v.push_back({"matmul(A[1000,333]:f16, B[333,777]:f16)", "ATOM=mma_f16,WM=1,WN=1,FM=1,FN=1,BK=16,STAGE=sync,STAGES=1"});
  // Odd 16-bit rows: realigned 16-byte copies (REALIGN=1, the default for them) and the
  // 2-byte element copies (REALIGN=0); the f16 1000x333x777 default (both operands odd,
  // B's last chunk straddling the tensor's end).
  v.push_back({"matmul(A[1000,333]:bf16, B[333,777]:bf16)", "ATOM=mma_bf16," + base + "BK=32,STAGE=cp_async,STAGES=3,REALIGN=0"});
  v.push_back({"matmul(A[1000,333]:bf16, B[333,777]:bf16)", "ATOM=mma_bf16," + base + "BK=32,STAGE=cp_async,STAGES=3,REALIGN=1"});
  v.push_back({"matmul(A[1000,777]:f16, B[777,333]:f16)", ""});
  v.push_back({"matmul(A[333,1001]:f16.T, B[333,777]:f16)", "ATOM=mma_f16," + base + "BK=32,STAGE=sync,STAGES=2,REALIGN=1"});
  // Step 01b: ldmatrix on every arrangement (x4 / x4.trans for A, x2.trans / x2 for B),
  // odd shapes, batch, an epilogue; the element-wise packed path for comparison; and a
  // padding of 4 elements, whose 8-byte row shift forces the fallback.
  for (auto [atom, dt] : std::vector<std::pair<std::string, std::string>>{
           {"mma_f16", "f16"}, {"mma_bf16", "bf16"}}) {
    const std::string on = "ATOM=" + atom + ",LDMATRIX=1,WM=2,WN=2,FM=2,FN=4,BK=32,";
    const std::string off = "ATOM=" + atom + ",LDMATRIX=0,WM=2,WN=2,FM=2,FN=4,BK=32,";
    v.push_back({"matmul(A[1000,333]:" + dt + ", B[333,777]:" + dt + ")", on + "STAGE=cp_async,STAGES=3", false, 1});
    v.push_back({"matmul(A[333,1000]:" + dt + ".T, B[777,333]:" + dt + ".T)", on + "STAGE=sync,STAGES=2", false, 1});
    v.push_back({"matmul(A[333,1000]:" + dt + ".T, B[333,777]:" + dt + ")", on + "STAGE=cp_async,STAGES=2,PAD_SMEM=8", false, 1});
    v.push_back({"relu(add(matmul(A[1000,333]:" + dt + ", B[777,333]:" + dt + ".T), bias[777]:f32))", on + "STAGE=sync", false, 1});
    v.push_back({"bmm(A[4,129,72]:" + dt + ", B[4,72,100]:" + dt + ")", on + "STAGE=cp_async,STAGES=2", false, 1});
    v.push_back({"matmul(A[1000,333]:" + dt + ", B[333,777]:" + dt + ")", off + "STAGE=cp_async,STAGES=3", false, 0});
    v.push_back({"matmul(A[333,1000]:" + dt + ".T, B[777,333]:" + dt + ".T)", off + "STAGE=sync", false, 0});
    v.push_back({"matmul(A[1000,333]:" + dt + ", B[333,777]:" + dt + ")", on + "STAGE=sync,PAD_SMEM=4", false, 0});
  }
  // Fragment double buffering (FRAG_BUFFERS=2): ldmatrix and element-wise fragments,
  // several atom steps per slab, both transports, an epilogue.
  v.push_back({"matmul(A[1000,333]:f16, B[333,777]:f16)", "ATOM=mma_f16,FRAG_BUFFERS=2", false, 1});
  v.push_back({"relu(add(matmul(A[1000,333]:bf16.T, B[777,1000]:bf16.T), bias[777]:f32))",
               "ATOM=mma_bf16,WM=2,WN=2,FM=2,FN=4,BK=64,STAGE=sync,STAGES=2,FRAG_BUFFERS=2", false, 1});
  v.push_back({"matmul(A[1000,333]:tf32, B[333,777]:tf32)",
               "ATOM=mma_tf32,WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=cp_async,STAGES=3,FRAG_BUFFERS=2"});
  // The staged epilogue (EPILOGUE=smem): the mma defaults on aligned (16-byte copies)
  // and ragged shapes (odd N: scalar copies; N = 776: 16-byte copies under a column
  // guard), both transposes, fused bias + relu and linear + gelu, batch (N = 100: 8-byte
  // f16 copies), an f32 output of bf16, sync staging. tests/cpu/driver's
  // StagedEpilogueCompilesWithoutSpills compiles the same list.
  for (const MmaGemmCase& c : staged_epilogue_cases()) v.push_back(c);
  // tf32 fragments three ways (interpreted in tests/cpu/passes/test_tf32_fragments.cpp,
  // compiled in tests/cpu/driver/test_compile_kernels.cpp): ldmatrix on 32-bit data from
  // K-contiguous slabs (A [BM][BK]; B given transposed), B transposed into shared memory
  // (SLAB_B=kinner: 4-byte cp.async or register-staged), B row-major read element-wise
  // from its own pad (PAD_KOUTER); f32 inputs rounded by the atom and tf32 inputs.
  const std::string t = "ATOM=mma_tf32,WM=2,WN=2,FM=2,FN=4,BK=32,";
  v.push_back({"matmul(A[1000,333]:f32, B[333,777]:f32)", "ATOM=mma_tf32", true, 1});
  v.push_back({"matmul(A[1024,1024]:f32, B[1024,1024]:f32)", "ATOM=mma_tf32", true, 1});
  v.push_back({"matmul(A[1000,333]:tf32, B[777,333]:tf32.T)", t + "STAGE=cp_async,STAGES=3", false, 1});
  v.push_back({"bmm(A[4,129,72]:f32, B[4,100,72]:f32.T)", t + "STAGE=sync,STAGES=2", true, 1});
  v.push_back({"matmul(A[1000,333]:f32, B[333,777]:f32)", t + "STAGE=cp_async,STAGES=3,SLAB_B=kinner", true, 1});
  v.push_back({"relu(add(matmul(A[1000,333]:tf32, B[333,777]:tf32), bias[777]:f32))", t + "STAGE=sync,STAGES=2,SLAB_B=kinner", false, 1});
  v.push_back({"matmul(A[333,1000]:f32.T, B[333,777]:f32)", t + "STAGE=cp_async,STAGES=3,SLAB_A=kinner,SLAB_B=kinner", true, 1});
  v.push_back({"bmm(A[4,129,72]:tf32, B[4,72,100]:tf32)", t + "STAGE=cp_async,STAGES=2,SLAB_B=kinner", false, 1});
  v.push_back({"matmul(A[1000,333]:f32, B[333,777]:f32)", t + "STAGE=cp_async,STAGES=3,PAD_SMEM=4,PAD_KOUTER=8", true, 1});
  v.push_back({"matmul(A[1000,333]:f32, B[333,777]:f32)", t + "STAGE=cp_async,STAGES=3,SWIZZLE=128B,PAD_KOUTER=8,FRAG_BUFFERS=2", true, 1});
  v.push_back({"matmul(A[333,1000]:tf32.T, B[333,777]:tf32)", t + "STAGE=cp_async,STAGES=3,PAD_SMEM=4,PAD_KOUTER=8", false, 0});
  // The TF32 article's kernels as knob sets (128x128x16 blocks of 2x4 warps of 4x4 atoms;
  // on the aligned shape two blocks per SM, as its __launch_bounds__(256, 2)):
  // B transposed + ldmatrix; + SWIZZLE=64B; + double buffer and grid swizzle; B row-major
  // with conflict-free reads (PAD_KOUTER=8), A swizzled; + double buffer.
  const std::string rung = "ATOM=mma_tf32,WM=2,WN=4,FM=4,FN=4,BK=16,STAGE=cp_async,";
  for (const auto& [e, cap] : std::vector<std::pair<std::string, std::string>>{
           {"matmul(A[1024,1024]:f32, B[1024,1024]:f32)", ",MIN_BLOCKS=2"},
           {"matmul(A[1000,333]:f32, B[333,777]:f32)", ""}})
    for (const std::string k : {"STAGES=1,SLAB_B=kinner", "STAGES=1,SLAB_B=kinner,SWIZZLE=64B",
                                "STAGES=2,SLAB_B=kinner,SWIZZLE=64B,GROUP_M=8",
                                "STAGES=1,SWIZZLE=64B,PAD_KOUTER=8,GROUP_M=8",
                                "STAGES=2,SWIZZLE=64B,PAD_KOUTER=8,GROUP_M=8"})
      v.push_back({e, rung + k + cap, true, 1});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuMmaGemm, ::testing::ValuesIn(cases()));

// f16 accumulation (ACC=f16): the cases of acc_f16_cases.h (compiled for sm_90a and sm_80
// by the CPU tests). Each is judged by the f16-accumulate threshold for its K, never the
// f32 one; an f32 output must also show more error than f32 accumulation would leave, or
// the kernel did not accumulate in f16.
class GpuAccF16Gemm : public ::testing::TestWithParam<std::pair<std::string, std::string>> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().first, GetParam().second); }
};

TEST_P(GpuAccF16Gemm, MatchesFp64ReferenceUnderTheF16AccumulateThreshold) {
  const auto& [expr, knobs] = GetParam();
  RunOptions opt;
  opt.knobs = Knobs::parse(knobs);
  opt.seed = 11;
  RunReport r = run_expression(expr, opt);
  EXPECT_NE(r.program.cuda.find("loom::mma_m16n8k16_f16_f16(&acc3["), std::string::npos)
      << "not an f16-accumulating kernel";
  const Graph g = parse_expression(expr);
  const DType out = g.node(g.result()).dtype;
  int64_t K = 0;
  for (const auto& n : g.nodes)
    if (n.kind == OpKind::Matmul) K = g.node(n.inputs[0]).shape.back().value;
  EXPECT_EQ(r.verify.threshold, verify_threshold_f16_accumulate(DType::F16, out, K, 16));
  EXPECT_TRUE(r.verify.passed) << r.verify.message;
  if (out == DType::F32) {
    EXPECT_GT(r.verify.rel_fro_error, verify_threshold(DType::F16, DType::F32)) << r.verify.message;
  }
  std::cout << "[ ACC=f16  ] K=" << K << " " << r.verify.message << "\n";
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuAccF16Gemm, ::testing::ValuesIn(acc_f16_gemm_cases()));

}  // namespace
}  // namespace loom
