// NVRTC (sm_90a, no GPU needed) compiles every Hopper wrapper of the device header, the
// generated wgmma wrappers of the atom table, every case kernel of the GPU wgmma test and
// every case of the GPU TMA-store epilogue test (without spills), so a GPU run is left
// with the numerics alone. It lives here because loom_driver links
// both codegen (the generator) and the runtime (NVRTC).
#include <gtest/gtest.h>

#include <tuple>

#include "codegen/cuda.h"
#include "codegen/wgmma_wrappers.h"
#include "driver/compile.h"
#include "ir/error.h"
#include "runtime/nvrtc.h"
#include "nvrtc_check.h"

#include "../../gpu/tma_store_cases.h"
#include "../../gpu/epilogue_operand_cases.h"
#include "../../gpu/wgmma_cases.h"
#include "../../gpu/wgmma_rs_cases.h"
#include "../../gpu/wgmma_transpose_cases.h"

namespace loom {
namespace {

CompileResult nvrtc(const std::string& source, const std::string& arch = "sm_90a") {
  CompileRequest req;
  req.name = "test_wgmma_compile.cu";
  req.source = source;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = arch;
  return compile(req, nullptr);
}

// Calls every Hopper wrapper of loom_device.cuh once (a cluster launch is not needed to
// compile cluster instructions).
const char* kHeaderWrappers = R"(#include "loom_device.cuh"
extern "C" __global__ void __launch_bounds__(256) hopper_wrappers(
    const __grid_constant__ loom_tensor_map map, float* out, int c0, int c1) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned long long* bar = reinterpret_cast<unsigned long long*>(smem + 8192);
  if (threadIdx.x >= 128) {
    loom::setmaxnreg_dec<40>();
    if (threadIdx.x == 128) {
      loom::tma_load_2d_multicast(smem, &map, bar, 0x3, c0, c1);
      loom::tma_load_3d_multicast(smem, &map, bar, 0x3, c0, c1, 0);
      loom::tma_load_4d_multicast(smem, &map, bar, 0x3, c0, c1, 0, 1);
      loom::tma_store_2d(&map, smem, c0, c1);
      loom::tma_store_3d(&map, smem, c0, c1, 0);
      loom::bulk_commit_group();
      loom::bulk_wait_group_read<0>();
    }
    return;
  }
  loom::setmaxnreg_inc<232>();
  unsigned r[4] = {threadIdx.x, 1u, 2u, 3u};
  loom::stmatrix_x4(smem + 16 * (threadIdx.x % 32), r);
  loom::stmatrix_x4_trans(smem + 4096 + 16 * (threadIdx.x % 32), r);
  loom::fence_proxy_async_shared();
  loom::bar_sync(1 + threadIdx.x / 128, 128);
  loom::mbarrier_arrive(bar);
  loom::mbarrier_arrive_cluster(bar, loom::cluster_ctarank() ^ 1u);
  loom::cluster_arrive_relaxed();
  loom::cluster_wait();
  loom::cluster_arrive();
  loom::cluster_wait();
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  unsigned long long desc = loom::wgmma_desc(smem, 16, 1024, 1);
  desc = loom::wgmma_desc_advance(desc, 32);
  loom::wgmma_fence_operand(d);
  loom::wgmma_fence();
  loom::wgmma_commit_group();
  loom::wgmma_wait_group<1>();
  loom::wgmma_wait_group<0>();
  loom::wgmma_fence_operand(d);
  out[threadIdx.x] = d[0] + float(desc & 0xffff);
}
)";

TEST(WgmmaCompile, EveryHopperHeaderWrapperCompilesForSm90a) {
  EXPECT_GT(nvrtc(kHeaderWrappers).cubin.size(), 0u);
}

