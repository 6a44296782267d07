// SWAP_AB on sm_90a without a GPU: the decode defaults choose the swapped wgmma schedule,
// and every swapped kernel of the GPU test (tests/gpu/test_hopper_gemm.cpp, suite SwapAb)
// compiles with NVRTC for sm_90a without spills, so the GPU run is left with the numerics.
#include <gtest/gtest.h>

#include "codegen/cuda.h"
#include "driver/compile.h"
#include "frontend/parser.h"
#include "passes/defaults.h"
#include "driver/run.h"
#include "runtime/nvrtc.h"

namespace loom {
namespace {

CompileResult nvrtc(const CompiledProgram& c) {
  CompileRequest req;
  req.source = c.cuda;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = "sm_90a";
  return compile(req, nullptr);
}

// The H200's DRAM peak as `loom run` derives it (memory clock 3.201 GHz x 2 x 768-byte bus).
constexpr int64_t kH200DramBytesPerS = int64_t(3201000) * 1000 * 2 * 768;

Knobs resolved(const std::string& expr, const std::string& arch = "sm_90a",
               int64_t dram_bytes_per_s = 0) {
  CompileOptions opt;
  opt.target = Target::for_arch(arch);
  if (dram_bytes_per_s > 0) opt.target.dram_bytes_per_s = dram_bytes_per_s;
  opt.stop_after = "l:000_lower_graph";
  return compile_expression(expr, opt).state.knobs;
}

TEST(SwapAbDefaults, DecodeOnSm90aRunsSwappedOnWgmma) {
  // 16 x 4096 x 4096: one m64n16k16 atom per 64-row CTA (64 CTAs: enough to stream, so no
  // K split), BK = 64, 16 stages of 10 KiB.
  Knobs d16 = resolved("linear(X[16,4096]:bf16, W[4096,4096]:bf16)");
  EXPECT_EQ(d16.get_str("ATOM", ""), "wgmma_bf16");
  EXPECT_EQ(d16.get_int("SWAP_AB", 0), 1);
  EXPECT_EQ(d16.get_int("BN", 0), 16);
  EXPECT_EQ(d16.get_int("WM", 0), 1);
  EXPECT_EQ(d16.get_int("BK", 0), 64);
  EXPECT_EQ(d16.get_int("STAGES", 0), 16);
  EXPECT_EQ(d16.get_int("WARP_SPECIALIZE", 0), 1);
  EXPECT_FALSE(d16.has("CLUSTER_K"));
  // Fewer weight tiles than ~45% of the 132 SMs: K is split in clusters, 2-CTA ones at N =
  // 2048 (64 CTAs; 4-CTA clusters would need 128 CTAs, more than the 120 that 4-clusters
  // can keep resident), 4-CTA ones at N = 1024 (64 CTAs).
  EXPECT_EQ(resolved("linear(X[16,4096]:bf16, W[2048,4096]:bf16)").get_int("CLUSTER_K", 0), 2);
  EXPECT_EQ(resolved("linear(X[16,4096]:bf16, W[1024,4096]:bf16)").get_int("CLUSTER_K", 0), 4);
  EXPECT_FALSE(resolved("linear(X[16,4096]:bf16, W[8192,4096]:bf16)").has("CLUSTER_K"));
  // The grid follows the DRAM's peak: H200's 4.9 TB/s needs more than 64 streaming CTAs, so
  // N = 4096 splits K in 2-clusters there (the peak as `loom run` derives it from the
  // device's memory clock and bus width); N = 2048 still stops at 2-clusters.
  DeviceInfo h200_device;
  h200_device.cc_major = 9, h200_device.sm_count = 132, h200_device.smem_per_block_optin = 232448;
  h200_device.mem_clock_khz = 3201000, h200_device.mem_bus_width = 6144;
  const int64_t h200 = target_for_device(h200_device).dram_bytes_per_s;
  EXPECT_EQ(h200, kH200DramBytesPerS);
  EXPECT_EQ(resolved("linear(X[16,4096]:bf16, W[4096,4096]:bf16)", "sm_90a", h200).get_int("CLUSTER_K", 0), 2);
  EXPECT_EQ(resolved("linear(X[16,4096]:bf16, W[2048,4096]:bf16)", "sm_90a", h200).get_int("CLUSTER_K", 0), 2);
  // M = 64: cuBLAS's tiling, two 32-column halves, 64-deep slabs 16 deep; no cluster (the
  // 2-CTA slab multicast measured slower on H100).
  Knobs d64 = resolved("linear(X[64,4096]:bf16, W[4096,4096]:bf16)");
  EXPECT_EQ(d64.get_int("BN", 0), 32);
  EXPECT_EQ(d64.get_int("BK", 0), 64);
  EXPECT_EQ(d64.get_int("STAGES", 0), 16);
  EXPECT_FALSE(d64.has("CLUSTER_N"));
  EXPECT_FALSE(d64.has("CLUSTER_K"));
  // A ragged M rounds up to the atom's step of 8; f16 takes wgmma_f16.
  Knobs d20 = resolved("matmul(A[20,4096]:f16, B[4096,2048]:f16)");
  EXPECT_EQ(d20.get_str("ATOM", ""), "wgmma_f16");
  EXPECT_EQ(d20.get_int("BN", 0), 24);
}

// Where 64-row CTAs would take between one and two waves and 128-row ones fit in one
// (N = 10240 on 132 SMs: 160 against 80), the swapped decode tile is 128 rows tall, two
// consumer warpgroups without a register split; within one wave (N = 6144) and past two
// (N = 28672) it stays 64 rows.
TEST(SwapAbDefaults, DecodeTileIsTallBetweenOneAndTwoWaves) {
  for (const char* e : {"linear(X[1,8192]:bf16, W[10240,8192]:bf16)",
                        "linear(X[16,8192]:bf16, W[10240,8192]:bf16)"}) {
    SCOPED_TRACE(e);
    Knobs k = resolved(e);
    EXPECT_EQ(k.get_int("SWAP_AB", 0), 1);
    EXPECT_EQ(k.get_int("WM", 0), 2);
    EXPECT_EQ(k.get_int("CONSUMER_REGS", -1), 0);
  }
  for (const char* e : {"linear(X[1,4096]:bf16, W[6144,4096]:bf16)",
                        "linear(X[16,4096]:bf16, W[28672,4096]:bf16)"}) {
    SCOPED_TRACE(e);
    Knobs k = resolved(e);
    EXPECT_EQ(k.get_int("SWAP_AB", 0), 1);
    EXPECT_EQ(k.get_int("WM", 0), 1);
  }
  // The ring depths of the swapped decode tiles, generic sm_90a (the H100's DRAM) and on a
  // fast-DRAM card (the H200's). The tall tile: as deep as fits (11 slabs at M <= 8, 10 at
  // M = 32), except on a fast-DRAM card over at most 3/4 of the SMs (N = 10240: 80 CTAs;
  // 11008: 86), where 8 slabs measured faster; N = 14336 (112 CTAs) keeps the deep ring.
  // 64-row CTAs between two and four waves (N = 28672: 448) on a fast-DRAM card: two per SM
  // (10 slabs at M <= 16, 9 of 12 KiB at M = 32); past four waves (57344) and on the H100
  // the 16-deep ring.
  struct Ring {
    const char* expr;
    int64_t dram_bytes_per_s, stages;
  };
  for (const Ring& r : {Ring{"linear(X[1,8192]:bf16, W[10240,8192]:bf16)", 0, 11},
                        Ring{"linear(X[1,8192]:bf16, W[10240,8192]:bf16)", kH200DramBytesPerS, 8},
                        Ring{"linear(X[32,4096]:bf16, W[11008,4096]:bf16)", kH200DramBytesPerS, 8},
                        Ring{"linear(X[16,8192]:bf16, W[14336,8192]:bf16)", kH200DramBytesPerS, 11},
                        Ring{"linear(X[16,4096]:bf16, W[28672,4096]:bf16)", 0, 16},
                        Ring{"linear(X[16,4096]:bf16, W[28672,4096]:bf16)", kH200DramBytesPerS, 10},
                        Ring{"linear(X[32,4096]:bf16, W[28672,4096]:bf16)", kH200DramBytesPerS, 9},
                        Ring{"linear(X[1,8192]:bf16, W[57344,8192]:bf16)", kH200DramBytesPerS, 16}})
    EXPECT_EQ(resolved(r.expr, "sm_90a", r.dram_bytes_per_s).get_int("STAGES", 0), r.stages)
        << r.expr << (r.dram_bytes_per_s ? " on an H200" : "");
}

// Decode GEMMs of 33..95 rows by their 64-row tile count against the 132 SMs: up to 66 tiles
// the halves 16 deep (above); below 7/8 of the SMs the halves with the ring cut to two CTAs
// per SM (N = 6144: 192 CTAs in one wave, not two); up to the SM count full width, one CTA per
// SM (N = 8192); past it 128-row CTAs at full width with the ring cut to keep them all
// resident (N = 10240: 80 CTAs; N = 28672: 224 CTAs, two per SM).
TEST(SwapAbDefaults, WideDecodeFillsOneWave) {
  struct Case {
    const char* expr;
    int64_t bn, wm, stages, ctas;
  };
  for (const Case& c : {Case{"linear(X[77,4096]:f16, W[4096,4096]:f16)", 40, 1, 16, 128},
                        Case{"linear(X[95,4096]:bf16, W[4096,4096]:bf16)", 48, 1, 16, 128},
                        Case{"linear(X[77,4096]:f16, W[6144,4096]:f16)", 40, 1, 8, 192},
                        Case{"linear(X[48,4096]:bf16, W[6144,4096]:bf16)", 24, 1, 10, 192},
                        Case{"linear(X[40,8192]:bf16, W[8192,8192]:bf16)", 40, 1, 16, 128},
                        Case{"linear(X[80,8192]:bf16, W[8192,8192]:bf16)", 80, 1, 12, 128},
                        Case{"linear(X[33,8192]:bf16, W[10240,8192]:bf16)", 40, 2, 10, 80},
                        Case{"linear(X[64,4096]:bf16, W[28672,4096]:bf16)", 64, 2, 4, 224}}) {
    SCOPED_TRACE(c.expr);
    CompileOptions opt;
    opt.target = Target::for_arch("sm_90a");
    CompiledProgram p = compile_expression(c.expr, opt);
    const auto& k = p.state.used_knobs;
    EXPECT_EQ(k.at("SWAP_AB"), "1");
    EXPECT_EQ(k.at("BN"), std::to_string(c.bn));
    EXPECT_EQ(k.at("WM"), std::to_string(c.wm));
    EXPECT_EQ(k.at("STAGES"), std::to_string(c.stages));
    if (c.wm == 2) {
      EXPECT_EQ(k.at("CONSUMER_REGS"), "0");
    }
    // One wave: as many CTAs as each SM must hold fit its shared memory (228 KiB, 1 KiB of
    // it reserved per block).
    ASSERT_EQ(p.state.kernel.kernels.size(), 1u);
    const KernelOp& kernel = p.state.kernel.kernels[0];
    const int64_t smem = kernel_smem_bytes(shared_layout(p.state.kernel, kernel), kernel);
    const int64_t per_sm = (c.ctas + 131) / 132;
    EXPECT_LE(per_sm * (smem + 1024), 232448 + 1024) << smem << " B per CTA";
    CompileResult r = nvrtc(p);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
    }
  }
}

// One row of medium tiles (M <= 128) with K >= 12288 splits K in two over tiles twice as
// wide (the same wave of CTAs, each reading half of X's K range); K = 8192 does not split.
TEST(SwapAbDefaults, OneRowMediumSplitsALongK) {
  Knobs l1 = resolved("linear(X[128,14336]:bf16, W[4096,14336]:bf16)");
  EXPECT_EQ(l1.get_int("SWAP_AB", 0), 0);
  EXPECT_EQ(l1.get_int("BN", 0), 64);
  EXPECT_EQ(l1.get_int("SPLITK", 0), 2);
  Knobs l5 = resolved("linear(X[128,28672]:bf16, W[8192,28672]:bf16)");
  EXPECT_EQ(l5.get_int("BN", 0), 128);
  EXPECT_EQ(l5.get_int("SPLITK", 0), 2);
  Knobs l2 = resolved("linear(X[128,8192]:bf16, W[8192,8192]:bf16)");
  EXPECT_EQ(l2.get_int("BN", 0), 64);
  EXPECT_EQ(l2.get_int("SPLITK", 1), 1);
}

// The H200 (4.9 TB/s, from 4 TB/s) runs the 128-row linears whose one-row pairs are at
// least 128 wide as pairs of 64-row CTAs in 2-CTA clusters along M (N = 8192: 128 x 8
// slabs, 10240: 160 x 7); N = 4096 and 6144 (pairs 64 and 96 wide), an N-major B and the
// H100 keep the one-row form; a long K keeps its split. The 512-row medium grid at K = 4096
// pairs along M on the H200 only; K = 2048 pairs on neither.
TEST(SwapAbDefaults, FastDramCardsPairTheWideOneRowLinearsAndK4096MediumGrids) {
  const int64_t h200 = kH200DramBytesPerS;
  const std::string n8192 = "linear(X[128,8192]:bf16, W[8192,8192]:bf16)";
  Knobs p8 = resolved(n8192, "sm_90a", h200);
  EXPECT_EQ(p8.get_int("BM", 0), 64);
  EXPECT_EQ(p8.get_int("WM", 0), 1);
  EXPECT_EQ(p8.get_int("BN", 0), 128);
  EXPECT_EQ(p8.get_int("STAGES", 0), 8);
  EXPECT_EQ(p8.get_int("CLUSTER_M", 0), 2);
  Knobs p10 = resolved("linear(X[128,8192]:bf16, W[10240,8192]:bf16)", "sm_90a", h200);
  EXPECT_EQ(p10.get_int("BM", 0), 64);
  EXPECT_EQ(p10.get_int("BN", 0), 160);
  EXPECT_EQ(p10.get_int("STAGES", 0), 7);
  EXPECT_EQ(p10.get_int("CLUSTER_M", 0), 2);
  Knobs h100 = resolved(n8192);
  EXPECT_EQ(h100.get_int("BM", 128), 128);
  EXPECT_EQ(h100.get_int("BN", 0), 64);
  EXPECT_EQ(h100.get_int("CLUSTER_M", 1), 1);
  for (const std::string& e : {std::string("linear(X[128,4096]:bf16, W[4096,4096]:bf16)"),
                               std::string("linear(X[128,4096]:bf16, W[6144,4096]:bf16)"),
                               std::string("matmul(A[128,8192]:bf16, B[8192,8192]:bf16)"),
                               std::string("linear(X[128,28672]:bf16, W[8192,28672]:bf16)")}) {
    SCOPED_TRACE(e);
    Knobs k = resolved(e, "sm_90a", h200);
    EXPECT_EQ(k.get_int("BM", 128), 128);
    EXPECT_EQ(k.get_int("CLUSTER_M", 1), 1);
    EXPECT_EQ(k.str(), resolved(e).str()) << "the H100's form";
  }
  const std::string m512 = "linear(X[512,4096]:bf16, W[4096,4096]:bf16)";
  EXPECT_EQ(resolved(m512, "sm_90a", h200).get_int("CLUSTER_M", 1), 2);
  EXPECT_EQ(resolved(m512).get_int("CLUSTER_M", 1), 1);
  EXPECT_EQ(resolved("linear(X[1024,2048]:bf16, W[2048,2048]:bf16)", "sm_90a", h200)
                .get_int("CLUSTER_M", 1), 1);
  EXPECT_EQ(resolved("linear(X[512,14336]:bf16, W[4096,14336]:bf16)").get_int("CLUSTER_M", 1), 2);
}

// Attention-shaped bmm: Q.K^T with K = 128 (two slabs a tile) on 128 x 256 tiles, whose
// rings follow the card's DRAM (H100: a ring of four tiles' store strips over a 2-slab
// mainloop ring; from 4 TB/s, H200: a 3-slab mainloop ring and 4 strips); K = 64 keeps
// 128 x 128 tiles; P.V with N = 128 one 128-wide tile (N = 64: 64).
TEST(SwapAbDefaults, AttentionShapedBmmTilesFollowTheCard) {
  const std::string qk = "bmm(Q[64,2048,128]:bf16, K[64,128,2048]:bf16)";
  Knobs h100 = resolved(qk);
  EXPECT_EQ(h100.get_int("BN", 0), 256);
  EXPECT_EQ(h100.get_int("STAGES", 0), 2);
  EXPECT_EQ(h100.get_int("EPI_BUFFERS", 0), 8);
  Knobs h200 = resolved(qk, "sm_90a", kH200DramBytesPerS);
  EXPECT_EQ(h200.get_int("BN", 0), 256);
  EXPECT_EQ(h200.get_int("STAGES", 0), 3);
  EXPECT_EQ(h200.get_int("EPI_BUFFERS", 0), 4);
  Knobs k64 = resolved("bmm(Q[512,512,64]:f16, K[512,64,512]:f16)");
  EXPECT_EQ(k64.get_int("BN", 0), 128);
  EXPECT_EQ(k64.get_int("EPI_BUFFERS", 0), 8);
  EXPECT_EQ(resolved("bmm(P[64,2048,2048]:bf16, V[64,2048,128]:bf16)").get_int("BN", 0), 128);
  EXPECT_EQ(resolved("bmm(P[256,1024,1024]:bf16, V[256,1024,64]:bf16)").get_int("BN", 0), 64);
  // A 64-wide P.V: a 6-deep ring on the H100, 4 on the H200.
  const std::string pv = "bmm(P[512,512,512]:f16, V[512,512,64]:f16)";
  EXPECT_EQ(resolved(pv).get_int("STAGES", 0), 6);
  EXPECT_EQ(resolved(pv, "sm_90a", kH200DramBytesPerS).get_int("STAGES", 0), 4);
}

// Batches of 128-row GEMMs: 128 x 128 tiles in a 6-deep ring on the H100, 128 x 256 in a
// 4-deep one on the H200 (bench/NOTES.md, 2026-11-28, GEMM defaults on the H200).
TEST(SwapAbDefaults, ThinBatchTilesFollowTheCard) {
  const std::string thin = "bmm(X[8,128,14336]:bf16, W[8,14336,4096]:bf16)";
  Knobs h100 = resolved(thin);
  EXPECT_EQ(h100.get_int("BN", 0), 128);
  EXPECT_EQ(h100.get_int("STAGES", 0), 6);
  Knobs h200 = resolved(thin, "sm_90a", kH200DramBytesPerS);
  EXPECT_EQ(h200.get_int("BN", 0), 256);
  EXPECT_EQ(h200.get_int("STAGES", 0), 4);
}

// Ragged 16-bit GEMMs with a wave of 64 x 64 tiles take the threads' wgmma form with
// 64-deep slabs in a 3-deep ring; fewer tiles keep mma.sync.
TEST(SwapAbDefaults, SmallRaggedGemmsRunWgmmaWithAWaveOfSmallTiles) {
  Knobs k = resolved("matmul(A[1000,333]:f16, B[333,777]:f16)");
  EXPECT_EQ(k.get_str("ATOM", ""), "wgmma_f16");
  EXPECT_EQ(k.get_int("BN", 0), 64);
  EXPECT_EQ(k.get_int("BK", 0), 64);
  EXPECT_EQ(k.get_int("STAGES", 0), 3);
  EXPECT_EQ(resolved("matmul(A[200,333]:f16, B[333,777]:f16)").get_str("ATOM", ""), "mma_f16");
}

TEST(SwapAbDefaults, OtherShapesAndTargetsDoNotSwap) {
  // sm_80 has no wgmma: its decode schedule stays mma.sync.
  Knobs sm80 = resolved("linear(X[16,4096]:bf16, W[4096,4096]:bf16)", "sm_80");
  EXPECT_EQ(sm80.get_str("ATOM", ""), "mma_bf16");
  EXPECT_EQ(sm80.get_int("SWAP_AB", 0), 0);
  // A transposed A whose 20-element rows TMA cannot load (40 B), more than 64 rows, a
  // narrow weight with a long K (the split-K class), f32 operands: no swap.
  for (const char* e : {"matmul(A[4096,20]:bf16.T, B[4096,4096]:bf16)",
                        "matmul(A[128,4096]:bf16, B[4096,4096]:bf16)",
                        "matmul(A[16,4096]:bf16, B[4096,512]:bf16)",
                        "matmul(A[16,4096]:f32, B[4096,4096]:f32)"}) {
    SCOPED_TRACE(e);
    EXPECT_EQ(resolved(e).get_int("SWAP_AB", 0), 0);
  }
  // An explicit tile was written for the unswapped GEMM: the default swap yields to it.
  CompileOptions opt;
  opt.knobs = Knobs::parse("ATOM=wgmma_bf16,BN=128,WM=2");
  opt.stop_after = "l:000_lower_graph";
  EXPECT_FALSE(compile_expression("linear(X[16,4096]:bf16, W[4096,4096]:bf16)", opt)
                   .state.knobs.has("SWAP_AB"));
}

// The swapped cases of the GPU test, plus the decode defaults at the suite's shapes.
TEST(SwapAbCompile, SwappedKernelsCompileForSm90aWithoutSpills) {
  const std::string tma = "STAGE=tma,SWIZZLE=128B,";
  const std::string swap = ",SWAP_AB=1,WN=1,FM=1,FN=1";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"linear(X[16,4096]:bf16, W[4096,4096]:bf16)", ""},
      {"linear(X[64,4096]:bf16, W[4096,4096]:bf16)", ""},
      {"matmul(A[16,4096]:bf16, B[4096,4096]:bf16)", ""},
      {"matmul(A[1,4096]:f16, B[4096,2048]:f16, out=f32)", ""},
      // narrow weights at decode (a 2048-wide Llama's KV projection, 8-CTA clusters over K),
      // and a decode step's fused epilogues (M = 1: its broadcast-style index fuses)
      {"linear(X[1,2048]:bf16, W[512,2048]:bf16)", ""},
      {"linear(X[16,2048]:f16, W[256,2048]:f16)", ""},
      {"linear(X[1,4000]:bf16, W[128,4000]:bf16)", ""},
      {"mul(silu(linear(X[1,2048]:bf16, W[8192,2048]:bf16)), E0[1,8192]:bf16)", ""},
      {"add(linear(X[1,8192]:bf16, W[2048,8192]:bf16), E0[1,2048]:bf16)", ""},
      {"matmul(A[24,1024]:f16, B[1024,2048]:f16)",
       "ATOM=wgmma_f16," + tma + "BK=64,STAGES=4" + swap + ",WM=1,BN=16"},
      {"matmul(A[20,520]:bf16, B[520,1096]:bf16)",
       "ATOM=wgmma_bf16," + tma + "BK=64,STAGES=4" + swap + ",WM=1,BN=24,WARP_SPECIALIZE=1"},
      {"relu(linear(X[24,2048]:bf16, W[3000,2048]:bf16, bias[3000]:bf16))",
       "ATOM=wgmma_bf16," + tma + "BK=64,STAGES=4" + swap + ",WM=1,BN=24,WARP_SPECIALIZE=1"},
      {"matmul(A[32,2048]:bf16, B[2048,4096]:bf16)",
       "ATOM=wgmma_bf16," + tma + "BK=128,STAGES=4" + swap + ",WM=2,BN=32,WARP_SPECIALIZE=1"},
      {"linear(X[48,4096]:f16, W[1024,4096]:f16)",
       "ATOM=wgmma_f16," + tma + "BK=128,STAGES=6" + swap + ",WM=1,BN=48,WARP_SPECIALIZE=1"},
  };
  for (const auto& [expr, knobs] : cases) {
    SCOPED_TRACE(expr + " knobs " + knobs);
    CompileOptions opt;
    opt.knobs = Knobs::parse(knobs);
    opt.target = Target::for_arch("sm_90a");
    CompiledProgram c = compile_expression(expr, opt);
    EXPECT_EQ(c.state.used_knobs.at("SWAP_AB"), "1");
    EXPECT_EQ(c.state.kernel.kernels.size(), 1u) << "the epilogue in the GEMM's kernel";
    ASSERT_NE(c.cuda.find("wgmma_m64n"), std::string::npos);
    CompileResult r = nvrtc(c);
    EXPECT_GT(r.cubin.size(), 0u);
    ASSERT_FALSE(r.resources.empty()) << r.log;
    for (const auto& [name, rep] : r.resources) {
      EXPECT_EQ(rep.spill_store_bytes, 0) << name;
      EXPECT_EQ(rep.spill_load_bytes, 0) << name;
      EXPECT_EQ(rep.stack_frame_bytes, 0) << name;
    }
  }
}

}  // namespace
}  // namespace loom