// Why k:030 emits setmaxnreg only with two or more consumer warpgroups, and what
// expect_setmaxnreg_honoured catches: in a kernel with no minimum blocks in its
// __launch_bounds__, ptxas has no register count at entry and drops setmaxnreg with an
// info line (C7508); given one, it carries it out.
TEST(WgmmaCompile, PtxasDropsSetmaxnregWithoutAnEntryRegisterCount) {
  const CompileResult plain = nvrtc(kHeaderWrappers);
  ASSERT_GT(plain.cubin.size(), 0u) << plain.log;
  if (plain.resources.empty()) GTEST_SKIP() << "NVRTC left no ptxas report:\n" << plain.log;
  EXPECT_NE(plain.log.find("'setmaxnreg' ignored"), std::string::npos) << plain.log;
  std::string bounded = kHeaderWrappers;
  const std::string from = "__launch_bounds__(256)";
  bounded.replace(bounded.find(from), from.size(), "__launch_bounds__(256, 1)");
  nvrtc_check::expect_setmaxnreg_honoured(nvrtc(bounded));
}

TEST(WgmmaCompile, GeneratedWrappersCompileForSm90a) {
  std::string src = "#include \"loom_device.cuh\"\n";
  std::string kernels;
  int i = 0;
  for (DType t : {DType::F16, DType::BF16, DType::TF32})
    for (int n : {8, 64, 128, 256})
      for (bool rs : {false, true}) {
        const AtomDef& a = *wgmma_atom(t, n);
        const std::string name = wgmma_variant_id(a, rs);
        src += wgmma_wrapper_source(a, rs);
        const std::string tmpl = t == DType::TF32 ? "" : rs ? "<1>" : "<0, 1>";
        kernels += "extern \"C\" __global__ void k" + std::to_string(i++) +
                   "(float* out, unsigned long long da, unsigned long long db, const unsigned* "
                   "af) {\n  float d[" + std::to_string(n / 2) + "] = {};\n" +
                   (rs ? "  unsigned a[4] = {af[0], af[1], af[2], af[3]};\n" : "") +
                   "  loom::wgmma_fence();\n  loom::" + name + tmpl + "(d, " +
                   (rs ? "a" : "da") + ", db, 1);\n  loom::wgmma_commit_group();\n"
                   "  loom::wgmma_wait_group<0>();\n  loom::wgmma_fence_operand(d);\n"
                   "  for (int j = 0; j < " + std::to_string(n / 2) +
                   "; ++j) out[j * 128 + threadIdx.x] = d[j];\n}\n";
      }
  CompileResult r = nvrtc(src + kernels);
  EXPECT_GT(r.cubin.size(), 0u);
  if (r.log.find("ptxas info") == std::string::npos)
    GTEST_SKIP() << "NVRTC's cache skipped ptxas' report (set CUDA_CACHE_DISABLE=1)";
  for (int k = 0; k < i; ++k) {
    const std::string name = "k" + std::to_string(k);
    ASSERT_TRUE(r.resources.count(name)) << r.log;
    EXPECT_EQ(r.resources.at(name).spill_store_bytes, 0) << name;
  }
}

TEST(WgmmaCompile, EveryGpuTestCaseCompilesForSm90a) {
  const auto cases = wgmma_test::cases();
  CompileResult r = nvrtc(wgmma_test::kernel_source(cases));
  EXPECT_GT(r.cubin.size(), 0u);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    const wgmma_test::Layout l = wgmma_test::layout_of(cases[i]);
    // Shared memory an H100/H200 block can opt in to, and descriptor starts inside it.
    EXPECT_LE(l.bytes, 227 * 1024);
    for (int kk = 0; kk < l.ksteps; ++kk) {
      EXPECT_EQ(l.a_start(kk) % 16, 0);
      EXPECT_EQ(l.b_start(kk) % 16, 0);
      EXPECT_LT(l.b_start(kk), l.bytes);
    }
  }
}

// The staged strips' GPU cases (EPILOGUE=smem on warp-specialized kernels) compile for
// sm_90a without spills, copy with the threads (no TMA store) between named barriers, and
// keep the warp-specialized schedule.
TEST(WgmmaCompile, StagedStripEpilogueCasesCompileWithoutSpills) {
  for (const tma_store_test::Case& c : tma_store_test::staged_cases()) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(c.expr, opt);
    EXPECT_EQ(p.state.used_knobs.at("EPILOGUE"), "smem");
    EXPECT_EQ(p.state.used_knobs.at("WARP_SPECIALIZE"), "1");
    EXPECT_EQ(p.cuda.find("tma_store_2d"), std::string::npos);
    EXPECT_NE(p.cuda.find("loom::bar_sync("), std::string::npos);
    CompileResult r = nvrtc(p.cuda);
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// The TMA-store epilogue's GPU cases (rung 6 of the hopper ladder among them, whole-tile
// and strip-buffered) compile without spills and store through the tensor map between
// named barriers.
TEST(WgmmaCompile, TmaStoreEpilogueCasesCompileWithoutSpills) {
  for (const tma_store_test::Case& c : tma_store_test::cases()) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(c.expr, opt);
    EXPECT_NE(p.cuda.find("loom::tma_store_2d(&loom_m_out_s_tmap"), std::string::npos);
    EXPECT_NE(p.cuda.find("loom::bar_sync("), std::string::npos);
    // Two buffers wait for all but the newest store before a strip's writes (EPI_SYNC=2,
    // or three strips through two buffers), or for all before the barrier that hands a
    // strip to TMA (EPI_SYNC=1, the default).
    auto has = [&](const char* k) { return c.knobs.find(k) != std::string::npos; };
    const bool keep_one = has("EPI_BUFFERS=2") && (has("EPI_SYNC=2") || has("BN=192"));
    EXPECT_EQ(p.cuda.find("loom::bulk_wait_group_read<1>()") != std::string::npos, keep_one);
    EXPECT_NE(p.cuda.find("loom::bulk_wait_group_read<0>()"), std::string::npos);
    EXPECT_EQ(p.cuda.find("loom::bulk_wait_group_read<2>()") != std::string::npos,
              has("EPI_BUFFERS=4"));
    CompileResult r = nvrtc(p.cuda);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// The epilogue-operand GPU cases (EPI_LOAD=tma): the operand's tensor map is a kernel
// parameter, its box loaded by TMA, and nothing spills.
TEST(WgmmaCompile, EpilogueOperandCasesCompileWithoutSpills) {
  for (const epilogue_operand_test::Case& c : epilogue_operand_test::cases()) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(c.expr, opt);
    const std::string op = c.expr.find("E0[") != std::string::npos ? "E0" : "R";
    EXPECT_NE(p.cuda.find("loom_m_" + op + "_s_tmap"), std::string::npos);
    EXPECT_EQ(p.state.used_knobs.at("EPI_LOAD"), "tma");
    CompileResult r = nvrtc(p.cuda);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// The defaults load one 16-bit epilogue operand of the output's shape by TMA where the
// persistent TMA-store schedule has room (bench/NOTES.md, "epilogue operands by TMA during
// the mainloop"): beside the ring as it is (BN = 128, 64), or for BN = 256 with a stage
// fewer and 2 strip buffers up to K = 4096; a longer K, two such operands or a 4-byte one
// keep the direct reads. Each default compiles (shared memory fits) without spills.
TEST(WgmmaCompile, EpilogueOperandDefaults) {
  struct Want {
    std::string expr, load, stages, buffers;
  };
  const std::vector<Want> wants = {
      {"mul(silu(linear(X[1024,2048]:bf16, W[8192,2048]:bf16)), E0[1024,8192]:bf16)", "tma", "3", "2"},
      {"add(linear(X[4096,4096]:bf16, W[4096,4096]:bf16, b[4096]:bf16), R[4096,4096]:bf16)", "tma", "3", "2"},
      // The medium class's persistent form takes the deepest ring that fits, up to 6
      // (medium_depth): at BN = 128 no room is left for the operand's tile, so its reads
      // stay direct; at BN = 64 the whole operand tile still fits beside 6 stages.
      {"add(linear(X[1024,8192]:bf16, W[2048,8192]:bf16), R[1024,2048]:bf16)", "", "6", ""},
      {"add(linear(X[256,4096]:bf16, W[4096,4096]:bf16), R[256,4096]:bf16)", "tma", "6", "0"},
      {"add(linear(X[4096,8192]:bf16, W[4096,8192]:bf16), R[4096,4096]:bf16)", "", "4", ""},
      {"add(mul(silu(linear(X[1024,2048]:bf16, W[8192,2048]:bf16)), E0[1024,8192]:bf16), "
       "R[1024,8192]:bf16)", "", "4", ""},
      {"add(linear(X[1024,2048]:bf16, W[8192,2048]:bf16, out=f32), R[1024,8192]:f32)", "", "4", ""},
      {"linear(X[1024,2048]:bf16, W[8192,2048]:bf16)", "", "4", ""},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.expr);
    CompileOptions opt;
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(w.expr, opt);
    const auto& used = p.state.used_knobs;
    auto knob = [&](const char* k) { return used.count(k) ? used.at(k) : std::string(); };
    EXPECT_EQ(knob("EPI_LOAD"), w.load);
    EXPECT_EQ(knob("STAGES"), w.stages);
    EXPECT_EQ(knob("EPI_LOAD_BUFFERS"), w.buffers);
    if (w.load != "tma") continue;
    EXPECT_TRUE(p.notes.empty()) << p.notes.front();
    if (w.stages == "3") {
      // Explicit knobs that drop the operand's load get the stage back; an explicit deeper
      // ring drops the default load it leaves no room for (passes/defaults.cpp).
      for (const auto& [knobs, load, stages] :
           std::vector<std::tuple<std::string, std::string, std::string>>{
               // (EPI_LOAD=direct leaves nothing for k:056 to record)
               {"EPI_LOAD=direct", "", "4"},
               {"STAGES=4", "", "4"},
               {"EPI_LOAD=direct,STAGES=3", "", "3"},
               {"ATOM=wgmma_bf16,BN=128", "", "4"}}) {
        SCOPED_TRACE(knobs);
        CompileOptions o = opt;
        o.knobs = Knobs::parse(knobs);
        const auto q = compile_expression(w.expr, o).state.used_knobs;
        EXPECT_EQ(q.count("EPI_LOAD") ? q.at("EPI_LOAD") : "", load);
        EXPECT_EQ(q.at("STAGES"), stages);
      }
    }
    CompileResult r = nvrtc(p.cuda);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// The tile-transition GPU cases without the TMA-store epilogue (the old zeroing loop,
// scale-d under split-K) compile without spills.
TEST(WgmmaCompile, TileTransitionCasesCompileWithoutSpills) {
  for (const tma_store_test::Case& c : tma_store_test::transition_gemm_cases()) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(c.expr, opt);
    const bool zeroing = c.knobs.find("WGMMA_ZERO=explicit") != std::string::npos;
    EXPECT_EQ(p.cuda.find("int(0 < k_o || 0 < k_i)") == std::string::npos, zeroing);
    CompileResult r = nvrtc(p.cuda);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// The large-wgmma defaults stream the output tile through strip buffers: 16-bit strips
// leave through stmatrix, no spills, 4 stages of ring beside the 32 KB of buffers.
TEST(WgmmaCompile, StripBufferedDefaultsUseStmatrixWithoutSpills) {
  for (const char* expr : {"matmul(A[8192,8192]:bf16, B[8192,8192]:bf16)",
                           "matmul(A[4096,4096]:f16, B[4096,4096]:f16)",
                           "matmul(A[4096,4096]:bf16, B[4096,4096]:bf16, out=f32)"}) {
    SCOPED_TRACE(expr);
    CompileOptions opt;
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(expr, opt);
    const bool b16 = std::string(expr).find("f32") == std::string::npos;
    EXPECT_EQ(p.cuda.find("loom::stmatrix_x4(") != std::string::npos, b16);
    // EPI_SYNC=1: one named barrier per strip (4 of 64 bf16 columns, 8 of 32 f32 ones),
    // each after the storing thread's wait for the strip before.
    EXPECT_EQ(p.cuda.find("loom::bulk_wait_group_read<1>()"), std::string::npos);
    size_t bars = 0;
    for (size_t at = p.cuda.find("loom::bar_sync("); at != std::string::npos;
         at = p.cuda.find("loom::bar_sync(", at + 1))
      ++bars;
    EXPECT_EQ(bars, b16 ? 4u : 8u);
    CompileResult r = nvrtc(p.cuda);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// The register-A GPU cases compile without spills (their accumulators, A fragments and
// addresses fit the consumers' registers) and issue the _rs wrapper.
TEST(WgmmaCompile, RegisterACasesCompileWithoutSpills) {
  for (const wgmma_rs_test::Case& c : wgmma_rs_test::cases()) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(c.expr, opt);
    EXPECT_NE(p.cuda.find("_rs"), std::string::npos);
    CompileResult r = nvrtc(p.cuda);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// The transposing TMA stage's GPU cases compile without spills: the staged values (32 per
// thread at 128x256x32) beside the 128 accumulators fit the consumers' registers; the
// transpose stores 16-byte vectors into the swizzled K-major slab, and the wgmma is the
// shared-A form.
TEST(WgmmaCompile, TransposingTmaStageCasesCompileWithoutSpills) {
  for (const wgmma_transpose_test::Case& c : wgmma_transpose_test::cases()) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(c.expr, opt);
    EXPECT_EQ(p.cuda.find("_rs("), std::string::npos);
    const std::string slab = c.knobs.find("SLAB_B=kinner") != std::string::npos ? "B_s" : "A_s";
    const size_t store = p.cuda.find("(&loom_t_" + slab + "[loom::swz<");
    ASSERT_NE(store, std::string::npos) << p.cuda;
    EXPECT_EQ(p.cuda.rfind("loom::st_v4_", store), p.cuda.rfind('\n', store) + 1 +
              p.cuda.substr(p.cuda.rfind('\n', store) + 1).find_first_not_of(' '));
    EXPECT_NE(p.cuda.find("loom::bar_sync(15, "), std::string::npos);
    CompileResult r = nvrtc(p.cuda);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    // The transpose's registers beside the accumulators leave the wgmmas asynchronous.
    nvrtc_check::expect_wgmma_not_serialized(r);
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// The register fills of an M-major tf32 A read its slab where TMA wrote it: the register
// form's swapped 4096^3 GEMM with B [K, N] has B^T's slab [32][128] (BK x BM) in four 32-column
// chunks of 32 x 32 (128-byte swizzle spans), so column c of row r lies at
// c / 32 * 1024 + r * 32 + c % 32, then swizzled. Codegen once placed thread accesses by
// the swizzle alone (r * 128 + c): the M-major fills computed wrong products on H100
// (2026-11-22) while the interpreter, which applies the permutation, passed them.
TEST(WgmmaCompile, MMajorRegisterFillsReadTheChunkedLayout) {
  // The register forms (the defaults until the transposing stage took over, 2026-11-28).
  const std::string regs =
      "ATOM=wgmma_tf32,BM=128,BN=256,WM=2,WN=1,FM=1,FN=1,BK=32,STAGE=tma,SWIZZLE=128B,STAGES=4,"
      "WGMMA_A=regs,WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2,GROUP_M=8,";
  for (const auto& [expr, knobs] :
       std::vector<std::pair<std::string, std::string>>{
           {"matmul(A[4096,4096]:tf32, B[4096,4096]:tf32)", regs + "SWAP_AB=1,EPILOGUE=direct"},
           {"matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32.T)",
            regs + "SWAP_AB=0,EPILOGUE=tma_store,EPI_BUFFERS=2"}}) {
    SCOPED_TRACE(expr);
    CompileOptions opt;
    opt.knobs = Knobs::parse(knobs);
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(expr, opt);
    EXPECT_EQ(p.state.used_knobs.at("WGMMA_A"), "regs");
    const std::string slab = p.state.used_knobs.at("SWAP_AB") == "1" ? "B_s" : "A_s";
    ASSERT_EQ(p.state.kernel.tensor(slab).row_chunk, 32);
    // The default fills load the raw bits (TF32_ROUND=none: ld_f32).
    const size_t fill = p.cuda.find("loom::ld_f32(&loom_t_" + slab + "[");
    ASSERT_NE(fill, std::string::npos) << p.cuda;
    const std::string line = p.cuda.substr(fill, p.cuda.find('\n', fill) - fill);
    EXPECT_NE(line.find("% 128 / 32 * 1024"), std::string::npos) << line;  // the column's chunk
    CompileResult r = nvrtc(p.cuda);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// A tf32 register A is converted once at most: TF32_ROUND=none (the default) loads the raw
// bits (ld_f32) and converts nothing, from a tf32 or an f32 slab; with TF32_ROUND=rna its
// element fills from a tf32 slab round (ld_tf32: cvt.rna) and the wgmma passes the bits on
// (a second cvt.rna per value doubled the fill's conversions), and an f32 slab
// (ATOM=wgmma_tf32 on :f32 tensors) keeps the cvt at the wgmma. The swapped 4096^3 form
// with B [K, N] and the A.T form, without spills.
TEST(WgmmaCompile, Tf32RegisterFillsConvertAtMostOnce) {
  const std::string regs =
      "ATOM=wgmma_tf32,BM=128,BN=256,WM=2,WN=1,FM=1,FN=1,BK=32,STAGE=tma,SWIZZLE=128B,STAGES=4,"
      "WGMMA_A=regs,WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2,GROUP_M=8,";
  const std::string swapped = regs + "SWAP_AB=1,EPILOGUE=direct";
  const std::string a_t = regs + "SWAP_AB=0,EPILOGUE=tma_store,EPI_BUFFERS=2";
  struct Case {
    std::string expr, knobs, slab;
    bool rounded_fill, cvt_at_wgmma;
  };
  const std::string kn = "matmul(A[4096,4096]:tf32, B[4096,4096]:tf32)";
  const std::string at = "matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32.T)";
  for (const Case& c : std::vector<Case>{
           {kn, swapped + ",TF32_ROUND=rna", "B_s", true, false},
           {kn, swapped, "B_s", false, false},
           {at, a_t + ",TF32_ROUND=rna", "A_s", true, false},
           {at, a_t, "A_s", false, false},
           {"matmul(A[4096,4096]:f32, B[4096,4096]:f32)", swapped + ",TF32_ROUND=rna", "B_s",
            false, true},
           {"matmul(A[4096,4096]:f32, B[4096,4096]:f32)", swapped, "B_s", false, false}}) {
    SCOPED_TRACE(c.expr + " knobs " + c.knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(c.knobs);
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(c.expr, opt);
    const std::string fill = "(&loom_t_" + c.slab + "[";
    EXPECT_EQ(p.cuda.find("loom::ld_tf32" + fill) != std::string::npos, c.rounded_fill);
    EXPECT_EQ(p.cuda.find("loom::ld_f32" + fill) != std::string::npos, !c.rounded_fill);
    EXPECT_EQ(p.cuda.find("loom::cvt_rna_tf32(") != std::string::npos, c.cvt_at_wgmma);
    EXPECT_NE(p.cuda.find("_rs("), std::string::npos);
    CompileResult r = nvrtc(p.cuda);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// WGMMA_FILLS=slab indexes the fragment by slab parity, which NVVM reduces to SSA values:
// with one copy of the slab loop's body in the source, the next slab's fills would write
// the PTX registers the previous slab's group, still in flight, reads (nvdisasm showed one
// set of 16 registers refilled at the loop's top). The loop carries #pragma unroll 2, so
// each parity has its own instructions and registers; the step fills keep one copy.
TEST(WgmmaCompile, SlabFillsUnrollTheSlabLoopByTwo) {
  const std::string kn = "matmul(A[4096,4096]:tf32, B[4096,4096]:tf32)";
  for (const bool slab : {false, true}) {
    CompileOptions opt;
    opt.knobs = Knobs::parse(slab ? "WGMMA_FILLS=slab" : "");
    opt.target = Target::for_arch("sm_90a");
    const CompiledProgram p = compile_expression(kn, opt);
    EXPECT_EQ(p.state.used_knobs.at("WGMMA_FILLS"), slab ? "slab" : "step");
    EXPECT_EQ(p.cuda.find("#pragma unroll 2") != std::string::npos, slab);
    if (!slab) continue;
    CompileResult r = nvrtc(p.cuda);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.stack_frame_bytes, 0) << name;  // the parity-indexed fragment stays in registers
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
    }
  }
}

TEST(WgmmaCompile, AWgmmaWrapperOutsideSm90aIsAFrontEndErrorNamingIt) {
  // Plain sm_90 has no wgmma: the guard makes that a compile error with the wrapper's
  // name instead of a ptxas failure.
  const AtomDef& a = *wgmma_atom(DType::BF16, 64);
  const std::string src = std::string("#include \"loom_device.cuh\"\n") +
                          wgmma_wrapper_source(a, false) +
                          "extern \"C\" __global__ void k(float* o, unsigned long long d) {\n"
                          "  float acc[32] = {};\n"
                          "  loom::wgmma_m64n64k16_f32_bf16_ss<0, 0>(acc, d, d, 0);\n"
                          "  o[threadIdx.x] = acc[0];\n}\n";
  try {
    nvrtc(src, "sm_90");
    FAIL() << "wgmma needs sm_90a";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wgmma_m64n64k16_f32_bf16_ss"), std::string::npos)
        << e.what();
  }
}

TEST(WgmmaWrappers, SourceSpellsTheInstructionAndItsOperands) {
  const std::string ss = wgmma_wrapper_source(*wgmma_atom(DType::BF16, 128), false);
  EXPECT_NE(ss.find("template <int TransA, int TransB>"), std::string::npos) << ss;
  EXPECT_NE(ss.find("void wgmma_m64n128k16_f32_bf16_ss(float (&d)[64], unsigned long long "
                    "desc_a, unsigned long long desc_b, int scale_d)"),
            std::string::npos)
      << ss;
  EXPECT_NE(ss.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), std::string::npos);
  // 64 accumulators, then desc_a %64, desc_b %65, scale_d %66, the two immediates.
  EXPECT_NE(ss.find("%64, %65, p, 1, 1, %67, %68;"), std::string::npos) << ss;
  EXPECT_NE(ss.find("setp.ne.b32 p, %66, 0;"), std::string::npos) << ss;
  EXPECT_NE(ss.find("\"+f\"(d[63])"), std::string::npos);
  EXPECT_EQ(ss.find("\"+f\"(d[64])"), std::string::npos);

  const std::string rs = wgmma_wrapper_source(*wgmma_atom(DType::F16, 8), true);
  EXPECT_NE(rs.find("template <int TransB>"), std::string::npos) << rs;
  EXPECT_NE(rs.find("wgmma_m64n8k16_f32_f16_rs(float (&d)[4], const unsigned (&a)[4]"),
            std::string::npos)
      << rs;
  EXPECT_NE(rs.find("{%4, %5, %6, %7}, %8, p, 1, 1, %10;"), std::string::npos) << rs;

  const std::string tf = wgmma_wrapper_source(*wgmma_atom(DType::TF32, 256), false);
  EXPECT_EQ(tf.find("template"), std::string::npos) << "tf32 has no transpose immediates";
  EXPECT_NE(tf.find("%128, %129, p, 1, 1;"), std::string::npos) << tf;

  EXPECT_THROW(wgmma_wrapper_source(atom("mma_m16n8k16_f32_f16"), false), Error);
}

}  // namespace
}  // namespace loom
